"""Ending an SB3 training once it has learned (`train.stop_at_return`): as rl-zoo3's
StopTrainingOnRewardThreshold, but judged on the training episodes themselves, with no eval env."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Callable, Optional

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

log = logging.getLogger(__name__)

WINDOW = 10  # finished training episodes averaged (as ActorQ's RETURN_WINDOW)


def recent_mean(returns: Sequence[float], window: int = WINDOW) -> Optional[float]:
    """The mean of the last `window` returns; None while fewer than `window` episodes have ended."""
    if len(returns) < window:
        return None
    return float(np.mean(returns[-window:]))


class StopAtReturn(BaseCallback):
    """Ends the training (`_on_step` returns False) once the last `window` finished training episodes
    (SB3's `ep_info_buffer`, the Monitor's returns) average at least `target`, as any SB3 callback:
    `model.learn(n, callback=StopAtReturn(475))`. With `eligible` (QAT: fake quant is on), only
    once `window` episodes have ended while it held, so that they all count. `stopped_at`: the env
    step it stopped at (None: it did not)."""

    def __init__(self, target: float, window: int = WINDOW, eligible: Optional[Callable[[], bool]] = None) -> None:
        super().__init__()
        self.target, self.window = float(target), window
        self.eligible = eligible if eligible is not None else (lambda: True)
        self.counted = 0  # episodes ended while `eligible()` (kept by a training checkpoint)
        self.stopped_at: Optional[int] = None
        self.mean: Optional[float] = None  # the mean it stopped at

    def _on_step(self) -> bool:
        # SB3 calls the callbacks before it adds this step's episodes to `ep_info_buffer`
        ended = [info["episode"] for info in self.locals.get("infos", []) if "episode" in info]
        if not self.eligible():
            return True
        self.counted += len(ended)
        if self.counted < self.window:
            return True
        episodes = list(self.model.ep_info_buffer or []) + ended
        mean = recent_mean([float(e["r"]) for e in episodes], self.window)
        if mean is None or mean < self.target:
            return True
        self.stopped_at, self.mean = self.num_timesteps, mean
        log.info(
            "Mean return of the last %d training episodes %.1f >= %g (train.stop_at_return) after %d env steps: "
            "stopping.",
            self.window,
            mean,
            self.target,
            self.num_timesteps,
        )
        return False
