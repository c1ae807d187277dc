"""Stable-Baselines3 algorithms built from algo configs written in rl-zoo3's style."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import torch
import torch.nn as nn
from gymnasium import spaces
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise
from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
from stable_baselines3.common.vec_env import VecEnv

from quarl.config import method_registry
from quarl.config.keys import as_dict
from quarl.errors import IncompatibleCell, QuarlError


@dataclass(frozen=True)
class AlgoSpec:
    """An algorithm class, the action kinds it handles, and the sub-networks it acts through."""

    cls: Optional[type[BaseAlgorithm]]  # None: not an SB3 algorithm (trained by ActorQ only)
    action_kinds: tuple[str, ...]
    inference_roots: tuple[str, ...]


ALGOS: dict[str, AlgoSpec] = {
    "dqn": AlgoSpec(DQN, ("discrete",), ("q_net",)),
    "a2c": AlgoSpec(
        A2C, ("discrete", "continuous"), ("pi_features_extractor", "mlp_extractor.policy_net", "action_net")
    ),
    "ppo": AlgoSpec(
        PPO, ("discrete", "continuous"), ("pi_features_extractor", "mlp_extractor.policy_net", "action_net")
    ),
    "ddpg": AlgoSpec(DDPG, ("continuous",), ("actor",)),
    "td3": AlgoSpec(TD3, ("continuous",), ("actor",)),
    "sac": AlgoSpec(SAC, ("continuous",), ("actor",)),
    "d4pg": AlgoSpec(None, ("continuous",), ()),
}

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "leaky_relu": nn.LeakyReLU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
}

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "adam": torch.optim.Adam,
    "rmsprop": torch.optim.RMSprop,
    "rmsprop_tf_like": RMSpropTFLike,  # rl-zoo3's A2C on Atari
}

# Hyperparameters that count env steps: when train.steps shrinks the budget they shrink with it.
STEP_COUNTS = ("learning_starts",)


def spec(name: str) -> AlgoSpec:
    """The registered algorithm called `name`."""
    if name not in ALGOS:
        raise QuarlError(f"algo.name={name} is not known: choose one of {', '.join(ALGOS)}.")
    return ALGOS[name]


def sb3_class(name: str) -> type[BaseAlgorithm]:
    """The SB3 class of algorithm `name`; a QuarlError for one that only a method's own learners train."""
    cls = spec(name).cls
    if cls is None:
        raise QuarlError(
            f"algo={name} is not a Stable-Baselines3 algorithm: only "
            f"quant={'/'.join(method_registry.trained_only_by(name))} trains and runs it."
        )
    return cls


def runnable(kind: str, method: str | None = None) -> list[str]:
    """The algorithms that act in a `kind` action space and can run with quant method `method`
    (a method with its own learners, such as ActorQ, trains those only; every other needs SB3's)."""
    names = [n for n, s in ALGOS.items() if kind in s.action_kinds]
    only = method_registry.get(method).algos if method is not None else None
    if only is not None:
        return [n for n in names if n in only]
    return [n for n in names if ALGOS[n].cls is not None]


def check_action_kind(algo: str, env_id: str, kind: str, method: str | None = None) -> None:
    """Raise IncompatibleCell when `algo` cannot act in a `kind` action space; the message suggests
    only the algorithms that can run there with quant method `method`, and the others' methods."""
    if kind not in spec(algo).action_kinds:
        allowed = " or ".join(spec(algo).action_kinds)
        choices = runnable(kind, method)
        others = [
            f"{n} with quant={'/'.join(method_registry.trained_only_by(n))}"
            for n, s in ALGOS.items()
            if kind in s.action_kinds and n not in choices and method_registry.trained_only_by(n)
        ]
        pick = f"pick an algorithm from {', '.join(choices)}" if choices else "no algorithm runs there with this method"
        if others:
            pick += f"; {', '.join(others)}"
        raise IncompatibleCell(
            f"algo={algo} needs {allowed} actions but env {env_id} has {kind} actions (n/a: {pick})."
        )


def linear_schedule(initial: float) -> Callable[[float], float]:
    """rl-zoo3's `lin_X`: X at the start of training, 0 at the end, and 0 past it (SB3 finishes its
    last rollout beyond the budget, where progress_remaining goes below 0)."""

    def schedule(progress_remaining: float) -> float:
        return max(progress_remaining, 0.0) * initial

    return schedule


