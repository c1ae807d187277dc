"""Collation: the store's records turned into the study's plots and tables.

``collate(store, out_dir, filters)`` writes, under `out_dir`:

- ``sweet_spot/<algo>_<env>.png|pdf`` (and ``<env>_all-algos`` when several algorithms ran there):
  mean reward vs bits with 95% bootstrap intervals across seeds; ``sweet_spot/points.csv``;
- ``tables/errors_<algo>.md|csv|tex``: the paper's table (fp32, fp16, E_fp16, int8, E_int8, mean
  row; published values beside ours), ``tables/e_by_bits_<algo>.*`` (E per bits x env) and
  ``tables/published_vs_reproduced.*``;
- ``aggregate/aggregate.png|pdf|csv`` (IQM and mean of the normalised score 1 - E per method and
  bits, stratified bootstrap) and ``aggregate/heatmap_E.png|pdf`` (E over algo x env x bits);
- ``weights/<algo>_<env>_seed<k>.png|pdf`` (histograms with the n-bit grid), ``weights/layers.*``
  (statistics per layer), ``weights/spread_vs_E.png|pdf|csv`` (spread vs E across policies);
- ``README.md``: what was selected, how many runs, every note (missing baselines, single seeds).

Bad input (an empty store, filters that match nothing, one seed, a missing baseline) gives notes
and whatever outputs can still be made, never a traceback.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from quarl.collate.frame import Notes, Study, prepare, select
from quarl.errors import QuarlError
from quarl.store import Store

__all__ = ["collate", "load", "prepare", "select", "Study"]

log = logging.getLogger(__name__)


def load(store: str | Path, filters: Mapping[str, Any] | None = None) -> Study:
    """The `Study` of the records in `store` that match `filters` (``{"algo": "dqn,ppo"}``)."""
    path = Path(store)
    if not path.is_file():
        raise QuarlError(f"There is no results store at {path}: run `python run.py` first, or pass --store PATH.")
    runs = Store(path).runs()
    notes = Notes()
    if runs.empty:
        notes.add(f"The store {path} holds no records yet: run a sweep first (python run.py -m ...).")
        study = prepare(runs, path)
    else:
        selected = select(runs, dict(filters or {}))
        study = prepare(selected, path)
        if selected.empty:
            shown = " ".join(f"{k}={v}" for k, v in (filters or {}).items())
            notes.add(f"No records in {path} match {shown}: `quarl results` lists what is there.")
        elif study.empty:
            notes.add("None of the selected records is done: nothing to collate.")
    study.notes[:0] = notes
    return study


def collate(
    store: str | Path,
    out_dir: str | Path,
    filters: Mapping[str, Any] | None = None,
    bits: int = 8,
    command: str | None = None,
) -> list[Path]:
    """Write every plot and table of the selected records under `out_dir`; returns the files written.

    `filters` select records by config key (values as text; ``"dqn,ppo"`` means either); `bits`
    is the bit width of the grid in the weight report (2..16); `command` is recorded in the README
    (the command that makes the same output).
    """
    if not 2 <= int(bits) <= 16:
        raise QuarlError(f"--bits={bits} is out of range: the weight grid needs 2..16 bits.")
    from quarl.collate import outputs  # matplotlib and seaborn load only when something is drawn

    study = load(store, filters)
    out = Path(out_dir)
    if study.empty:
        log.warning("Nothing to collate from %s; see the notes above.", store)
        return outputs.write_readme(study, out, filters or {}, bits, command, [])
    return outputs.write_all(study, out, filters or {}, int(bits), command)

