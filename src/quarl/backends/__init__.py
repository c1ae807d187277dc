"""The execution backends, one module each (the interface and registry: quarl.config.backend_registry)."""
