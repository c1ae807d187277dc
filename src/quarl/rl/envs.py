"""Gymnasium environments from env configs: each suite's package, registration and preprocessing,
with errors that say what to install or type.

Suites: ``classic`` (Gymnasium classic control), ``box2d``, ``atari`` (ALE), ``bullet``
(PyBullet), ``mujoco`` (Gymnasium's MuJoCo tasks) and ``dmc`` (DeepMind Control through Shimmy).
Atari gets the usual preprocessing (no-op reset, frame skip 4, 84x84 grey, frame stack) with
episodic life and reward clipping for training only, so evaluation returns the raw game score.
DMC observations are flattened to one float vector and actions rescaled to [-1, 1].
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Literal

import gymnasium as gym
import numpy as np
from gymnasium import wrappers
from omegaconf import OmegaConf
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from quarl.errors import QuarlError

ActionKind = Literal["discrete", "continuous"]


def missing(env: str, module: str, exc: ImportError, extra: str | None) -> str:
    """One sentence naming the module that is really missing (a suite's package, or one it imports)."""
    install = f"pip install -c constraints.txt -e '.[{extra}]'" if extra else "pip install -c constraints.txt -e ."
    if exc.name in (None, module):
        return f"env={env} needs the '{module}' package, which is not installed: {install}"
    return (
        f"env={env} needs the '{module}' package, whose import failed because '{exc.name}' is not installed "
        f"({exc}): {install}, or pip install {exc.name}"
    )


def require_suite(env_cfg: Any) -> None:
    """Import the suite's packages (registering its env ids), or say which extra installs them."""
    if env_cfg.suite not in SUITES:
        raise QuarlError(f"env.suite={env_cfg.suite} is not known: choose one of {', '.join(SUITES)}.")
    suite = SUITES[env_cfg.suite]
    suite.before_import()
    imported = {}
    for module in suite.modules:
        try:
            imported[module] = importlib.import_module(module)
        except ImportError as exc:
            raise QuarlError(missing(env_cfg.name, module, exc, suite.extra)) from None
    suite.after_import(imported)


def _gym_make(env_cfg: Any) -> gym.Env:
    require_suite(env_cfg)
    try:
        return gym.make(env_cfg.id, **dict(env_cfg.kwargs))
    except ImportError as exc:  # an env module imports a package the suite's extra should have brought
        raise QuarlError(missing(env_cfg.name, exc.name or "?", exc, SUITES[env_cfg.suite].extra)) from None
    except gym.error.DependencyNotInstalled as exc:
        raise QuarlError(f"env.id={env_cfg.id} needs a package that is not installed: {exc}") from None
    except gym.error.Error as exc:
        raise QuarlError(f"env.id={env_cfg.id} is not a registered Gymnasium environment ({exc}).") from None
    except TypeError as exc:
        raise QuarlError(f"env.kwargs for {env_cfg.id} are not accepted: {exc}") from None


class FireOnLifeLoss(gym.Wrapper):
    """Evaluation on games that wait for FIRE: after a lost life (the game goes on), step FIRE
    and then action 2, as training's episodic-life reset does through SB3's `FireResetEnv`. A
    policy trained so never learns to press FIRE itself and would stall until the frame cap."""

    lives: int

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        game: Any = self.env.unwrapped  # ale_py's AtariEnv, whose `ale` gymnasium's Env does not declare
        self.lives = info.get("lives", game.ale.lives())
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, step_reward, terminated, truncated, info = self.env.step(action)
        reward = float(step_reward)
        if info.get("lives", self.lives) < self.lives and not (terminated or truncated):
            for follow in (1, 2):
                obs, more, terminated, truncated, info = self.env.step(follow)
                reward += float(more)
                if terminated or truncated:
                    break
        self.lives = info.get("lives", self.lives)
        return obs, reward, terminated, truncated, info


def _atari(env: gym.Env, training: bool) -> gym.Env:
    from stable_baselines3.common.atari_wrappers import AtariWrapper

    wrapped: gym.Env = AtariWrapper(env, terminal_on_life_loss=training, clip_reward=training)
    game: Any = env.unwrapped  # ale_py's AtariEnv
    if not training and "FIRE" in game.get_action_meanings():
        wrapped = FireOnLifeLoss(wrapped)
    return wrapped


def _dmc(env: gym.Env, training: bool) -> gym.Env:
    env = wrappers.FlattenObservation(env)
    space = env.observation_space
    assert isinstance(space, gym.spaces.Box)  # FlattenObservation's space is a Box
    env = wrappers.TransformObservation(
        env,
        lambda obs: obs.astype(np.float32),
        gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), space.shape, np.float32),
    )
    return wrappers.RescaleAction(env, -1.0, 1.0)  # type: ignore[arg-type]  # float bounds: documented, not annotated


