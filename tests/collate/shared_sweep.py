"""The real sweep that collation tests share, as session fixtures (a pytest plugin of tests/conftest.py):
run and collated once for all xdist workers. It is built in the background from the run's first test,
at the lowest priority (nice 19): it takes the cores only while the tests leave one idle (a test
waiting on SLURM, on Ray, on a timer), and slows no test that measures time. A worker that reaches
the collation tests before it is done waits for the rest, as it would have waited for all of it."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

from tests.collate.studies import SWEEP
from tests.conftest import quarl_cli, run_quarl


def _folder(factory: pytest.TempPathFactory) -> Path:
    """This pytest run's sweep folder, shared by its xdist workers."""
    base = factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "collate-sweep"


def _lock(folder: Path) -> FileLock:
    return FileLock(str(folder) + ".lock")


def _build(folder: Path, nice: int = 0) -> None:
    """Run the sweep into `folder`, then `quarl collate` its store (no filters) into `collated/`, each
    part unless already done, at `nice` lower priority. The caller holds the folder's lock."""
    if not (folder / "done").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        done = run_quarl(folder, *SWEEP, nice=nice)
        (folder / "sweep.log").write_text(done.stdout + done.stderr)
        (folder / "done").touch()
    if not (folder / "collated.done").exists():
        shutil.rmtree(folder / "collated", ignore_errors=True)
        done = quarl_cli(folder, "collate", "--store", "outputs/results.sqlite", "--out", "collated", nice=nice)
        assert done.returncode == 0, done.stdout + done.stderr
        (folder / "collated.done").touch()


def _build_unless_another_worker_does(folder: Path) -> None:
    lock = _lock(folder)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        return
    try:
        _build(folder, nice=19)
    except Exception:  # noqa: BLE001  # the `sweep` fixture builds it again in the test and fails there, with the output
        pass
    finally:
        lock.release()


@pytest.fixture(scope="session", autouse=True)
def _sweep_in_the_background(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Start building the sweep beside this worker's tests, if any test of the run needs it."""
    if any("sweep" in item.fixturenames for item in request.session.items):
        threading.Thread(target=_build_unless_another_worker_does, args=(_folder(tmp_path_factory),),
                         daemon=True).start()


@pytest.fixture(scope="session")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 algos x 2 envs x 3 bit widths (+ fp16, fp32) x 2 seeds sweep of the real app, and its
    collation; the tests only read it."""
    folder = _folder(tmp_path_factory)
    with _lock(folder):  # held while a worker builds it
        _build(folder)
    return folder


@pytest.fixture(scope="session")
def store(sweep: Path) -> Path:
    return sweep / "outputs/results.sqlite"


@pytest.fixture(scope="session")
def collated(sweep: Path) -> Path:
    """`quarl collate` on the sweep's store, with no filters."""
    return sweep / "collated"
