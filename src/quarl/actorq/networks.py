"""The networks ActorQ trains: DQN's Q-network, D4PG's policy and its distributional critic, and
the learners' optimiser step (`gradient_step`).

Acting networks (the Q-network and the D4PG policy) are plain `nn.Sequential` stacks of `Linear`
and `ReLU` layers, ending in a `Linear` (Q-values) or `Linear` + `Tanh` (actions in [-1, 1]): the
parameter quantizer and the actors' executors read exactly this shape (`params.layer_shapes`, `execution.build`).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import torch
import torch.nn as nn


def mlp(sizes: Sequence[int], squash: bool = False) -> nn.Sequential:
    """Linear layers of `sizes` (input first, output last) with ReLU between; Tanh at the end if `squash`."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    if squash:
        layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def q_network(obs_dim: int, hidden: Sequence[int], n_actions: int) -> nn.Sequential:
    """DQN: observation -> one Q-value per action."""
    return mlp([obs_dim, *hidden, n_actions])


def policy_network(obs_dim: int, hidden: Sequence[int], action_dim: int) -> nn.Sequential:
    """D4PG's deterministic policy: observation -> action in [-1, 1]^action_dim."""
    return mlp([obs_dim, *hidden, action_dim], squash=True)


class DistributionalCritic(nn.Module):
    """D4PG's critic: (observation, action) -> logits over `atoms` fixed return values.

    A layer-normed MLP as in Acme's D4PG: the first layer is Linear -> LayerNorm -> Tanh, the
    others Linear -> ELU, then a Linear head with one logit per atom.
    """

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int], atoms: int) -> None:
        super().__init__()
        sizes = [obs_dim + action_dim, *hidden]
        layers: list[nn.Module] = [nn.Linear(sizes[0], sizes[1]), nn.LayerNorm(sizes[1]), nn.Tanh()]
        for n_in, n_out in zip(sizes[1:-1], sizes[2:]):
            layers += [nn.Linear(n_in, n_out), nn.ELU()]
        layers.append(nn.Linear(sizes[-1], atoms))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], dim=-1))


def adam(params: Iterable[nn.Parameter], lr: float, device: torch.device) -> torch.optim.Adam:
    """Adam for a learner on `device`: on a GPU the fused kernel (one launch per step over every
    parameter), capturable (its step count on the device, so a CUDA graph can capture it, and eager
    and graphed updates round alike); on the CPU the default."""
    gpu = device.type == "cuda"
    return torch.optim.Adam(params, lr=lr, fused=gpu or None, capturable=gpu)


def gradient_step(
    optimizer: torch.optim.Optimizer, loss: torch.Tensor, parameters: Iterable[nn.Parameter], max_grad_norm: float
) -> None:
    """One optimiser step on `loss`, its gradients clipped to `max_grad_norm` (global norm)."""
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm)
    optimizer.step()


def to_device(batch: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    """A sampled batch on the learner's device: through pinned memory and without waiting, on a GPU."""
    if device.type != "cuda":
        return {k: torch.as_tensor(v) for k, v in batch.items()}
    return {k: torch.from_numpy(v).pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
