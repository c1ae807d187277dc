"""The states quarl's calibration sees: the fp32 policy's greedy episodes on the record's
calibration seeds (`quarl.quantize.calibration.calibration_seeds`, disjoint from the evaluation seeds)."""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm

from quarl.quantize.calibration import greedy_observations
from quarl.rl.envs import make_env

log = logging.getLogger(__name__)


def visited_states(
    model: BaseAlgorithm,
    env_cfg: Any,
    seeds: list[int],
    obs_transform: Optional[Callable[[np.ndarray], np.ndarray]] = None,
) -> np.ndarray:
    """Raw observations `model` acts on, greedily, for one episode per seed (as
    `quarl.quantize.calibration.calibrate` steps them), stacked into one array."""
    states = [batch[0].copy() for batch in greedy_observations(model, env_cfg, seeds, obs_transform)]
    log.info("Collected %d calibration states from %d fp32 episodes.", len(states), len(seeds))
    if not states:
        return np.zeros((0, *(make_env(env_cfg).observation_space.shape or ())), dtype=np.float32)
    return np.stack(states)


def calibration_states(cfg: Any, policy: Any) -> np.ndarray:
    """The states the fp32 policy of record config `cfg` visits in its calibration episodes
    (`quant.calibration_episodes`, default 5). `policy`: its CachedPolicy
    (`quarl.train.cache.cached(quarl.config.method_registry.policy_config(cfg), root)`)."""
    from quarl.quantize.calibration import calibration_seeds

    episodes = int(cfg.quant.get("calibration_episodes", 5))
    seeds = calibration_seeds(int(cfg.seed), episodes, int(cfg.eval.episodes))
    return visited_states(policy.load(), cfg.env, seeds, policy.obs_transform())
