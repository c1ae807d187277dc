"""SB3 hyperparameters whose numbers have a range: checked with the config, before anything is
built, so that `algo.hyperparams.n_steps=0` or `gamma=2` is one sentence, not SB3's assertion or a
training that means nothing."""

from __future__ import annotations

import math
from typing import Any, Optional

from quarl.errors import QuarlError

#: SB3 hyperparameters whose numbers have a range (low, high; None: unbounded), and how it is said.
HYPERPARAM_RANGES: dict[str, tuple[float, Optional[float], str]] = {
    "n_steps": (1, None, "a positive number of steps per rollout"),
    "batch_size": (1, None, "a positive batch size"),
    "n_epochs": (1, None, "a positive number of epochs"),
    "buffer_size": (1, None, "a positive replay capacity"),
    "learning_starts": (0, None, "a number of steps >= 0"),
    "target_update_interval": (1, None, "a positive number of steps"),
    "gamma": (0, 1, "a discount factor from 0 to 1"),
    "gae_lambda": (0, 1, "a value from 0 to 1"),
    "tau": (0, 1, "a soft-update coefficient from 0 to 1"),
    "exploration_fraction": (0, 1, "a fraction from 0 to 1"),
    "exploration_initial_eps": (0, 1, "a probability from 0 to 1"),
    "exploration_final_eps": (0, 1, "a probability from 0 to 1"),
}


def check_hyperparams(hyperparams: Any) -> None:
    """The numeric SB3 hyperparameters of `HYPERPARAM_RANGES` lie in their range (a schedule given
    as text, rl-zoo3's `lin_0.001`, is SB3's to read)."""
    for name, (low, high, what) in HYPERPARAM_RANGES.items():
        value = hyperparams.get(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if not math.isfinite(value) or value < low or (high is not None and value > high):
            raise QuarlError(f"algo.hyperparams.{name}={value} is out of range: use {what}.")
