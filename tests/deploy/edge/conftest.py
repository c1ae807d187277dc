"""The briefly trained policies the edge tests share: one of each per test module."""

from __future__ import annotations

import pytest

from tests.deploy.edge.test_cgen import Trained, make_cartpole, make_pendulum


@pytest.fixture(scope="module")
def cartpole() -> Trained:
    return make_cartpole()


@pytest.fixture(scope="module")
def pendulum() -> Trained:
    return make_pendulum()
