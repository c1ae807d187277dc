"""The real sweep that collation tests share: run and collated once for all xdist workers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from filelock import FileLock

from quarl import cli
from tests.collate.studies import SWEEP
from tests.conftest import run_quarl


@pytest.fixture(scope="session")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 algos x 2 envs x 3 bit widths (+ fp16, fp32) x 2 seeds sweep of the real app, shared by the
    xdist workers (the first builds it under a file lock, the others reuse it)."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "collate-sweep"  # this session's
    with FileLock(str(shared) + ".lock"):
        if not (shared / "done").exists():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            done = run_quarl(shared, *SWEEP)
            (shared / "sweep.log").write_text(done.stdout + done.stderr)
            (shared / "done").touch()
    return shared


@pytest.fixture(scope="session")
def store(sweep: Path) -> Path:
    return sweep / "outputs/results.sqlite"


@pytest.fixture(scope="session")
def collated(sweep: Path, store: Path) -> Path:
    """`quarl collate` on the sweep's store (no filters), into a fresh folder; once for all xdist
    workers, as the sweep (the tests only read it)."""
    out, done = sweep / "collated", sweep / "collated.done"
    with FileLock(str(out) + ".lock"):
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)
            assert cli.main(["collate", "--store", str(store), "--out", str(out)]) == 0
            done.touch()
    return out
