"""A trained SB3 policy as one plain torch module: raw observations in, greedy actions out.

`acting_network(model)` copies the layers a policy acts with and adds what `model.predict(obs,
deterministic=True)` does around them, so the module computes the same actions:

    observations -> [VecNormalize] -> float (/255 for images) -> features -> latent -> action layer -> head

The head is the deterministic action: argmax of the Q-values (DQN), the mode of the categorical
distribution (A2C/PPO, discrete), the mean action clipped to the action space (A2C/PPO, continuous),
or the squashed action mapped from [-1, 1] to the action space (DDPG/TD3, SAC, gSDE with squashing).

Quantized policies: a PTQ policy's layers already hold its fake-quantized weights and are copied as
they are. A QAT policy's `QuantLayer` wrappers are folded into plain layers holding the fake-quantized
weights (`weight_fq(weight)`), preceded by an `ActivationFakeQuant` with the frozen input range, so
the module reproduces the QAT policy; int8 backends drop those activation fake quants and quantize
the activations themselves.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Callable, Optional, Union

import numpy as np
import numpy.typing as npt
import torch
import torch.nn as nn
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.vec_env import VecNormalize
from stable_baselines3.dqn.policies import DQNPolicy
from stable_baselines3.sac.policies import SACPolicy
from stable_baselines3.td3.policies import TD3Policy

from quarl.errors import QuarlError
from quarl.quantize import fake_quant as qat
from quarl.quantize.activations import ActivationFakeQuant
from quarl.quantize.layers import replace_submodule
from quarl.quantize.weights import qparams

log = logging.getLogger(__name__)

ObsTransform = Union[VecNormalize, Callable[[np.ndarray], np.ndarray], None]


class ObsNormalize(nn.Module):
    """VecNormalize's observation normalisation: clip((obs - mean) / sqrt(var + eps), -clip, clip)."""

    mean: torch.Tensor  # buffers, registered in __init__
    std: torch.Tensor

    def __init__(self, mean: np.ndarray, var: np.ndarray, epsilon: float, clip: float) -> None:
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(np.asarray(mean, dtype=np.float32)))
        self.register_buffer(
            "std", torch.as_tensor(np.sqrt(np.asarray(var, dtype=np.float64) + epsilon).astype(np.float32))
        )
        self.clip = float(clip)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.clamp((obs.float() - self.mean) / self.std, -self.clip, self.clip)


class Preprocess(nn.Module):
    """SB3's `preprocess_obs` for Box observations: to float, and / 255 for images."""

    def __init__(self, scale_images: bool) -> None:
        super().__init__()
        self.scale_images = scale_images

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        obs = obs.float()
        return obs / 255.0 if self.scale_images else obs

    def extra_repr(self) -> str:
        return f"scale_images={self.scale_images}"


class Argmax(nn.Module):
    """Greedy discrete action: index of the largest Q-value (DQN)."""

    def forward(self, q_values: torch.Tensor) -> torch.Tensor:
        return torch.argmax(q_values, dim=1)


class CategoricalMode(nn.Module):
    """The mode of SB3's categorical distribution, computed as SB3 does: argmax of the softmax of
    the normalised logits (the same index as the argmax of the logits, up to float ties)."""

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        return torch.argmax(F.softmax(logits, dim=-1), dim=1)


class BoxAction(nn.Module):
    """A continuous action from the policy's output: clipped to [low, high], or (squashed policies)
    mapped from [-1, 1] to [low, high]; `tanh` first when the distribution squashes its mean."""

    low: torch.Tensor  # buffers, registered in __init__
    high: torch.Tensor
    span: torch.Tensor

    def __init__(self, space: spaces.Box, squash: bool, tanh: bool) -> None:
        super().__init__()
        self.shape = tuple(space.shape)
        self.squash, self.tanh = squash, tanh
        low, high = np.asarray(space.low, dtype=np.float32), np.asarray(space.high, dtype=np.float32)
        self.register_buffer("low", torch.as_tensor(low))
        self.register_buffer("high", torch.as_tensor(high))
        self.register_buffer("span", torch.as_tensor(high - low))  # float32, as numpy computes it

    def forward(self, out: torch.Tensor) -> torch.Tensor:
        out = out.float()
        if self.tanh:
            out = torch.tanh(out)
        out = out.reshape((-1, *self.shape))
        if self.squash:  # SB3's unscale_action: low + (0.5 * (a + 1) * (high - low))
            return self.low + (0.5 * (out + 1.0) * self.span)
        return torch.clamp(out, self.low, self.high)

    def extra_repr(self) -> str:
        return f"shape={self.shape}, squash={self.squash}, tanh={self.tanh}"


