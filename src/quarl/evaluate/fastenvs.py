"""Evaluation envs that step Gymnasium's dynamics bit for bit, without Gymnasium's per-step overhead.

On CartPole the policy network (ONNX Runtime, one observation per call) costs about 10 us a step and
`gym.make("CartPole-v1")` about 14 us more: its wrappers (time limit, order enforcing, the passive
env checker) and `CartPoleEnv.step`'s own checks (`action_space.contains` alone is a third of it).
`CartPole` here is that env's `step` and `reset` written again on Python floats: the same IEEE-754
double operations in the same order, the same `np.cos` / `np.sin`, the state drawn by the same
seeded generator (`gymnasium.utils.seeding.np_random`), the same float32 observation and the same
time limit. So the observations, rewards and episode lengths are Gymnasium's for every seed
(tests/evaluate/test_fastenvs.py plays them side by side), about 3x faster a step.

EnvPool (C++ vectorized envs) was the other candidate (issue 58); it cannot keep the seeded-episode
contract: its episodes start from states its own per-env ``std::mt19937`` draws (seeded `seed + i`),
not from Gymnasium's per-episode `reset(seed=...)`, so no seed gives Gymnasium's episodes, and on
this project's 2-core machines its CartPole stepped slower than Gymnasium's (docs/benchmarks.md).

Atari envs stay Gymnasium's, preprocessed as in training, but their seeded reset is cheaper: ale-py
reloads the ROM on every `reset(seed=...)` (about 0.2 s, a fifth of an untrained Pong episode's
evaluation), although without sticky actions the seed reaches nothing but the Python generator that
draws the no-op starts. `fast_seeded_reset` restores the state the ROM loaded into at construction
instead, which is the state every seed's reload gives (ALE's own generator only decides sticky
actions; tests/evaluate/test_fastenvs.py plays seeded episodes side by side with Gymnasium's).

`eval_env(env_cfg, engine)` picks: "auto" (an exact env here where there is one, else `make_env`,
with the fast seeded reset for Atari) or "gymnasium" (always `make_env` as it is).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding

from quarl.errors import QuarlError
from quarl.rl.envs import make_env

ENV_ENGINES = ("auto", "gymnasium")
_TIME_LIMITS = {"CartPole-v1": 500, "CartPole-v0": 200}  # as Gymnasium registers them


class CartPole:
    """Gymnasium's `CartPole-v1` / `-v0` behind its time limit, for evaluation: `reset(seed=)` and
    `step(action)` give what `gym.make(id)` gives, bit for bit (see the module docstring)."""

    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    total_mass = masspole + masscart
    polemass_length = masspole * length
    theta_threshold = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def __init__(self, max_episode_steps: int, sutton_barto_reward: bool = False) -> None:
        self.max_episode_steps = max_episode_steps
        self.sutton_barto = sutton_barto_reward
        self.np_random: Optional[np.random.Generator] = None
        self.state = (0.0, 0.0, 0.0, 0.0)
        self.elapsed = 0
        self.beyond: Optional[int] = None  # steps taken after termination (Gymnasium's steps_beyond_terminated)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[np.ndarray, dict]:
        if options:
            raise QuarlError("CartPole's exact evaluation env takes no reset options.")
        if seed is not None or self.np_random is None:
            self.np_random, _ = seeding.np_random(seed)
        drawn = self.np_random.uniform(low=-0.05, high=0.05, size=(4,))
        self.state = (float(drawn[0]), float(drawn[1]), float(drawn[2]), float(drawn[3]))
        self.elapsed, self.beyond = 0, None
        return np.array(self.state, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if action not in (0, 1):
            raise QuarlError(f"CartPole takes action 0 or 1, not {action!r}.")
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta = float(np.cos(theta))  # numpy's cos and sin, as Gymnasium calls them (not libm's)
        sintheta = float(np.sin(theta))
        temp = (force + self.polemass_length * (theta_dot * theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * (costheta * costheta) / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = (x, x_dot, theta, theta_dot)
        terminated = (
            x < -self.x_threshold
            or x > self.x_threshold
            or theta < -self.theta_threshold
            or theta > self.theta_threshold
        )
        if not terminated:
            reward = 0.0 if self.sutton_barto else 1.0
        elif self.beyond is None:
            self.beyond, reward = 0, -1.0 if self.sutton_barto else 1.0
        else:
            self.beyond, reward = self.beyond + 1, -1.0 if self.sutton_barto else 0.0
        self.elapsed += 1
        truncated = self.elapsed >= self.max_episode_steps
        return np.array(self.state, dtype=np.float32), reward, terminated, truncated, {}

    def close(self) -> None:
        pass


def exact_env(env_cfg: Any) -> Optional[CartPole]:
    """The exact evaluation env for `env_cfg`, or None where there is none (any other env, frame
    stacking, or kwargs other than `max_episode_steps` and `sutton_barto_reward`)."""
    if env_cfg.suite != "classic" or env_cfg.id not in _TIME_LIMITS or env_cfg.frame_stack > 1:
        return None
    kwargs = dict(env_cfg.kwargs)
    if set(kwargs) - {"max_episode_steps", "sutton_barto_reward"}:
        return None
    limit = kwargs.get("max_episode_steps") or _TIME_LIMITS[env_cfg.id]
    return CartPole(int(limit), bool(kwargs.get("sutton_barto_reward", False)))


def fast_seeded_reset(env: gym.Env) -> gym.Env:
    """`env` (ale-py's, wrapped or not) made to restore its post-load emulator state on a seeded
    reset instead of reloading the ROM; unchanged for any other env and where actions are sticky
    (ALE's generator, which a reload reseeds, then decides them)."""
    from ale_py.env import AtariEnv

    atari = env.unwrapped
    if not isinstance(atari, AtariEnv) or atari.ale.getFloat("repeat_action_probability") != 0.0:
        return env
    loaded = atari.ale.cloneState(include_rng=False)  # the ROM as __init__ loaded it (mode, difficulty set)

    def restore_game() -> None:
        atari.ale.restoreState(loaded)

    atari.load_game = restore_game  # type: ignore[method-assign]  # AtariEnv.reset calls it after seeding
    return env


def eval_env(env_cfg: Any, engine: str = "auto") -> Any:
    """The env evaluation steps: `exact_env`'s where `engine` is "auto" and there is one, else
    `quarl.rl.envs.make_env`'s (Gymnasium's, preprocessed), Atari's with `fast_seeded_reset`."""
    if engine not in ENV_ENGINES:
        raise QuarlError(f"env_engine={engine} is not known: choose one of {', '.join(ENV_ENGINES)}.")
    env = exact_env(env_cfg) if engine == "auto" else None
    if env is not None:
        return env
    made: gym.Env = make_env(env_cfg)
    return fast_seeded_reset(made) if engine == "auto" and env_cfg.suite == "atari" else made
