"""The real services as session fixtures (a pytest plugin of tests/conftest.py): a single-node SLURM
cluster and a Ray head, started once for all xdist workers and stopped by the last one to leave;
skipped, with the reason, where they cannot run here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from tests.cluster import services


def _registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder all xdist workers of this pytest run share (the services are started once)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _service(kind: str, missing: Callable[[], Optional[str]], factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The shared `kind` service for the session, or the test skipped with why it cannot run here."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    with services.shared(kind, _registry(factory)) as info:
        yield info


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """munged, slurmctld and slurmd on this host (partition `quarl`); stopped by the last worker."""
    yield from _service("slurm", services.slurm_missing, tmp_path_factory)


@pytest.fixture(scope="session")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`ray start --head --node-ip-address=127.0.0.1 --port=<free>`; stopped by the last worker."""
    yield from _service("ray", services.ray_missing, tmp_path_factory)
