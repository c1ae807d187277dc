"""The settings of one ActorQ run, resolved once from the config.

Learner hyperparameters come from `algo.hyperparams` (DQN: rl-zoo3's tuned values under SB3's
names; D4PG: src/quarl/conf/algo/d4pg.yaml); the distributed run's from `actorq.*`, where `null` means
"derived from the algorithm" as written next to each field below. `ActorSpec` is the part every
actor needs: plain values only, so it pickles into a process or a Ray actor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import gymnasium as gym

from quarl.actorq.constants import PRECISIONS
from quarl.config.keys import as_dict, train_steps
from quarl.errors import QuarlError
from quarl.rl.envs import make_env

# SB3's DQN defaults, used where the tuned config leaves a hyperparameter out.
DQN_DEFAULTS: dict[str, Any] = {
    "learning_rate": 1e-4,
    "batch_size": 32,
    "gamma": 0.99,
    "target_update_interval": 10000,
    "train_freq": 4,
    "gradient_steps": 1,
    "exploration_fraction": 0.1,
    "exploration_initial_eps": 1.0,
    "exploration_final_eps": 0.05,
    "max_grad_norm": 10.0,
    "buffer_size": 1_000_000,
    "learning_starts": 100,
    "policy_kwargs": {"net_arch": [64, 64]},
}
# DQN's n-step returns under ActorQ (not an SB3 hyperparameter). Measured on CartPole with rl-zoo3's
# values, 2 actors, 50k env steps: 1-step returns peaked at 276-367 (10-episode training mean),
# 3-step returns reached 500 after 23-35k steps.
DQN_N_STEP = 3
D4PG_KEYS = (
    "n_step",
    "gamma",
    "atoms",
    "v_min",
    "v_max",
    "learning_rate",
    "batch_size",
    "target_update_period",
    "sigma",
    "policy_layers",
    "critic_layers",
    "samples_per_insert",
    "learning_starts",
    "buffer_size",
    "max_grad_norm",
)


@dataclass(frozen=True)
class ActorSpec:
    """What an actor process needs to act: its env, its policy's shape and precision, its exploration."""

    algo: str  # dqn or d4pg
    env: dict[str, Any]  # the env config as plain values (quarl.rl.envs.make_env takes it back)
    obs_dim: int
    n_out: int  # DQN: number of actions; D4PG: action dimensions
    hidden: tuple[int, ...]
    actor_bits: int
    comm_bits: int
    update_period: int
    chunk_size: int
    n_step: int
    gamma: float
    seed: int
    total_steps: int  # the run's env-step budget, over all actors (DQN's epsilon schedule)
    actors: int
    sigma: float = 0.0  # D4PG: Gaussian exploration noise on actions in [-1, 1]
    eps_initial: float = 1.0  # DQN: epsilon decays linearly from eps_initial ...
    eps_final: float = 0.05  # ... to eps_final ...
    eps_fraction: float = 0.1  # ... over this fraction of the budget
    actor_format: Optional[str] = None  # quant.actor_format: weights rounded to a number format, run in fp32

    @property
    def precision(self) -> str:
        """The actors' precision in words: 'int8', 'fp16', 'fp32' or a number format's name."""
        return self.actor_format or PRECISIONS[self.actor_bits]

    @property
    def squash(self) -> bool:
        """Whether the policy ends in tanh (continuous actions)."""
        return self.algo == "d4pg"

    @property
    def layer_shapes(self) -> list[tuple[int, int]]:
        sizes = [self.obs_dim, *self.hidden, self.n_out]
        return list(zip(sizes[:-1], sizes[1:]))


@dataclass(frozen=True)
class Settings:
    """Everything the learner loop needs, with the derived values filled in."""

    actor: ActorSpec
    hyper: dict[str, Any]  # the learner's hyperparameters (defaults filled in)
    actors: int
    backend: str
    publish_period: int
    samples_per_insert: float
    min_replay: int
    replay_size: int
    max_restarts: int
    ray_address: Optional[str]
    log_interval_s: float
    stall_timeout_s: float
    stop_at_return: Optional[float]  # end once the last RETURN_WINDOW training episodes average this
    time_limit_s: Optional[float]  # end after this many seconds of wall time
    pin_actors: bool  # local actors: one core each (quarl.actorq.transport.actor_cores)
    cuda_graph: bool  # DQN on a CUDA learner: updates replayed as one CUDA graph (quarl.actorq.graphed)
    action_low: Optional[list[float]]  # D4PG: the env's action bounds ([-1, 1] actions are scaled to them)
    action_high: Optional[list[float]]


