"""D4PG learner (Barth-Maron et al., 2018), written for quarl in CleanRL's style.

- Policy: a deterministic MLP, observation -> action in [-1, 1] (tanh); scaled to the env's bounds
  by the actors.
- Critic: a layer-normed MLP giving a categorical distribution over `atoms` fixed returns spaced
  evenly on [v_min, v_max].
- Targets: n-step returns from the actors' adders, `R + discount * z` for every atom z of the target
  critic's distribution at (s', pi_target(s')), projected back onto the atoms (`project`).
- Losses: the critic minimises the cross-entropy to the projected target; the policy maximises the
  critic's expected return at its action. Both use Adam; gradients clipped by global norm.
- Target networks: copied from the online ones every `target_update_period` updates.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from quarl.actorq.networks import DistributionalCritic, adam, gradient_step, policy_network, to_device
from quarl.actorq.settings import Settings


def project(
    next_probs: torch.Tensor, rewards: torch.Tensor, discounts: torch.Tensor, atoms: torch.Tensor
) -> torch.Tensor:
    """Categorical projection (C51): the distribution of `rewards + discounts * Z`, where Z has
    probabilities `next_probs` [batch, atoms] on `atoms`, moved onto the same atoms.

    Each shifted atom `tz = clamp(r + d * z, v_min, v_max)` splits its probability between its two
    neighbouring atoms in proportion to its distance to each (all of it to one atom when it lands
    on it exactly).
    """
    v_min, v_max, n = atoms[0], atoms[-1], atoms.numel()
    dz = (v_max - v_min) / (n - 1)
    tz = (rewards[:, None] + discounts[:, None] * atoms[None, :]).clamp(v_min, v_max)
    b = (tz - v_min) / dz  # fractional index of every shifted atom
    lower, upper = b.floor().long(), b.ceil().long()
    lower_weight = (upper.float() - b) + (lower == upper).float()  # exact hits go wholly to `lower`
    upper_weight = b - lower.float()
    out = torch.zeros_like(next_probs)
    out.scatter_add_(1, lower, next_probs * lower_weight)
    out.scatter_add_(1, upper, next_probs * upper_weight)
    return out


class D4PGLearner:
    """The fp32 policy and critic, their targets and optimisers, on `device`."""

    def __init__(self, settings: Settings, device: torch.device) -> None:
        spec, h = settings.actor, settings.hyper
        self.device = device
        self.policy = policy_network(spec.obs_dim, spec.hidden, spec.n_out).to(device)
        self.critic = DistributionalCritic(spec.obs_dim, spec.n_out, h["critic_layers"], int(h["atoms"])).to(device)
        self.target_policy = copy.deepcopy(self.policy).requires_grad_(False)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.policy_opt = adam(self.policy.parameters(), float(h["learning_rate"]), device)
        self.critic_opt = adam(self.critic.parameters(), float(h["learning_rate"]), device)
        self.atoms = torch.linspace(float(h["v_min"]), float(h["v_max"]), int(h["atoms"]), device=device)
        self.target_period, self.max_grad_norm = int(h["target_update_period"]), float(h["max_grad_norm"])
        self.updates = 0

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """One critic and one policy step on a sampled batch; returns both losses."""
        b = to_device(batch, self.device)
        with torch.no_grad():
            next_logits = self.target_critic(b["next_obs"], self.target_policy(b["next_obs"]))
            target = project(next_logits.softmax(-1), b["reward"], b["discount"], self.atoms)
        logits = self.critic(b["obs"], b["action"])
        critic_loss = -(target * logits.log_softmax(-1)).sum(-1).mean()
        gradient_step(self.critic_opt, critic_loss, self.critic.parameters(), self.max_grad_norm)

        q = (self.critic(b["obs"], self.policy(b["obs"])).softmax(-1) * self.atoms).sum(-1)
        policy_loss = -q.mean()
        gradient_step(self.policy_opt, policy_loss, self.policy.parameters(), self.max_grad_norm)

        self.updates += 1
        if self.updates % self.target_period == 0:
            self.target_policy.load_state_dict(self.policy.state_dict())
            self.target_critic.load_state_dict(self.critic.state_dict())
        return {"critic_loss": critic_loss.detach(), "policy_loss": policy_loss.detach()}
