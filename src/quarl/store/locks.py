"""File locks that make concurrent jobs take turns (one trains a policy, one runs a cell), kept out
of sight in `<store.policies>/.locks/`, with a log line while a job waits for another."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

log = logging.getLogger(__name__)

LOCKS_DIR = ".locks"


@contextmanager
def taking_turns(root: Path, name: str, what: str) -> Iterator[None]:
    """Hold the lock `name` under `root`/.locks; where another process holds it, say so (`what` it
    is doing) and wait. A killed process's lock is released by the operating system."""
    folder = root / LOCKS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / f"{name}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info("Waiting for another process that is %s (lock %s)", what, lock.lock_file)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
