"""A training's budget in env steps, and the intervals derived from it."""

from __future__ import annotations

from typing import Any


def train_steps(cfg: Any) -> int:
    """The training budget in env steps: `train.steps`, or the algorithm's tuned budget."""
    return int(cfg.train.steps if cfg.train.steps is not None else cfg.algo.n_timesteps)


def keep_best_every(cfg: Any) -> int:
    """Env steps between keep-best evaluations: `train.eval_every`, or a twentieth of the budget."""
    every = cfg.train.get("eval_every")
    return int(every) if every else max(1, train_steps(cfg) // 20)
