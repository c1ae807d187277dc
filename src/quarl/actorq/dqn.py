"""DQN learner for ActorQ: n-step double DQN with SB3's Huber loss, a target network synced every few
updates.

Hyperparameters keep SB3's names and meaning (rl-zoo3's tuned values apply as they are):
`target_update_interval` counts env steps in SB3, and SB3 trains in bursts of `gradient_steps`
every `train_freq` env steps, so its target moves at most once per burst: the target here is
synced every `max(target_update_interval, train_freq) * samples_per_insert / batch_size` learner
updates (the updates the samples-per-insert limit allows in that many env steps). Syncing every
`target_update_interval` updates instead makes rl-zoo3's CartPole settings diverge. n-step double-Q targets:
`R + discount * Q_target(s', argmax_a Q(s', a))` with the adder's discount (gamma^m, 0 at a terminal
state), as Ape-X DQN learns.

With `actorq.cuda_graph=true` on a CUDA learner the update runs as one CUDA graph (`quarl.actorq.graphed`).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

from quarl.actorq.graphed import GraphedStep
from quarl.actorq.networks import adam, gradient_step, q_network, to_device
from quarl.actorq.settings import Settings


class DQNLearner:
    """The fp32 Q-network, its target and its optimiser, on `device`."""

    def __init__(self, settings: Settings, device: torch.device) -> None:
        spec, h = settings.actor, settings.hyper
        self.device = device
        self.policy = q_network(spec.obs_dim, spec.hidden, spec.n_out).to(device)
        self.target = copy.deepcopy(self.policy).requires_grad_(False)
        self.optimizer = adam(self.policy.parameters(), float(h["learning_rate"]), device)
        self.max_grad_norm = float(h["max_grad_norm"])
        updates_per_step = settings.samples_per_insert / h["batch_size"]
        self.target_period = max(1, round(max(h["target_update_interval"], h["train_freq"]) * updates_per_step))
        self.updates = 0
        self.graphed = GraphedStep(self._step, device) if settings.cuda_graph and device.type == "cuda" else None

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """One gradient step on a sampled batch; returns the loss."""
        loss = self.graphed(batch) if self.graphed else self._step(to_device(batch, self.device))
        self.updates += 1
        if self.updates % self.target_period == 0:
            self.target.load_state_dict(self.policy.state_dict())  # in place: a captured graph reads the new values
        return {"loss": loss}

    def _step(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        """The update on a batch of device tensors (device work only, so that a CUDA graph can hold it)."""
        with torch.no_grad():  # double Q-learning: the online net picks the next action, the target values it
            best = self.policy(b["next_obs"]).argmax(dim=1, keepdim=True)
            next_q = self.target(b["next_obs"]).gather(1, best).squeeze(1)
            target = b["reward"] + b["discount"] * next_q
        q = self.policy(b["obs"]).gather(1, b["action"].long().unsqueeze(1)).squeeze(1)
        loss = F.smooth_l1_loss(q, target)
        gradient_step(self.optimizer, loss, self.policy.parameters(), self.max_grad_norm)
        return loss.detach()