def _stack(env: gym.Env, n: int) -> gym.Env:
    """The last `n` observations along a new first axis (a trailing channel of 1 is folded away)."""
    env = wrappers.FrameStackObservation(env, n)
    shape = env.observation_space.shape or ()
    if len(shape) == 4 and shape[-1] == 1:  # n x H x W x 1 grey frames -> n x H x W (channels first)
        env = wrappers.ReshapeObservation(env, shape[:-1])
    return env


def _as_made(env: gym.Env, training: bool) -> gym.Env:
    return env


def _nothing(*_: Any) -> None:
    pass


def _dmc_quiet() -> None:
    os.environ.setdefault("MUJOCO_GL", "disable")  # quarl never renders: no OpenGL probing
    logging.getLogger("absl").setLevel(logging.ERROR)  # dm_control's model-compiler notices


def _mujoco_warnings(imported: dict[str, Any]) -> None:
    # MuJoCo's warnings (deprecated model attributes) go to logging, not MUJOCO_LOG.TXT
    imported["mujoco"].set_mju_user_warning(logging.getLogger("mujoco").debug)


def _ale_register(imported: dict[str, Any]) -> None:
    gym.register_envs(imported["ale_py"])


@dataclass(frozen=True)
class Suite:
    """An env suite as data: the modules it needs (imported to register its ids), the quarl extra that
    installs them, what to do before and after importing them, and its preprocessing (`wrap(env,
    training)`). Adding a suite is an entry here, its conf/env/<suite>/ YAML files and its extra."""

    modules: tuple[str, ...]
    extra: str | None
    wrap: Callable[[gym.Env, bool], gym.Env] = _as_made
    before_import: Callable[[], None] = _nothing
    after_import: Callable[[dict[str, Any]], None] = _nothing


SUITES: dict[str, Suite] = {
    "classic": Suite((), None),
    "box2d": Suite(("Box2D",), None),  # gymnasium[box2d] is among quarl's own requirements
    "atari": Suite(("ale_py", "cv2"), "atari", wrap=_atari, after_import=_ale_register),
    "bullet": Suite(("pybullet_envs_gymnasium",), "bullet"),
    "mujoco": Suite(("mujoco",), "mujoco", after_import=_mujoco_warnings),
    "dmc": Suite(
        ("mujoco", "shimmy", "dm_control"), "dmc", wrap=_dmc, before_import=_dmc_quiet, after_import=_mujoco_warnings
    ),
}


def make_env(env_cfg: Any, training: bool = False) -> gym.Env:
    """The environment `env_cfg` names, preprocessed as its suite requires.

    With `training`, the episode statistics SB3 logs are recorded beneath the preprocessing (the
    raw game score on Atari), and training-only wrappers (episodic life, reward clipping) are on.
    """
    env = _gym_make(env_cfg)
    if training:
        env = Monitor(env)
    env = SUITES[env_cfg.suite].wrap(env, training)
    if env_cfg.frame_stack > 1:
        env = _stack(env, env_cfg.frame_stack)
    return env


def training_envs(env_cfg: Any, n_envs: int, seed: int, subproc: bool = False) -> VecEnv:
    """`n_envs` training copies of the environment, seeded as SB3's `make_vec_env` seeds them; with
    `subproc`, each steps in a process of its own (SubprocVecEnv: the same trajectories, in parallel)."""

    def factory(rank: int) -> Callable[[], gym.Env]:
        def make() -> gym.Env:
            env = make_env(env_cfg, training=True)
            env.action_space.seed(seed + rank)
            return env

        return make

    makers = [factory(rank) for rank in range(n_envs)]
    venv: VecEnv = SubprocVecEnv(makers) if subproc and n_envs > 1 else DummyVecEnv(makers)
    venv.seed(seed)
    return venv


def action_kind(env_cfg: Any) -> ActionKind:
    """Whether the environment's actions are discrete or continuous."""
    container = OmegaConf.to_container(env_cfg, resolve=True) if OmegaConf.is_config(env_cfg) else dict(env_cfg)
    return _action_kind(json.dumps(container, sort_keys=True))


@lru_cache(maxsize=None)
def _action_kind(env_json: str) -> ActionKind:
    env_cfg = OmegaConf.create(json.loads(env_json))
    env = _gym_make(env_cfg)
    try:
        space = env.action_space
    finally:
        env.close()
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return "discrete"
    if isinstance(space, gym.spaces.Box):
        return "continuous"
    raise QuarlError(f"env.id={env_cfg.id} has an action space quarl does not support: {space}.")


def random_observations(env: Any, n: int, seed: int = 0) -> np.ndarray:
    """`n` observations from random-action episodes of an env config (preprocessed) or a Gymnasium
    id (calibration and example inputs)."""
    env = gym.make(env) if isinstance(env, str) else make_env(env)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    out: list[np.ndarray] = []
    while len(out) < n:
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return np.asarray(out, dtype=np.float32)
