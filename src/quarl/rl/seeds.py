"""Reset seeds of evaluation episodes, derived from a run's seed (disjoint from training's)."""

from __future__ import annotations

import numpy as np


def episode_seeds(seed: int, episodes: int) -> list[int]:
    """Reset seeds of the evaluation episodes, derived from the run seed (disjoint from training)."""
    rng = np.random.default_rng([seed, 0xE7A1])
    return [int(s) for s in rng.integers(0, 2**31 - 1, size=episodes)]
