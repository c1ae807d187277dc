"""Greedy actions of an SB3 policy without SB3's `predict` around them, one observation per call.

`model.predict(obs, deterministic=True)` converts, checks and copies on every call; for the small
networks of most RL policies that is most of the time an evaluation spends outside the environment.
`GreedyActor` runs the policy's acting network itself (`quarl.deploy.acting_network`: the same
layers, the same preprocessing and action post-processing), on one observation per call:

- discrete actions, MLPs of Linear, ReLU and Tanh layers: numpy float32, the layers' vector-matrix
  products in place, and torch's own kernels where the two largest outputs are so near that the
  sums' rounding could order them differently (so the action is predict's). Nothing is exported
  or built (ONNX Runtime's export and session take about 25 ms, a third of a 10-episode CartPole
  evaluation), and a call takes about 5 us against ONNX Runtime's 8 us for CartPole's 64x64 policy;
- other discrete policies (CNNs, QAT activation fake quants): ONNX Runtime fp32 (3-8x faster than
  eager torch at batch 1). Neither float arithmetic is torch's in the last bits, which changes an
  action only where the two largest logits / Q-values are tied to within that rounding: 0 flips seen
  in 54,199 greedy CartPole steps of trained and untrained DQN/A2C/PPO policies (30 episodes each),
  nor in the equality tests' episodes (tests/evaluate/test_greedy.py);
- continuous actions: eager torch on the very kernels `predict` runs at batch 1, called layer by
  layer without module hooks, so the actions are bit for bit `predict`'s. (A last-bit difference in
  a continuous action changes every later state of the episode, so a faster runtime would change
  the reward in its last digits.)

One observation per call makes every action independent of how many episodes run side by side:
torch's and BLAS's batched kernels round a row differently with the batch it sits in, so a batched
evaluation's rewards would depend on `eval.n_envs`, which is not part of a cell's key.
Observation normalisation (VecNormalize) is applied in numpy exactly as before `predict`.
"""

from __future__ import annotations

import io
import logging
import math
import warnings
from typing import Any, Callable, Optional

import numpy as np
import torch
import torch.nn as nn
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.torch_layers import FlattenExtractor

from quarl.deploy.acting import ActingNetwork, Argmax, CategoricalMode, Preprocess, acting_network
from quarl.errors import QuarlError

log = logging.getLogger(__name__)

ObsTransform = Optional[Callable[[np.ndarray], np.ndarray]]
ENGINES = ("auto", "numpy", "onnx", "torch")


def _leaves(module: nn.Module) -> list[nn.Module]:
    """The modules a Sequential tree applies in order (other modules stay whole)."""
    if isinstance(module, nn.Sequential):
        return [leaf for child in module for leaf in _leaves(child)]
    return [module]


class _TorchSteps:
    """The acting network's modules called one after the other through `forward` (the same ops as
    calling the network, without the per-module hook machinery)."""

    def __init__(self, net: ActingNetwork) -> None:
        self.steps = [m.forward for m in (*_leaves(net.prep), *_leaves(net.body), net.head)]

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            x = torch.from_numpy(obs)
            for step in self.steps:
                x = step(x)
            return x.numpy()[0]


class _NumpyMlp:
    """An MLP acting network with a discrete head in numpy float32, one observation per call: each
    Linear a vector-matrix product into a fresh vector, then its bias and activation in place.

    The action is the argmax of the last layer's output where its two largest values lie further
    apart than the rounding between numpy's and torch's sums could move them (`TIE` of the larger's
    magnitude, and at least `TIE`); a nearer tie is decided by torch's own kernels at batch 1, as
    `predict` decides it (an untrained policy's near-equal logits, where the categorical mode's
    softmax can round both to one probability)."""

    TIE = 1e-4
    ACTIVATIONS: dict[type, Callable[[np.ndarray], Any]] = {
        nn.ReLU: lambda h: np.maximum(h, 0.0, out=h),
        nn.Tanh: lambda h: np.tanh(h, out=h),
    }

    @classmethod
    def covers(cls, net: ActingNetwork) -> bool:
        """Whether `net` is float observations -> Linear / ReLU / Tanh / Flatten -> argmax."""
        prep = _leaves(net.prep)
        plain = all(isinstance(m, Preprocess) and not m.scale_images for m in prep) and len(net.obs_shape) == 1
        layers = (nn.Linear, nn.Flatten, FlattenExtractor, nn.Identity, *cls.ACTIVATIONS)
        return (
            plain
            and isinstance(net.head, (Argmax, CategoricalMode))
            and all(type(m) in layers for m in _leaves(net.body))
        )

    def __init__(self, net: ActingNetwork) -> None:
        self.exact = _TorchSteps(net)
        self.steps: list[tuple[np.ndarray, np.ndarray] | Callable[[np.ndarray], Any]] = []
        for module in _leaves(net.body):
            if isinstance(module, nn.Linear):
                weight = module.weight.detach().float().numpy()
                bias = module.bias.detach().float().numpy() if module.bias is not None else np.zeros(len(weight))
                self.steps.append((np.ascontiguousarray(weight.T), bias.astype(np.float32)))
            elif type(module) in self.ACTIVATIONS:
                self.steps.append(self.ACTIVATIONS[type(module)])

    def __call__(self, obs: np.ndarray) -> np.int64:
        h = obs.reshape(-1)
        for step in self.steps:
            if isinstance(step, tuple):
                h = np.dot(h, step[0])
                h += step[1]
            else:
                step(h)
        values = h.tolist()  # a few actions: Python's max beats numpy's calls
        top = max(values)
        best = values.index(top)  # the first of equal maxima, as argmax
        second = max(values[:best] + values[best + 1 :], default=-math.inf)
        if top - second <= self.TIE * max(1.0, abs(top)):
            return np.int64(self.exact(obs))
        return np.int64(best)