class ActingNetwork(nn.Module):
    """`prep` (normalise, to float) -> `body` (the weight layers) -> `head` (the action).

    Backends change only the body (int8, fp16, bf16); `prep` and `head` stay in float32.

    Attributes:
        obs_shape: shape of one observation (the policy's observation space).
        obs_dtype: dtype the network takes (uint8 for unnormalised images, else float32).
        action_kind: "discrete" (int64 actions) or "continuous" (float32 actions).
        action_shape: shape of one action.
        algo: the SB3 algorithm's name, lower case.
    """

    def __init__(
        self,
        prep: nn.Module,
        body: nn.Sequential,
        head: nn.Module,
        *,
        obs_shape: tuple[int, ...],
        obs_dtype: npt.DTypeLike,
        action_kind: str,
        action_shape: tuple[int, ...],
        algo: str,
    ) -> None:
        super().__init__()
        self.prep, self.head = prep, head
        self.body: nn.Module = body  # a half-precision backend wraps it in a cast
        self.obs_shape, self.obs_dtype = tuple(obs_shape), np.dtype(obs_dtype)
        self.action_kind, self.action_shape, self.algo = action_kind, tuple(action_shape), algo

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.prep(obs)))

    def batch(self, obs: np.ndarray) -> np.ndarray:
        """`obs` as a batch in the network's input dtype (one observation gets a batch axis)."""
        obs = np.asarray(obs)
        if obs.shape == self.obs_shape:
            obs = obs[None]
        if obs.shape[1:] != self.obs_shape:
            raise QuarlError(
                f"Observations of shape {obs.shape} do not fit this policy: it takes {self.obs_shape} "
                f"(one observation) or (N, {', '.join(map(str, self.obs_shape))}) (a batch)."
            )
        return np.ascontiguousarray(obs, dtype=self.obs_dtype)

    @torch.no_grad()
    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions for a batch of observations, in float32 eager torch."""
        return self(torch.from_numpy(self.batch(obs))).numpy()


def _normalizer(obs_transform: ObsTransform) -> Optional[VecNormalize]:
    if obs_transform is None:
        return None
    vec = getattr(obs_transform, "__self__", obs_transform)  # a bound VecNormalize.normalize_obs
    if not isinstance(vec, VecNormalize):
        raise QuarlError(
            f"obs_transform={obs_transform!r} cannot be folded into the network: pass the policy's "
            "VecNormalize (or its normalize_obs, as CachedPolicy.obs_transform() returns), or None."
        )
    if not vec.norm_obs:
        return None
    if isinstance(vec.obs_rms, dict):
        raise QuarlError("Dict observations are not supported: quarl deploys policies with Box observations.")
    return vec


def _fold(layer: qat.QuantLayer) -> nn.Module:
    """A QuantLayer as a plain layer with its fake-quantized weights (and input fake quant)."""
    plain = copy.deepcopy(layer.layer)
    with torch.no_grad():
        plain.weight.copy_(layer.weight_fq(layer.layer.weight))
        if layer.bias_fq is not None:  # made only for a layer with a bias
            assert plain.bias is not None and layer.layer.bias is not None
            plain.bias.copy_(layer.bias_fq(layer.layer.bias))
    fq = layer.input_fq
    if fq is None or not bool(fq.enabled):
        return plain
    if not bool(fq.frozen):
        log.warning("QAT activation ranges are not frozen: the acting network uses the ranges as they are now.")
    scale, zero_point, qmin, qmax = qparams(fq.lo, fq.hi, fq.bits, fq.scheme)
    return nn.Sequential(ActivationFakeQuant(float(scale.item()), int(zero_point.item()), qmin, qmax), plain)


def _copy(module: nn.Module) -> nn.Module:
    """A deep copy of `module` in eval mode, with QAT wrappers folded into plain layers."""
    module = copy.deepcopy(module).eval()
    if isinstance(module, qat.QuantLayer):
        return _fold(module)
    for name, sub in list(module.named_modules()):
        if isinstance(sub, qat.QuantLayer):
            replace_submodule(module, name, _fold(sub))
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def _body_and_head(policy: Any) -> tuple[list[nn.Module], nn.Module, str]:
    """The policy's weight layers in order, its action head and the action kind."""
    space = policy.action_space
    if isinstance(policy, DQNPolicy):
        q = policy.q_net
        return [q.features_extractor, q.q_net], Argmax(), "discrete"
    if isinstance(policy, ActorCriticPolicy):
        layers = [policy.pi_features_extractor, policy.mlp_extractor.policy_net, policy.action_net]
        if isinstance(space, spaces.Discrete):
            return layers, CategoricalMode(), "discrete"
        if isinstance(space, spaces.Box):
            # gSDE with squash_output: the mode is tanh(mean), then unscaled; otherwise the mean, clipped
            return layers, BoxAction(space, squash=policy.squash_output, tanh=policy.squash_output), "continuous"
    elif isinstance(policy, TD3Policy):  # DDPG and TD3: the actor ends in tanh
        return (
            [policy.actor.features_extractor, policy.actor.mu],
            BoxAction(space, squash=True, tanh=False),
            "continuous",
        )
    elif isinstance(policy, SACPolicy):  # the mode of the squashed Gaussian: tanh(mean)
        actor = policy.actor
        return (
            [actor.features_extractor, actor.latent_pi, actor.mu],
            BoxAction(space, squash=True, tanh=True),
            "continuous",
        )
    else:
        raise QuarlError(
            f"{type(policy).__name__} is not supported for deployment: "
            "quarl deploys DQN, A2C, PPO, DDPG, TD3 and SAC policies."
        )
    raise QuarlError(
        f"Action space {space} is not supported for deployment: quarl deploys Discrete and Box action spaces."
    )


