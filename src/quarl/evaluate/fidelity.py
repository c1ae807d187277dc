"""Action-level fidelity: how far a quantized policy's actions move from the fp32 policy's.

Measured on a seeded sample of the states the fp32 policy visits in its own evaluation episodes
(`quarl.evaluate.episodes.evaluate(..., keep_states=STATES)`), with greedy actions on both sides:

- discrete actions: `agreement` is the fraction of states where the greedy actions are equal;
- continuous actions: `mad` is the mean |a_q - a_fp32| / (high - low) over states and action
  dimensions, and `agreement` the fraction of states whose action is within AGREEMENT_TOLERANCE of
  the action range in every dimension;
- stochastic policies (A2C, PPO, SAC): `kl` is the mean KL(fp32 || quantized) of the action
  distributions (SAC: of its Gaussians before the tanh, which is the same KL as after it).

And at the level of reward, `relative_error`: E = (R_fp32 - R_q) / |R_fp32|, n/a near a zero fp32
reward.

Reward over a handful of episodes swings by several percent between seeds while the policy may act
identically; these numbers say what quantization did to the policy itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.sac.policies import SACPolicy

STATES = 1000  # observations kept from the fp32 evaluation episodes
AGREEMENT_TOLERANCE = 0.05  # continuous actions agree within this fraction of the action range

ObsTransform = Optional[Callable[[np.ndarray], np.ndarray]]


@dataclass(frozen=True)
class Fidelity:
    """Action fidelity of one policy against the fp32 policy on `states` states."""

    agreement: float
    mad: Optional[float]  # continuous actions only
    kl: Optional[float]  # stochastic policies only
    states: int

    def fields(self, prefix: str = "") -> dict[str, Any]:
        """Record columns: `action_agreement`, `action_mad` (`prefix`ed for backends and actors),
        and for the policy itself `action_kl` and `agreement_states`."""
        out: dict[str, Any] = {f"{prefix}action_agreement": self.agreement, f"{prefix}action_mad": self.mad}
        if not prefix:
            out.update(action_kl=self.kl, agreement_states=self.states)
        return out


def compare(reference: np.ndarray, actions: np.ndarray, space: spaces.Space) -> tuple[float, Optional[float]]:
    """(agreement, mad) of `actions` against `reference`, one row per state."""
    if isinstance(space, spaces.Discrete):
        return float(np.mean(reference.reshape(-1) == actions.reshape(-1))), None
    assert isinstance(space, spaces.Box)  # quarl's policies act in Discrete or Box spaces
    span = np.asarray(space.high, dtype=np.float64) - np.asarray(space.low, dtype=np.float64)
    span = np.where(np.isfinite(span) & (span > 0), span, 2.0).reshape(-1)  # unbounded: as if [-1, 1]
    n = len(reference)
    diff = np.abs(actions.reshape(n, -1).astype(np.float64) - reference.reshape(n, -1)) / span
    return float(np.mean(np.all(diff <= AGREEMENT_TOLERANCE, axis=1))), float(np.mean(diff))


def greedy_actions(policy: Any, obs: np.ndarray, per_observation: bool = False) -> np.ndarray:
    """Deterministic actions of anything with SB3's `predict` (a model, a Runner, an ActorQ policy)."""
    if per_observation:
        return np.concatenate([policy.predict(obs[i : i + 1], deterministic=True)[0] for i in range(len(obs))])
    return np.asarray(policy.predict(obs, deterministic=True)[0])


@torch.no_grad()
def _distribution(model: BaseAlgorithm, obs: np.ndarray) -> Optional[torch.distributions.Distribution]:
    policy = model.policy
    tensor = policy.obs_to_tensor(obs)[0]
    if isinstance(policy, ActorCriticPolicy):
        distribution = policy.get_distribution(tensor).distribution
        assert not isinstance(distribution, list)  # a list only for MultiCategorical, which quarl never builds
        return distribution
    if isinstance(policy, SACPolicy):
        mean, log_std, _ = policy.actor.get_action_dist_params(tensor)
        return torch.distributions.Normal(mean, log_std.exp())
    return None  # DQN, DDPG, TD3 act deterministically: no distribution to compare


def policy_fidelity(
    reference: BaseAlgorithm,
    reference_transform: ObsTransform,
    model: BaseAlgorithm,
    transform: ObsTransform,
    states: np.ndarray,
) -> Fidelity:
    """Fidelity of an SB3 model (PTQ, fp16, bf16, QAT) to its fp32 `reference` on raw `states`,
    each side normalising observations with its own transform (a QAT policy has its own)."""
    ref_obs = reference_transform(states) if reference_transform is not None else states
    obs = transform(states) if transform is not None else states
    p, q = _distribution(reference, ref_obs), _distribution(model, obs)
    kl = None
    if p is not None and q is not None:
        kl_all = torch.distributions.kl_divergence(p, q)
        kl = float((kl_all.sum(dim=-1) if kl_all.dim() > 1 else kl_all).mean())
    agreement, mad = compare(greedy_actions(reference, ref_obs), greedy_actions(model, obs), reference.action_space)
    return Fidelity(agreement, mad, kl, len(states))


def executed_fidelity(reference_actions: np.ndarray, policy: Any, states: np.ndarray, space: spaces.Space) -> Fidelity:
    """Fidelity of a policy executed for real (one observation per call, as deployed) to the fp32
    actions `reference_actions` on the same raw `states`."""
    agreement, mad = compare(reference_actions, greedy_actions(policy, states, per_observation=True), space)
    return Fidelity(agreement, mad, None, len(states))


E_FLOOR = 0.02  # E is n/a when |R_fp32| is below this fraction of the env's return scale


def relative_error(fp32: float, quantized: float, return_scale: float | None = None) -> tuple[float | None, str | None]:
    """E = (R_fp32 - R_q) / |R_fp32|, or (None, why) when the fp32 reward is too close to 0 for the
    ratio to mean anything: within E_FLOOR of the env's `return_scale` (exactly 0 without one)."""
    floor = E_FLOOR * abs(return_scale) if return_scale else 0.0
    if abs(fp32) <= floor:
        scale = f" (within {E_FLOOR:.0%} of env.return_scale={return_scale:g})" if return_scale else ""
        return None, f"E is n/a: the fp32 reward {fp32:.4g} is too close to 0{scale} to divide by"
    return (fp32 - quantized) / abs(fp32), None
