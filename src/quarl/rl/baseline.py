"""Whether an fp32 baseline can carry a comparison: a policy no better than a random one did not
learn, one below Gymnasium's reward threshold did not solve its task (light: gymnasium only, so
collation and the report read the same rule as the pipeline that records it)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

LEARNED_MARGIN = 0.05  # of env.return_scale: a policy this close to a random one's return did not learn


def reward_threshold(env_id: str | None) -> float | None:
    """Gymnasium's reward threshold for `env_id` (the return that counts as solved), if it has one."""
    if not env_id:
        return None
    try:
        return gym.spec(env_id).reward_threshold
    except gym.error.Error:
        return None


def fp32_flag(env_cfg: Any, reward: float) -> tuple[str, str] | None:
    """("not learned" or "not solved", why) where an fp32 policy's reward makes its comparisons weak,
    else None: no better than a random policy (`env.random_return`, within LEARNED_MARGIN of the
    return scale), or below Gymnasium's reward threshold. An E of 0% between two unlearned policies
    says nothing."""
    random = env_cfg.get("random_return")
    margin = LEARNED_MARGIN * abs(env_cfg.get("return_scale") or 0.0)
    if random is not None and reward <= random + margin:
        return "not learned", (
            f"the fp32 policy did not learn: its reward {reward:.4g} is no better than a random policy's "
            f"({random:g} on {env_cfg.get('id')})"
        )
    threshold = reward_threshold(env_cfg.get("id"))
    if threshold is not None and reward < threshold:
        return (
            "not solved",
            f"the fp32 policy's reward {reward:.4g} is below {env_cfg.get('id')}'s reward threshold {threshold:g}",
        )
    return None
