"""What a cell is called in the log and whether it still needs running: light enough for a sweep
to ask about every cell before launching any (no torch, no SB3)."""

from __future__ import annotations

import logging
from typing import Any, Optional

from quarl.keys import cell_key

log = logging.getLogger("quarl.pipeline")


def label(cfg: Any) -> str:
    """`algo/env seed=N method`, as the log names a cell."""
    q = cfg.quant
    method = f"{q.method} {q.bits}-bit {q.scheme} {q.granularity}" if q.method in ("ptq", "qat") else q.method
    return f"{cfg.algo.name}/{cfg.env.name} seed={cfg.seed} {method}"


def finished(cfg: Any, status: Optional[str]) -> bool:
    """Whether a cell with this stored status needs no run: done or skipped (n/a), and force is off."""
    return not cfg.force and status in ("done", "skipped")


def log_skip(cfg: Any, status: Optional[str]) -> None:
    """The log line of a cell passed over because the store holds it."""
    log.info("Skipping %s: already in the store as %s (cell %s; force=true runs it again).", label(cfg), status,
             cell_key(cfg))
