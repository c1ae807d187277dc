"""How the actors' copy of the policy acts beside the learner's along training, for actors in a number
format (`quant.actor_format`): on the replay's most recent observations, each curve row states

- DQN: the action agreement (the greedy action of the actors' Q-values equals the learner's) and the
  KL divergence KL(learner || actors) between the Boltzmann policies softmax(Q) at temperature 1;
- D4PG: the action gap, the mean over states of the largest |actor - learner| action component
  (actions in [-1, 1]).

Both sides run in torch on the CPU from the weights as published (`actorq.comm_bits`): the learner's
in fp32, the actors' rounded to the format as an actor rounds them on receipt, so a format's whole
effect and nothing else separates them. Off-policy learners (DQN, D4PG) need no correction for the
gap; these rows say how large it is. Runs with int8, fp16 or fp32 actors write no such rows (their
curves, and the time they measure, stay as they were)."""

from __future__ import annotations

import numpy as np
import torch

from quarl.actorq import execution, params
from quarl.actorq.settings import ActorSpec

STATES = 256  # the replay's most recent observations each row is measured on


def recent_observations(arrays: dict[str, np.ndarray], size: int, pos: int) -> np.ndarray:
    """The replay's last min(STATES, size) inserted observations (no draw from its sampler's stream)."""
    n = min(STATES, size)
    idx = (pos - 1 - np.arange(n)) % max(size, 1)
    return arrays["obs"][idx].astype(np.float32, copy=False) if n else np.empty((0, 0), np.float32)


def fidelity(spec: ActorSpec, packed: np.ndarray, obs: np.ndarray) -> dict[str, float]:
    """The curve row's fields for the published weights `packed` on observations `obs` (module docstring)."""
    if spec.actor_format is None or len(obs) == 0:
        return {}
    layers = params.unpack(packed, spec.layer_shapes, spec.comm_bits)
    learner = execution.TorchExecutor(execution.convert(layers, 32), spec.squash)(obs)
    actors = execution.TorchExecutor(execution.convert(layers, 32, spec.actor_format), spec.squash)(obs)
    if spec.squash:
        return {"train/actor_action_gap": float(np.abs(actors - learner).max(axis=1).mean())}
    agreement = float((actors.argmax(axis=1) == learner.argmax(axis=1)).mean())
    log_p = torch.log_softmax(torch.from_numpy(learner).double(), dim=1)
    log_q = torch.log_softmax(torch.from_numpy(actors).double(), dim=1)
    kl = float((log_p.exp() * (log_p - log_q)).sum(dim=1).mean())
    return {"train/actor_agreement": agreement, "train/actor_kl": kl}