def _hyper(cfg: Any) -> dict[str, Any]:
    raw = as_dict(cfg.algo.hyperparams)
    if cfg.algo.name == "dqn":
        hyper = {**DQN_DEFAULTS, **raw}
        if hyper["gradient_steps"] < 0:  # SB3: as many gradient steps as env steps
            hyper["gradient_steps"] = hyper["train_freq"] if isinstance(hyper["train_freq"], int) else 1
        if not isinstance(hyper["train_freq"], int):  # SB3's (n, "step") form
            hyper["train_freq"] = int(hyper["train_freq"][0])
        return hyper
    missing = [k for k in D4PG_KEYS if k not in raw]
    if missing:
        raise QuarlError(
            f"algo.hyperparams.{missing[0]} is missing: algo=d4pg needs {', '.join(D4PG_KEYS)} "
            "(src/quarl/conf/algo/d4pg.yaml)."
        )
    unknown = sorted(set(raw) - set(D4PG_KEYS))
    if unknown:
        raise QuarlError(f"algo.hyperparams.{unknown[0]} is not a D4PG hyperparameter: allowed {', '.join(D4PG_KEYS)}.")
    return raw


def resolve(cfg: Any) -> Settings:
    """The run's settings from its config (opens the env once to read its spaces)."""
    a, algo = cfg.actorq, cfg.algo.name
    env = make_env(cfg.env)
    obs_space, act_space = env.observation_space, env.action_space
    env.close()
    hyper = _hyper(cfg)
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        raise QuarlError(
            f"quant=actorq acts with MLP policies on flat observations; env {cfg.env.id} has "
            f"observations of shape {obs_space.shape}."
        )
    if algo == "dqn":
        assert isinstance(act_space, gym.spaces.Discrete)
        hidden = tuple(hyper["policy_kwargs"].get("net_arch", DQN_DEFAULTS["policy_kwargs"]["net_arch"]))
        n_out, n_step = int(act_space.n), a.n_step or DQN_N_STEP
        spi = a.samples_per_insert or hyper["batch_size"] * hyper["gradient_steps"] / hyper["train_freq"]
        explore = {
            "eps_initial": hyper["exploration_initial_eps"],
            "eps_final": hyper["exploration_final_eps"],
            "eps_fraction": hyper["exploration_fraction"],
        }
        low = high = None
    else:
        assert isinstance(act_space, gym.spaces.Box)  # d4pg acts in continuous spaces only
        hidden, n_out = tuple(hyper["policy_layers"]), int(act_space.shape[0])
        n_step, spi = a.n_step or hyper["n_step"], a.samples_per_insert or hyper["samples_per_insert"]
        explore = {"sigma": float(hyper["sigma"])}
        low, high = act_space.low.tolist(), act_space.high.tolist()
    spec = ActorSpec(
        algo=algo,
        env=as_dict(cfg.env),
        obs_dim=int(obs_space.shape[0]),
        n_out=n_out,
        hidden=tuple(int(h) for h in hidden),
        actor_bits=int(cfg.quant.actor_bits),
        comm_bits=int(a.comm_bits or cfg.quant.actor_bits),
        actor_format=cfg.quant.get("actor_format"),
        update_period=int(a.update_period),
        chunk_size=int(a.chunk_size),
        n_step=int(n_step),
        gamma=float(hyper["gamma"]),
        seed=int(cfg.seed),
        total_steps=train_steps(cfg),
        actors=int(a.actors),
        **explore,
    )
    return Settings(
        actor=spec,
        hyper=hyper,
        actors=int(a.actors),
        backend=a.backend,
        publish_period=int(a.publish_period),
        samples_per_insert=float(spi),
        min_replay=int(
            max(a.min_replay if a.min_replay is not None else hyper["learning_starts"], hyper["batch_size"])
        ),
        replay_size=int(a.replay_size or hyper["buffer_size"]),
        max_restarts=int(a.max_restarts),
        ray_address=a.ray_address,
        log_interval_s=float(a.log_interval_s),
        stall_timeout_s=float(a.stall_timeout_s),
        stop_at_return=a.stop_at_return,
        time_limit_s=a.time_limit_s,
        pin_actors=bool(a.pin_actors),
        cuda_graph=bool(a.cuda_graph),
        action_low=low,
        action_high=high,
    )
