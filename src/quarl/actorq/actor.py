"""The actor loop: act with the quantized policy, explore, add n-step transitions, send chunks, pull weights.

The same function runs in a local process and in a Ray actor; only its `Link` differs. An actor
uses one thread, seeds its env and its exploration noise from (run seed, actor id), pulls the
latest weights every `update_period` of its env steps, and keeps a time breakdown (`Timings`).

Exploration: DQN actors are epsilon-greedy on rl-zoo3's tuned schedule (epsilon decays linearly
from `exploration_initial_eps` to `exploration_final_eps` over `exploration_fraction` of the budget,
the budget being counted as this actor's steps times the number of actors), each with its own
random stream; D4PG actors add Gaussian noise of std `sigma` to their actions in [-1, 1].
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import Optional, Protocol

import gymnasium as gym
import numpy as np
import torch
from omegaconf import OmegaConf

from quarl.actorq import execution, params
from quarl.actorq.replay import Chunk, NStepAdder
from quarl.actorq.settings import ActorSpec
from quarl.rl.envs import make_env

log = logging.getLogger(__name__)

FIRST_WEIGHTS_POLL_S = 0.01


class Link(Protocol):
    """An actor's side of a transport."""

    def pull(self, have: int) -> Optional[tuple[int, np.ndarray]]:
        """(version, a private copy of the packed weights) when newer than `have`, else None."""

    def send(self, chunk: Chunk) -> None:
        """Hand a chunk of experience to the learner."""

    def stopped(self) -> bool:
        """Whether the learner has asked the actors to stop."""


@dataclass
class Timings:
    """Cumulative seconds an actor spent on each part of its work, and its counts."""

    inference_s: float = 0.0  # computing actions with the policy (the paper's "step")
    env_s: float = 0.0  # stepping the environment
    pull_s: float = 0.0  # fetching packed weights from the transport
    deserialize_s: float = 0.0  # reading the packed weights (and converting them, when comm_bits != actor_bits)
    load_s: float = 0.0  # building the executor from them (the paper's load_state_dict)
    send_s: float = 0.0  # handing chunks to the learner (waiting while its queue is full)
    steps: int = 0
    pulls: int = 0
    wall_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        out = asdict(self)
        out["steps_per_s"] = self.steps / self.wall_s if self.wall_s > 0 else 0.0
        return out


def scale_action(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """An action in [-1, 1] mapped onto the box [low, high]."""
    return low + (action + 1.0) * 0.5 * (high - low)


class Policy:
    """The actor's executor and the weights version it runs."""

    def __init__(self, spec: ActorSpec, timings: Timings) -> None:
        self.spec, self.timings = spec, timings
        self.version = -1
        self.executor: Optional[execution.Executor] = None  # set by the first load

    def load(self, version: int, packed: np.ndarray) -> None:
        t0 = time.perf_counter()
        layers = execution.convert(
            params.unpack(packed, self.spec.layer_shapes, self.spec.comm_bits),
            self.spec.actor_bits,
            self.spec.actor_format,
        )
        t1 = time.perf_counter()
        self.executor = execution.build(layers, self.spec.actor_bits, self.spec.squash)
        t2 = time.perf_counter()
        self.timings.deserialize_s += t1 - t0
        self.timings.load_s += t2 - t1
        self.version = version

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        assert self.executor is not None, "no weights loaded yet"
        return self.executor(obs[None].astype(np.float32, copy=False))[0]


def epsilon(spec: ActorSpec, own_steps: int) -> float:
    """DQN's epsilon after `own_steps` steps of this actor (the run has taken about `actors` times as many)."""
    progress = own_steps * spec.actors / max(1, spec.eps_fraction * spec.total_steps)
    return spec.eps_initial + min(1.0, progress) * (spec.eps_final - spec.eps_initial)


def run_actor(actor_id: int, spec: ActorSpec, link: Link) -> Timings:
    """Act until the learner says stop; returns the time breakdown."""
    torch.set_num_threads(1)
    timings = Timings()
    rng = np.random.default_rng([spec.seed, 0xAC7, actor_id])
    env = make_env(OmegaConf.create(spec.env))
    env.action_space.seed(int(rng.integers(2**31)))
    bounds: Optional[tuple[np.ndarray, np.ndarray]] = None  # D4PG's (squashed actions) action box
    if spec.squash:
        assert isinstance(env.action_space, gym.spaces.Box)
        bounds = env.action_space.low.astype(np.float32), env.action_space.high.astype(np.float32)
    policy = Policy(spec, timings)
    while policy.version < 0:  # the learner publishes its initial weights once every actor has started
        if link.stopped():
            return timings
        got = link.pull(-1)
        if got is None:
            time.sleep(FIRST_WEIGHTS_POLL_S)
            continue
        policy.load(*got)
    adder = NStepAdder(spec.n_step, spec.gamma)
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    episode_return, episode_length, episodes, sent_steps = 0.0, 0, [], 0
    start = time.perf_counter()
    try:
        while True:
            t0 = time.perf_counter()
            out = policy(obs)
            action: np.ndarray | int
            env_action: np.ndarray | int
            if bounds is not None:  # spec.squash
                noisy: np.ndarray = np.clip(
                    out + spec.sigma * rng.standard_normal(out.shape).astype(np.float32), -1.0, 1.0
                )
                action, env_action = noisy, scale_action(noisy, *bounds)
            else:
                greedy = int(np.argmax(out))
                action = env_action = (
                    int(rng.integers(spec.n_out)) if rng.random() < epsilon(spec, timings.steps) else greedy
                )
            t1 = time.perf_counter()
            next_obs, reward, terminated, truncated, _ = env.step(env_action)
            t2 = time.perf_counter()
            timings.inference_s += t1 - t0
            timings.env_s += t2 - t1
            timings.steps += 1
            adder.add(obs, action, float(reward), next_obs, terminated, truncated)
            episode_return += float(reward)
            episode_length += 1
            obs = next_obs
            if terminated or truncated:
                episodes.append((episode_return, episode_length))
                episode_return, episode_length = 0.0, 0
                obs, _ = env.reset()
            if len(adder) >= spec.chunk_size:
                t0 = time.perf_counter()
                timings.wall_s = t0 - start
                link.send(Chunk(actor_id, adder.take(), timings.steps - sent_steps, episodes, timings.as_dict()))
                timings.send_s += time.perf_counter() - t0
                sent_steps, episodes = timings.steps, []
                if link.stopped():
                    return timings
            if timings.steps % spec.update_period == 0:
                t0 = time.perf_counter()
                got = link.pull(policy.version)
                timings.pull_s += time.perf_counter() - t0
                if got is not None:
                    timings.pulls += 1
                    policy.load(*got)
    finally:
        env.close()