def acting_network(model: BaseAlgorithm, obs_transform: ObsTransform = None) -> ActingNetwork:
    """The deterministic policy of `model` as one torch module (a copy: `model` is not changed).

    Args:
        model: a trained SB3 model (DQN, A2C, PPO, DDPG, TD3, SAC), fp32, PTQ (weights fake-quantized
            in place by `quarl.quantize.weights.quantize_policy`) or QAT (its QuantLayers on and frozen).
        obs_transform: the observation normalisation the policy was trained with: a VecNormalize,
            its bound `normalize_obs` (what `CachedPolicy.obs_transform()` returns), or None.

    Returns:
        An `ActingNetwork` in eval mode: `net(torch.from_numpy(obs))` for a batch of raw observations
        shaped like `model.observation_space` gives the actions `model.predict(obs_transform(obs),
        deterministic=True)` gives (int64 indices for discrete actions, float32 for Box actions).
    """
    policy = model.policy
    obs_space = policy.observation_space
    if not isinstance(obs_space, spaces.Box):
        raise QuarlError(
            f"Observation space {obs_space} is not supported for deployment: "
            "quarl deploys policies with Box observations."
        )
    parts, head, action_kind = _body_and_head(policy)
    normalizer = _normalizer(obs_transform)
    image = bool(policy.normalize_images and is_image_space(obs_space))
    prep: list[nn.Module] = []
    if normalizer is not None:
        rms = normalizer.obs_rms
        assert not isinstance(rms, dict)  # _normalizer refuses dict observations
        prep.append(ObsNormalize(rms.mean, rms.var, normalizer.epsilon, normalizer.clip_obs))
    prep.append(Preprocess(scale_images=image))
    obs_dtype = np.uint8 if obs_space.dtype == np.uint8 and normalizer is None else np.float32
    body = nn.Sequential(*[_copy(p) for p in parts])
    net = ActingNetwork(
        nn.Sequential(*prep),
        body,
        head,
        obs_shape=obs_space.shape,
        obs_dtype=obs_dtype,
        action_kind=action_kind,
        action_shape=tuple(policy.action_space.shape or ()),
        algo=type(model).__name__.lower(),
    )
    return net.eval()
