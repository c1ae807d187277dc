"""The range an episode return can take, where the env's definition bounds it.

A Student-t interval of a mean reward can run past what any episode can return (A2C at 2 bits on
CartPole up to 563, where no episode returns more than 500); collation clips such intervals to the
env's return range. Gymnasium gives no such range: `spec.reward_threshold` is the return that counts
as solved, not a bound, and `Env.reward_range` is gone from Gymnasium 1.x. So the range is derived
from the env's own definition: the bounds of one step's reward (read from the env's source, listed
in `STEP_REWARD`), times the episode's step limit (`max_episode_steps` of the registered spec, or
of the record's `env.kwargs.max_episode_steps`), plus a one-off terminal bonus. An env not listed
(LunarLander, MuJoCo, Atari, whose scores have no tight bound) has no range and nothing is clipped.

DeepMind Control Suite tasks (ids `dm_control/...`) give a reward in [0, 1] at each of their 1000
steps (Tassa et al., 2018, "DeepMind Control Suite", section 2), so their returns lie in [0, 1000].
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple, Optional

#: Gymnasium id -> (lowest, highest reward of one step, terminal bonus), from each env's source.
STEP_REWARD: dict[str, tuple[float, float, float]] = {
    "CartPole-v0": (0.0, 1.0, 0.0),  # +1 for every step taken, the last included
    "CartPole-v1": (0.0, 1.0, 0.0),
    "Acrobot-v1": (-1.0, 0.0, 0.0),  # -1 per step until the goal, 0 on reaching it
    "MountainCar-v0": (-1.0, 0.0, 0.0),  # -1 per step
    # -(theta^2 + 0.1 theta_dot^2 + 0.001 u^2), |theta| <= pi, |theta_dot| <= 8, |u| <= 2
    "Pendulum-v1": (-(3.141592653589793**2 + 0.1 * 8**2 + 0.001 * 2**2), 0.0, 0.0),
    "MountainCarContinuous-v0": (-0.1, 0.0, 100.0),  # -0.1 a^2 per step (|a| <= 1), +100 at the goal
}
DMC_PREFIX, DMC_STEPS = "dm_control/", 1000


class ReturnRange(NamedTuple):
    """The lowest and highest return an episode of an env can have."""

    low: float
    high: float

    def text(self) -> str:
        """'[0, 500]'."""
        return f"[{self.low:g}, {self.high:g}]"


@lru_cache(maxsize=64)
def _spec_steps(env_id: str) -> Optional[int]:
    """The registered step limit of `env_id` (None where Gymnasium has none or does not know the id)."""
    import gymnasium as gym

    try:
        return gym.spec(env_id).max_episode_steps
    except gym.error.Error:
        return None


def return_range(env_id: Optional[str], max_steps: Optional[int] = None) -> Optional[ReturnRange]:
    """The return range of `env_id` with episodes of at most `max_steps` steps (default: its
    registered limit), or None where its definition does not bound it."""
    if not env_id:
        return None
    if str(env_id).startswith(DMC_PREFIX):
        return ReturnRange(0.0, float(max_steps or DMC_STEPS))
    if env_id not in STEP_REWARD:
        return None
    steps = max_steps or _spec_steps(env_id)
    if not steps:
        return None
    low, high, bonus = STEP_REWARD[env_id]
    return ReturnRange(steps * low + min(bonus, 0.0), steps * high + max(bonus, 0.0))
