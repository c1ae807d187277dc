"""A sweep's own cells, read from its sweep dir.

They are not guessed from its overrides (which would also match older records of the same algo and
env): every job dir holds the job's composed config (``.hydra/config.yaml``), whose cell key is
computed as the run computed it, and the JSON copy of each record it wrote (``record.json``, whose
cell key is read). A job that found its cell already done in the store wrote no record but still
has its config, so it counts too. The fp32 baselines of the same policies come along (see
`quarl.collate.load`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import OmegaConf

from quarl.config.keys import cell_key
from quarl.errors import QuarlError
from quarl.store.record_files import find_records

log = logging.getLogger(__name__)

JOB_CONFIG = ".hydra/config.yaml"


def launched_jobs(sweep_dir: Path) -> bool:
    """Whether `sweep_dir` holds a job (a composed config or a record): a sweep whose every cell was
    already done, such as a finished search run again, launches none."""
    if not sweep_dir.is_dir():
        return False
    return next(sweep_dir.rglob(JOB_CONFIG), None) is not None or next(find_records(sweep_dir), None) is not None


def sweep_cells(sweep_dir: Path) -> set[str]:
    """The cell keys of the jobs under `sweep_dir`: from each job's ``.hydra/config.yaml`` and from
    every record JSON copy there. A folder without either is refused with one sentence."""
    if not sweep_dir.is_dir():
        raise QuarlError(f"--sweep {sweep_dir} is not a folder: give a sweep dir (outputs/multirun/DATE/TIME).")
    cells = {str(r["run"]["cell_key"]) for r in find_records(sweep_dir) if r["run"].get("cell_key")}
    for path in sorted(sweep_dir.rglob(JOB_CONFIG)):
        try:
            cells.add(cell_key(OmegaConf.load(path)))
        except Exception as exc:  # a config this quarl cannot key (hand-edited, older): its records still count
            log.debug("No cell key from %s: %s", path, exc)
    if not cells:
        raise QuarlError(f"--sweep {sweep_dir} holds no job of a sweep (no {JOB_CONFIG} or record.json under it).")
    return cells