def _value(key: str, value: Any) -> Any:
    if isinstance(value, str) and value.startswith("lin_"):
        try:
            return linear_schedule(float(value[4:]))
        except ValueError:
            raise QuarlError(f"algo.hyperparams.{key}={value}: a schedule is written lin_<number>.") from None
    if key == "train_freq" and isinstance(value, list):
        return tuple(value)
    return value


def _policy_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    out = dict(kwargs)
    for key, classes in (("activation_fn", ACTIVATIONS), ("optimizer_class", OPTIMIZERS)):
        if key in out:
            name = out[key]
            if name not in classes:
                raise QuarlError(
                    f"algo.hyperparams.policy_kwargs.{key}={name} is not known: choose one of {', '.join(classes)}."
                )
            out[key] = classes[name]
    return out


def hyperparams(algo_cfg: Any, total_steps: int) -> dict[str, Any]:
    """The constructor arguments for the SB3 class, with step counts fitted to `total_steps`."""
    raw = as_dict(algo_cfg.hyperparams)
    scale = min(1.0, total_steps / algo_cfg.n_timesteps)
    for key in STEP_COUNTS:
        if key in raw:
            raw[key] = int(raw[key] * scale)
    out = {k: _value(k, v) for k, v in raw.items() if k != "policy_kwargs"}
    if "policy_kwargs" in raw:
        out["policy_kwargs"] = _policy_kwargs(raw["policy_kwargs"])
    return out


def _action_noise(algo_cfg: Any, venv: VecEnv) -> Any:
    if algo_cfg.noise_type is None:
        return None
    assert isinstance(venv.action_space, spaces.Box)  # action noise is for continuous actions
    n = venv.action_space.shape[-1]
    mean, sigma = np.zeros(n), algo_cfg.noise_std * np.ones(n)
    if algo_cfg.noise_type == "normal":
        return NormalActionNoise(mean, sigma)
    return OrnsteinUhlenbeckActionNoise(mean, sigma)


def _robust(cls: type[BaseAlgorithm], kwargs: dict[str, Any], train: Any) -> None:
    """Train with `train.robust`'s perturbing optimizer (quarl.rl.robust) in place of the algorithm's:
    SB3 takes it as policy_kwargs' optimizer_class. A2C's RMSprop (use_rms_prop) keeps its settings."""
    from quarl.rl import robust

    policy_kwargs = kwargs.setdefault("policy_kwargs", {})
    base = policy_kwargs.get("optimizer_class", torch.optim.Adam)
    base_kwargs = dict(policy_kwargs.get("optimizer_kwargs", {}))
    if cls is A2C and kwargs.get("use_rms_prop", True) and "optimizer_class" not in policy_kwargs:
        base = torch.optim.RMSprop  # what A2C itself would choose
        base_kwargs = {"alpha": 0.99, "eps": kwargs.get("rms_prop_eps", 1e-5), "weight_decay": 0}
    policy_kwargs["optimizer_class"], extra = robust.optimizer(train.robust, base, train)
    policy_kwargs["optimizer_kwargs"] = {**base_kwargs, **extra}


def build(algo_cfg: Any, venv: VecEnv, seed: int, device: str, total_steps: int, train: Any = None) -> BaseAlgorithm:
    """A fresh SB3 model for `venv` (trained for quantization robustness where `train.robust` says);
    unknown hyperparameters are reported by name."""
    cls = sb3_class(algo_cfg.name)
    kwargs = hyperparams(algo_cfg, total_steps)
    if train is not None and train.get("robust"):
        _robust(cls, kwargs, train)
    accepted = inspect.signature(cls).parameters
    unknown = sorted(k for k in kwargs if k not in accepted)
    if unknown:
        raise QuarlError(
            f"algo.hyperparams.{unknown[0]} is not a parameter of {cls.__name__}; "
            f"allowed: {', '.join(k for k in accepted if k not in ('self', 'policy', 'env'))}."
        )
    if "action_noise" in accepted:
        kwargs["action_noise"] = _action_noise(algo_cfg, venv)
    try:
        return cls(algo_cfg.policy, venv, seed=seed, device=device, verbose=0, **kwargs)
    except (TypeError, ValueError, KeyError, AssertionError) as exc:  # SB3 asserts some of its settings
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise QuarlError(
            f"algo={algo_cfg.name} cannot be built with algo.policy={algo_cfg.policy} and these hyperparameters: {said}"
        ) from None
