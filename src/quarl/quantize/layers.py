"""Layer helpers: the names of the layers a policy acts with, known from its config before any
policy is trained (so a `quant.layer_bits` naming a layer the policy does not have is refused before
anything runs), and `replace_submodule`, which swaps a layer for its quantized or folded form."""

from __future__ import annotations

import logging
from typing import Any

import torch.nn as nn
from gymnasium import spaces
from stable_baselines3.common.preprocessing import is_image_space, is_image_space_channels_first
from stable_baselines3.common.vec_env import VecTransposeImage

from quarl.config.keys import train_steps
from quarl.quantize.weights import check_layers, policy_layers
from quarl.rl.algos import hyperparams, sb3_class
from quarl.rl.envs import make_env

log = logging.getLogger(__name__)


def layer_names(cfg: Any) -> list[str]:
    """Names of the inference layers of the policy `cfg` trains (an untrained network of the same
    architecture), in acting order; as `quarl.quantize.weights.inference_layers` names them."""
    algo_cls = sb3_class(cfg.algo.name)
    env = make_env(cfg.env)
    try:
        obs_space, action_space = env.observation_space, env.action_space
    finally:
        env.close()
    if isinstance(obs_space, spaces.Box) and is_image_space(obs_space) and not is_image_space_channels_first(obs_space):
        obs_space = VecTransposeImage.transpose_space(obs_space)  # as SB3 wraps image envs
    kwargs = hyperparams(cfg.algo, train_steps(cfg)).get("policy_kwargs", {})
    policy_cls = algo_cls.policy_aliases[cfg.algo.policy] if isinstance(cfg.algo.policy, str) else cfg.algo.policy
    policy = policy_cls(obs_space, action_space, lambda _: 0.0, **kwargs)
    return list(policy_layers(policy, cfg.algo.name))


def replace_submodule(root: nn.Module, name: str, new: nn.Module) -> None:
    """Put `new` in place of the submodule of `root` at dotted `name` ('mlp_extractor.policy_net.0')."""
    parent_name, _, child = name.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, new)


def check_layer_names(cfg: Any) -> None:
    """Raise a QuarlError when `quant.layer_bits` names a layer the policy of `cfg` does not have.
    Pretrained policies (policy.source=path|hub) are checked when loaded."""
    if cfg.policy.source != "train":
        return
    check_layers(layer_names(cfg), cfg.quant)