class _OnnxSession:
    """The acting network in ONNX Runtime, fp32, one intra-op thread, for one observation per call.

    Input and output are bound once to buffers of their own (ONNX Runtime's IOBinding): a call
    copies the observation in and the action out, half the per-call cost of `session.run`. The
    binding runs through the session's C++ object: the Python wrapper's per-call checks (WebGPU
    graph capture) cost as much again as running a small MLP (onnxruntime is pinned in constraints.txt).
    """

    def __init__(self, net: ActingNetwork, example: np.ndarray) -> None:
        from quarl.deploy import onnx_io

        ort = onnx_io.require("onnxruntime", "Evaluating with ONNX Runtime")
        buffer = io.BytesIO()
        # TorchScript-based export: ~0.1 s for a policy network, against seconds for torch.export's.
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                net,
                (torch.from_numpy(example),),
                buffer,  # type: ignore[arg-type]  # torch's annotation omits the file objects it writes to
                dynamo=False,
                input_names=["obs"],
                output_names=["action"],
                dynamic_axes={"obs": {0: "batch"}, "action": {0: "batch"}},
            )
            action = net(torch.from_numpy(example)).numpy()
        self.session = onnx_io.session(buffer.getvalue(), threads=1)
        self.obs, self.action = np.zeros_like(example[:1]), np.zeros_like(action[:1])
        self.binding = self.session.io_binding()
        self.binding.bind_ortvalue_input("obs", ort.OrtValue.ortvalue_from_numpy(self.obs))  # no copy: our buffer
        self.binding.bind_ortvalue_output("action", ort.OrtValue.ortvalue_from_numpy(self.action))
        self._run, self._binding = self.session._sess.run_with_iobinding, self.binding._iobinding
        self._scalar = self.action.ndim == 1  # one discrete action: indexing gives a copy already

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.obs[...] = obs
        self._run(self._binding, None)
        return self.action[0] if self._scalar else self.action[0].copy()


class GreedyActor:
    """`actor(obs_batch)` -> the greedy actions `model.predict(obs_transform(obs_batch),
    deterministic=True)` gives, computed one observation per call (see the module docstring).

    Args:
        model: an SB3 model (DQN, A2C, PPO, DDPG, TD3, SAC): fp32, PTQ (fake-quantized in place) or
            QAT (its fake-quant layers are folded into the copy the actor runs).
        obs_transform: the policy's observation normalisation (`CachedPolicy.obs_transform()`), or None.
        engine: "auto" (numpy for discrete MLPs, ONNX Runtime for other discrete policies, torch for
            continuous ones and for a network holding a module with `onnx_exportable = False`),
            "numpy" (MLPs with a discrete head only), "onnx" or "torch".

    Raises:
        QuarlError: a policy the acting network does not cover (dict observations, multi-discrete
            actions, normalised image observations); the caller then evaluates with `predict`.
    """

    def __init__(self, model: BaseAlgorithm, obs_transform: ObsTransform = None, engine: str = "auto") -> None:
        if engine not in ENGINES:
            raise QuarlError(f"engine={engine} is not known: choose one of {', '.join(ENGINES)}.")
        net = acting_network(model)  # normalisation stays outside, in numpy, as before predict
        if obs_transform is not None and net.obs_dtype == np.uint8:
            raise QuarlError("Normalised image observations are evaluated with predict.")
        self.net, self.transform, self.dtype = net, obs_transform, net.obs_dtype
        example = np.zeros((1, *net.obs_shape), dtype=net.obs_dtype)
        if engine == "auto":  # a module that says it does not export (a number format's rounding) runs in torch
            exportable = all(getattr(m, "onnx_exportable", True) for m in net.modules())
            engine = "onnx" if net.action_kind == "discrete" and exportable else "torch"
            engine = "numpy" if engine == "onnx" and _NumpyMlp.covers(net) else engine
        elif engine == "numpy" and not _NumpyMlp.covers(net):
            raise QuarlError("engine=numpy covers MLPs of Linear, ReLU and Tanh layers with a discrete head only.")
        self.engine = engine
        self._run: Callable[[np.ndarray], Any] = _NumpyMlp(net) if engine == "numpy" else _TorchSteps(net)
        if engine == "onnx":
            try:
                self._run = _OnnxSession(net, example)
            except Exception as exc:  # the exporter fails in many ways; torch computes the same actions
                log.warning(
                    "Evaluating in torch: the policy network did not export to ONNX (%s: %s).",
                    type(exc).__name__,
                    str(exc).splitlines()[0] if str(exc) else "",
                )
                self.engine = "torch"

    def one(self, obs: np.ndarray) -> np.ndarray:
        """The action for one observation (no batch axis), as `predict` gives it for `obs[None]`."""
        batch = obs[None] if self.transform is None else self.transform(obs[None])
        return self._run(batch.astype(self.dtype, copy=False))

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The actions for a batch of observations, computed one observation per call."""
        return np.stack([self.one(row) for row in obs])


def greedy_actor(model: Any, obs_transform: ObsTransform = None, engine: str = "auto") -> Optional[GreedyActor]:
    """A GreedyActor for an SB3 model, or None for anything else (a Runner, an ActorQ policy) and
    for policies the acting network does not cover."""
    if not isinstance(model, BaseAlgorithm):
        return None
    try:
        return GreedyActor(model, obs_transform, engine)
    except QuarlError as exc:
        log.debug("Evaluating with predict: %s", exc)
        return None
