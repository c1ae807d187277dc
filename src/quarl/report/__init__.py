"""Sections of the reproduction report (`quarl report`) beyond the paper's tables: the published
conditions, and training for robustness. Each module builds one section from the campaign's records."""
