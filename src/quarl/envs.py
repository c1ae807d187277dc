"""Gymnasium environments from env configs, with errors that say what to install or type."""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import numpy as np

from quarl.errors import QuarlError

ActionKind = Literal["discrete", "continuous"]


def make_env(env_cfg: Any) -> gym.Env:
    """Create the environment named by `env_cfg.id` with `env_cfg.kwargs`."""
    try:
        return gym.make(env_cfg.id, **dict(env_cfg.kwargs))
    except gym.error.DependencyNotInstalled as exc:
        raise QuarlError(f"env.id={env_cfg.id} needs a package that is not installed: {exc}") from None
    except gym.error.Error as exc:
        raise QuarlError(f"env.id={env_cfg.id} is not a registered Gymnasium environment ({exc}).") from None
    except TypeError as exc:
        raise QuarlError(f"env.kwargs for {env_cfg.id} are not accepted: {exc}") from None


def action_kind(env_cfg: Any) -> ActionKind:
    """Whether the environment's actions are discrete or continuous."""
    env = make_env(env_cfg)
    try:
        space = env.action_space
    finally:
        env.close()
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return "discrete"
    if isinstance(space, gym.spaces.Box):
        return "continuous"
    raise QuarlError(f"env.id={env_cfg.id} has an action space quarl does not support: {space}.")


def random_observations(env_id: str, n: int, seed: int = 0) -> np.ndarray:
    """`n` observations from random-action episodes of `env_id` (calibration and example inputs)."""
    env = gym.make(env_id)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    out = []
    while len(out) < n:
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return np.asarray(out, dtype=np.float32)
