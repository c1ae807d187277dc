"""What a cell is called in the log and whether it still needs running: light enough for a sweep
to ask about every cell before launching any (no torch, no SB3)."""

from __future__ import annotations

import copy
import logging
import os
from typing import Any, Optional

from omegaconf import DictConfig, open_dict

from quarl.config import method_registry, schema
from quarl.config.keys import cell_key

log = logging.getLogger("quarl.pipeline")


def label(cfg: Any) -> str:
    """`algo/env seed=N method`, as the log names a cell."""
    return f"{cfg.algo.name}/{cfg.env.name} seed={cfg.seed} {method_registry.of(cfg).describe(cfg.quant)}"


def finished(cfg: Any, status: Optional[str]) -> bool:
    """Whether a cell with this stored status needs no run: done or skipped (n/a), and force is off."""
    return not cfg.force and status in ("done", "skipped")


def log_skip(cfg: Any, status: Optional[str]) -> None:
    """The log line of a cell passed over because the store holds it."""
    log.info(
        "Skipping %s: already in the store as %s (cell %s; force=true runs it again).",
        label(cfg),
        status,
        cell_key(cfg),
    )


# Small MLP policies train fastest on one thread (measured: benchmarks/bench_foundation.py), and a
# cell on one thread leaves the other cores to the cells beside it.
DEFAULT_THREADS = 1
ALLOTMENT_VARS = ("SLURM_CPUS_PER_TASK",)  # what a launcher allots a job


def torch_threads(cfg: Any) -> int:
    """The torch threads of a cell: `train.threads`, else the launcher's allotment, else DEFAULT_THREADS."""
    threads = cfg.train.get("threads")
    if threads:
        return int(threads)
    for var in ALLOTMENT_VARS:
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return DEFAULT_THREADS


def resolve(cfg: DictConfig, warn: bool) -> tuple[str, DictConfig]:
    """The cell's key and the config it runs with, built once from the composed `cfg` (left as it is):
    validated, the method's shared settings settled to the values it really uses (`warn`: say so, the
    user typed them), its torch threads, and its method's derived settings (QAT's delay). The record
    stores this config; the key is taken before the settings no key holds (threads, derived ones)."""
    cfg = copy.deepcopy(cfg)
    schema.check(cfg)
    method_registry.settle(cfg, warn=warn)
    key = cell_key(cfg)
    with open_dict(cfg):
        cfg.train.threads = torch_threads(cfg)
    method_registry.of(cfg).prepare(cfg)
    return key, cfg
