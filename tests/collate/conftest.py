"""The real sweep that collation tests share: run and collated once for all xdist workers.

Whoever comes first builds it under a file lock; the others wait, then read it. Under xdist the first
worker starts building it in the background as soon as the tests are collected, so that it is ready
before any test needs it and no worker sits idle on the lock (about 40 s of work)."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from filelock import FileLock

from tests.collate.studies import SWEEP
from tests.conftest import quarl_cli, run_quarl

SHARED = ("sweep", "store", "collated")  # the fixtures that read the shared sweep
_background: list[threading.Thread] = []


def shared_folder(base: Path) -> Path:
    """This test run's folder for the shared sweep (`base`: a worker's or the lone process's base temp)."""
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "collate-sweep"


def build_sweep(shared: Path) -> Path:
    """A 2 algos x 2 envs x 3 bit widths (+ fp16, fp32) x 2 seeds sweep of the real app in `shared`."""
    with FileLock(str(shared) + ".lock"):
        if not (shared / "done").exists():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            done = run_quarl(shared, *SWEEP)
            (shared / "sweep.log").write_text(done.stdout + done.stderr)
            (shared / "done").touch()
    return shared


def build_collated(shared: Path) -> Path:
    """`quarl collate` of the shared sweep's store (no filters) into `shared`/collated."""
    out, done = shared / "collated", shared / "collated.done"
    with FileLock(str(out) + ".lock"):
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)
            run = quarl_cli(shared, "collate", "--store", str(shared / "outputs/results.sqlite"), "--out", str(out))
            assert run.returncode == 0, run.stdout + run.stderr
            done.touch()
    return out


def pytest_collection_finish(session: pytest.Session) -> None:
    """On the first xdist worker, when a collected test reads the shared sweep: build it (and its
    collation) in a background thread."""
    if os.environ.get("PYTEST_XDIST_WORKER") != "gw0":
        return
    if not any(set(SHARED) & set(getattr(item, "fixturenames", ())) for item in session.items):
        return
    shared = shared_folder(session.config._tmp_path_factory.getbasetemp())  # the tmp_path_factory fixture's
    thread = threading.Thread(target=lambda: build_collated(build_sweep(shared)), name="collate-sweep", daemon=True)
    thread.start()
    _background.append(thread)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A background build no test waited for ends before its worker does."""
    for thread in _background:
        thread.join()


@pytest.fixture(scope="session")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared sweep's folder (its store under outputs/, its run's log in sweep.log)."""
    return build_sweep(shared_folder(tmp_path_factory.getbasetemp()))


@pytest.fixture(scope="session")
def store(sweep: Path) -> Path:
    return sweep / "outputs/results.sqlite"


@pytest.fixture(scope="session")
def collated(sweep: Path) -> Path:
    """`quarl collate` on the sweep's store, into a fresh folder (the tests only read it)."""
    return build_collated(sweep)
