"""Shared test helpers: compose configs in-process, run `python run.py` in a scratch folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from quarl.app import CONF_DIR
from quarl.config import method_registry, schema
from quarl.sweeps import fresh_copy
from tests.warm_run import WarmRun

pytest_plugins = ["tests.cluster.fixtures"]  # the SLURM cluster and the Ray head, shared by the tests that need them

ROOT = Path(__file__).resolve().parents[1]
# One torch thread per process: the learning tests' numbers were measured so (thread count changes
# float reductions), and two xdist workers on two cores do not oversubscribe.
ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# The same in the test processes themselves: with two threads each, two xdist workers on two cores
# spin against each other (an in-process training took 153 s beside a busy worker, 12 s alone).
torch.set_num_threads(1)
# Every run_quarl call's process: forked from one that imported torch, SB3 and Hydra once.
WARM = WarmRun(ENV)
# Tiny budgets: a few seconds per cell (and no end-of-sweep collation; tests/collate/test_sweep.py has it).
FAST = ["train.steps=1500", "eval.episodes=2", "eval.n_envs=2", "hydra.callbacks.collate.enabled=false"]


_COMPOSED: dict[tuple[tuple[str, ...], tuple[str, ...]], DictConfig] = {}


def compose_cfg(*overrides: str) -> DictConfig:
    """The config `python run.py OVERRIDES` would run, without running it. Composed once per test
    process for the same overrides and methods (a composition costs about 0.1 s); each call gets its
    own copy."""
    schema.register()
    key = (overrides, tuple(method_registry.registry()))
    if key not in _COMPOSED:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            _COMPOSED[key] = compose("config", overrides=list(overrides), return_hydra_config=False)
    return fresh_copy(_COMPOSED[key])


def run_quarl(cwd: Path, *args: str, check: bool = True, policies: Path | None = None) -> subprocess.CompletedProcess:
    """`python run.py ARGS` with `cwd` as the launch folder (so outputs/ lands there), as a process
    forked from a warm one that imported quarl once (tests/warm_run.py), or a fresh one for a run that
    starts a Ray of its own. With `policies` (the `shared_policies` fixture), trained policies come
    from and go to that cache instead of `cwd`'s: a test that checks nothing about training gets a
    policy another test trained."""
    extra = [f"store.policies={policies}"] if policies is not None else []
    starts_ray = "actorq.backend=ray" in args and not any(a.startswith("actorq.ray_address=") for a in args)
    if starts_ray:  # Ray's node start timed out in a forked child (never in a fresh one); joining one is fine
        done = subprocess.run([sys.executable, str(ROOT / "run.py"), *args, *extra], cwd=cwd, capture_output=True,
                              text=True, env=ENV, timeout=1200)
    else:
        done = WARM(Path(cwd).resolve(), [*args, *extra], timeout=1200)
    if check and done.returncode != 0:
        raise AssertionError(f"run.py {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def quarl_cli(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m quarl.cli ARGS` in `cwd`, as a process forked from the warm one (its torch imported)."""
    return WARM(Path(cwd).resolve(), list(args), timeout=timeout, module="quarl.cli")


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(scope="session")
def shared_policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One policy cache for the whole test session, shared by pytest-xdist's workers (the cache's
    file lock makes concurrent runs train each policy once). For tests that neither count
    trainings nor damage cached files: a policy's key is everything that shaped it, so a cached one
    is the policy the test would have trained."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' base temps share this folder
    folder = root / "shared-policies"
    folder.mkdir(exist_ok=True)
    return folder


#: Test files whose tests take tens of seconds to minutes (whole scripts, real services, shared
#: studies), besides every test marked slow: they run first, so that the two workers end together
#: (pytest-xdist's work stealing, `--dist worksteal` in pyproject.toml, then hands out the short ones).
LONG_FIRST = (
    "tests/test_readme.py",  # the README's commands in order: about two minutes in one test
    "tests/actorq/",
    "tests/methods/test_qat_learning.py",
    "tests/report/test_reproduction.py",
    "tests/deploy/edge/test_export.py",
    "tests/test_cluster.py",
    "tests/evaluate/test_fidelity.py",
    "tests/test_search.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long tests first, in their collected order; the rest after them, in theirs."""
    items.sort(key=lambda item: not (item.get_closest_marker("slow") or item.nodeid.startswith(LONG_FIRST)))
