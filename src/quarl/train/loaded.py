"""Policies read from the policy cache once per process: a sweep's cells, and a cell's baseline,
evaluation and fidelity, share the loaded model; a cell quantizes a fresh copy of it."""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

import torch

from quarl.train import MODEL_FILE
from quarl.train.cache import CachedPolicy

_LOADED: OrderedDict[tuple[str, int, bool], tuple[Any, Any]] = OrderedDict()
LOADED_MAX = 4  # policies kept in memory per process (a sweep's cells come policy by policy)


def loaded(policy: CachedPolicy) -> tuple[Any, Any]:
    """The policy's model and observation transform, read from disk once per process: a sweep's
    cells and a cell's baseline, evaluation and fidelity share them. Read-only: quantize a
    `fresh_model`."""
    try:
        stamp = (policy.folder / MODEL_FILE).stat().st_mtime_ns
    except OSError:  # let load() say what is wrong with the folder
        stamp = -1
    key = (str(policy.folder), stamp, policy.trust)  # a trusted load is no untrusted one's
    if key not in _LOADED:
        _LOADED[key] = (policy.load(), policy.obs_transform())
        while len(_LOADED) > LOADED_MAX:
            _LOADED.popitem(last=False)
    _LOADED.move_to_end(key)
    return _LOADED[key]


def fresh_model(policy: CachedPolicy) -> Any:
    """A copy of the policy's model that may be changed (quantized in place), without the empty
    experience buffers a loaded model allocates (an Atari DQN's would be gigabytes once copied)."""
    model = loaded(policy)[0]
    buffers = [getattr(model, name, None) for name in ("replay_buffer", "rollout_buffer")]
    # an action distribution's state (the last Gaussian, gSDE's exploration noise) holds non-leaf
    # tensors torch cannot copy; a copy recomputes it when it acts
    dist = getattr(model.policy, "action_dist", None)
    buffers += (
        [
            v
            for v in vars(dist).values()
            if isinstance(v, torch.distributions.Distribution) or (isinstance(v, torch.Tensor) and not v.is_leaf)
        ]
        if dist is not None
        else []
    )
    return copy.deepcopy(model, {id(b): None for b in buffers if b is not None})
