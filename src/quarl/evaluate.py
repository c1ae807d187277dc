"""Evaluation: a fixed set of seeded episodes, stepped side by side with batched inference."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from tqdm.auto import tqdm

from quarl.envs import make_env

ObsTransform = Callable[[np.ndarray], np.ndarray]


@dataclass
class Evaluation:
    """Per-episode results of one evaluation, in episode order."""

    rewards: list[float]
    lengths: list[int]
    seeds: list[int]
    wall_s: float

    @property
    def mean(self) -> float:
        return float(np.mean(self.rewards))

    @property
    def std(self) -> float:
        return float(np.std(self.rewards))


def episode_seeds(seed: int, episodes: int) -> list[int]:
    """Reset seeds of the evaluation episodes, derived from the run seed (disjoint from training)."""
    rng = np.random.default_rng([seed, 0xE7A1])
    return [int(s) for s in rng.integers(0, 2**31 - 1, size=episodes)]


def evaluate(
    model: BaseAlgorithm,
    env_cfg: Any,
    episodes: int,
    seed: int,
    n_envs: int = 4,
    deterministic: bool = True,
    obs_transform: Optional[ObsTransform] = None,
    progress: bool = False,
    desc: str = "evaluate",
) -> Evaluation:
    """Run `episodes` episodes, episode i reset with `episode_seeds(seed, episodes)[i]`.

    Up to `n_envs` episodes run at once and their observations go through one batched
    `model.predict`; the results do not depend on `n_envs` for deterministic policies.
    """
    seeds = episode_seeds(seed, episodes)
    torch.manual_seed(seed)
    envs = [make_env(env_cfg) for _ in range(min(n_envs, episodes))]
    rewards, lengths = [0.0] * episodes, [0] * episodes
    running: dict[int, tuple[int, Any]] = {}  # env slot -> (episode index, current observation)
    next_episode = 0
    start = time.perf_counter()
    bar = tqdm(total=episodes, desc=desc, disable=not progress, leave=False)
    try:
        for slot, env in enumerate(envs):
            running[slot] = (next_episode, env.reset(seed=seeds[next_episode])[0])
            next_episode += 1
        while running:
            slots = list(running)
            obs = np.stack([running[s][1] for s in slots])
            if obs_transform is not None:
                obs = obs_transform(obs)
            actions, _ = model.predict(obs, deterministic=deterministic)
            for slot, action in zip(slots, actions):
                episode, _ = running[slot]
                ob, reward, terminated, truncated, _ = envs[slot].step(action)
                rewards[episode] += float(reward)
                lengths[episode] += 1
                if not (terminated or truncated):
                    running[slot] = (episode, ob)
                    continue
                bar.update(1)
                if next_episode < episodes:
                    running[slot] = (next_episode, envs[slot].reset(seed=seeds[next_episode])[0])
                    next_episode += 1
                else:
                    del running[slot]
    finally:
        bar.close()
        for env in envs:
            env.close()
    return Evaluation(rewards, lengths, seeds, time.perf_counter() - start)
