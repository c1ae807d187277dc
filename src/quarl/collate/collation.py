"""The collation itself: `load` reads a study from the store, `collate` writes its outputs (the
package's docstring lists them). `quarl.collate` exports both, imported at first use."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from quarl.collate.frame import Notes, Results, prepare, select
from quarl.errors import QuarlError
from quarl.store.query import read_runs

log = logging.getLogger(__name__)


def _own_cells(runs: pd.DataFrame, cells: set[str]) -> pd.DataFrame:
    """The records of `cells`, and the fp32 records of the same policies (their baselines)."""
    own = runs[runs["cell_key"].isin(cells)]
    keys = ["policy_key"] + [k for k in ("eval.episodes", "eval.deterministic") if k in runs.columns]
    wanted = set(map(tuple, own[keys].astype(str).to_numpy()))
    same = pd.Series([tuple(r) in wanted for r in runs[keys].astype(str).to_numpy()], index=runs.index, dtype=bool)
    base = runs[(runs["quant"] == "fp32") & same]
    return runs[runs["cell_key"].isin(set(own["cell_key"]) | set(base["cell_key"]))]


def load(store: str | Path, filters: Mapping[str, Any] | None = None, cells: set[str] | None = None) -> Results:
    """The `Results` of the records in `store` that match `filters` (``{"algo": "dqn,ppo"}``); with
    `cells`, only those cell keys and the fp32 baselines of their policies (a sweep's own cells)."""
    path = Path(store)
    runs = read_runs(path)  # as they ran: an older fp16 record's quant.bits is 16
    notes = Notes()
    if runs.empty:
        notes.add(f"The store {path} holds no records yet: run a sweep first (python run.py -m ...).")
        study = prepare(runs, path)
    else:
        selected = select(runs, dict(filters or {}))
        if cells is not None:
            selected = _own_cells(selected, cells)
        study = prepare(selected, path)
        if selected.empty:
            shown = " ".join(f"{k}={v}" for k, v in (filters or {}).items())
            where = f" of the sweep's {len(cells)} cells" if cells is not None else ""
            notes.add(
                f"No records{where} in {path} match {shown or '(no filter)'}: `quarl results` lists what is there."
            )
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
    sweep: str | Path | None = None,
    overwrite: bool = False,
    log_y: bool = False,
    force: bool = False,
    formats: Sequence[str] | None = None,
) -> list[Path]:
    """Write every plot and table of the selected records under `out_dir`; returns the files written.

    `filters` select records by config key (the grammar of `quarl.store.query`; ``"dqn,ppo"`` means
    either); `sweep` (a sweep dir) keeps only that sweep's own cells (`quarl.collate.sweep.sweep_cells`);
    `bits` is the bit width of the grid in the weight report (2..16); `log_y` draws the weight
    histograms on a log count axis; `formats` are the files each figure is saved as (png, pdf or,
    by default, both); `command` is recorded in the README (the command that makes the same output). `out_dir`
    ends up holding this collation only: the files of an earlier collation there are replaced, and a
    non-empty folder quarl did not write is refused unless `overwrite` (which empties it first). A
    collation of the very same records with the same settings and code is not drawn again (its files
    are returned) unless `force`.
    """
    if not 2 <= int(bits) <= 16:
        raise QuarlError(f"--bits={bits} is out of range: the weight grid needs 2..16 bits.")
    from quarl.collate import outputs, plots  # matplotlib and seaborn load only when something is drawn

    formats = [formats] if isinstance(formats, str) else list(formats or plots.FIGURE_FORMATS)
    chosen = tuple(f for f in plots.FIGURE_FORMATS if f in formats)
    if not chosen or len(chosen) != len(set(formats)):
        every = " and/or ".join(plots.FIGURE_FORMATS)
        raise QuarlError(f"--formats {','.join(formats) or '(none)'}: figures are written as {every}.")
    from quarl.collate.sweep import sweep_cells
    from quarl.store.disk import cannot_make

    why = cannot_make(Path(out_dir))
    if why is not None:  # before any record is read or figure drawn
        raise QuarlError(f"--out {out_dir} cannot be written: {why}. Give a folder quarl can write into.")
    cells = sweep_cells(Path(sweep)) if sweep is not None else None
    study = load(store, filters, cells)
    out = Path(out_dir)
    settings = {"filters": dict(filters or {}), "bits": int(bits), "command": command, "log_y": log_y}
    if chosen != plots.FIGURE_FORMATS:  # a default collation keeps the digest it had before formats existed
        settings["formats"] = list(chosen)
    digest = outputs.inputs_digest(study, settings)
    unchanged = None if force else outputs.up_to_date(out, digest)
    if unchanged is not None:
        log.info(
            "%s is up to date: the same %d records, settings and code as when it was written.", out, len(study.done)
        )
        return unchanged
    outputs.clear_out(out, overwrite, Path(store))
    outputs.write_manifest(out, [], digest, in_progress=True)  # interrupted, it is still known as quarl's
    if study.empty:
        log.warning("Nothing to collate from %s; see the notes above.", store)
        written = outputs.write_readme(study, out, filters or {}, bits, command, [])
    else:
        with plots.formats(chosen):
            # a sweep's own collation leaves the store's Optuna studies out: a search draws its own in its sweep dir
            written = outputs.write_all(study, out, filters or {}, int(bits), command, log_y, searches=sweep is None)
    outputs.write_manifest(out, written, digest)
    return written
