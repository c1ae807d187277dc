"""What of an acting network the integer policy takes: its Linear layers in order with their input
fake quants and activations (`stages_of`), its observation step (VecNormalize), and the refusals, in
one sentence each, of what has no integer form (convolutions, recurrent layers, other activations)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch.nn as nn
from stable_baselines3.common.torch_layers import FlattenExtractor

from quarl.deploy.acting import ActingNetwork, ActivationFakeQuant, ObsNormalize, Preprocess
from quarl.deploy.edge.integer import SUPPORTED
from quarl.errors import QuarlError


@dataclass
class Stage:
    name: str
    linear: nn.Linear
    fq: Optional[ActivationFakeQuant]  # the layer's own input fake quant (PTQ calibrated / QAT frozen)
    activation: str = "none"


def unsupported(what: str) -> QuarlError:
    return QuarlError(f"{what} has no integer form here: {SUPPORTED}.")


def stages_of(net: ActingNetwork) -> list[Stage]:
    """The body's Linear layers with their input fake quants and activations, in order."""
    stages: list[Stage] = []
    pending_fq: Optional[ActivationFakeQuant] = None

    def visit(module: nn.Module, name: str) -> None:
        nonlocal pending_fq
        if isinstance(module, (nn.Sequential, FlattenExtractor)):
            for child_name, child in module.named_children():
                visit(child, f"{name}.{child_name}")
        elif isinstance(module, nn.Flatten):
            if stages:
                raise unsupported(f"A Flatten between weight layers ({name})")
        elif isinstance(module, ActivationFakeQuant):
            pending_fq = module
        elif isinstance(module, nn.Linear):
            stages.append(Stage(name, module, pending_fq))
            pending_fq = None
        elif isinstance(module, (nn.Tanh, nn.ReLU, nn.Identity)):
            kind = "tanh" if isinstance(module, nn.Tanh) else "relu" if isinstance(module, nn.ReLU) else "none"
            if kind == "none":
                return
            if not stages or stages[-1].activation != "none":
                raise unsupported(f"An activation before any weight layer or after another ({name}, {kind})")
            stages[-1].activation = kind
        elif isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            raise QuarlError(
                f"The convolution {name} ({type(module).__name__}) is not supported by the integer policy: {SUPPORTED} "
                "(use quant.backend=onnx_int8 for CNN policies)."
            )
        elif isinstance(module, (nn.RNNBase, nn.RNNCellBase)):
            raise QuarlError(f"The recurrent layer {name} ({type(module).__name__}) is not supported: {SUPPORTED}.")
        else:
            raise unsupported(f"The layer {name} ({type(module).__name__})")

    visit(net.body, "body")
    if not stages:
        raise QuarlError(f"The policy has no Linear layer: {SUPPORTED}.")
    if pending_fq is not None:
        raise unsupported("A fake quantization after the last weight layer")
    return stages


def observation_step(net: ActingNetwork) -> tuple[Optional[np.ndarray], Optional[np.ndarray], Optional[float]]:
    mean = std = None
    clip: Optional[float] = None
    for module in net.prep.children():
        if isinstance(module, ObsNormalize):
            mean, std, clip = module.mean.numpy().reshape(-1), module.std.numpy().reshape(-1), module.clip
        elif isinstance(module, Preprocess):
            if module.scale_images:
                raise QuarlError(f"Image observations are not supported by the integer policy: {SUPPORTED}.")
        else:
            raise unsupported(f"The observation step {type(module).__name__}")
    return mean, std, clip


def fq_range(fq: ActivationFakeQuant) -> tuple[float, float]:
    """The real range an input fake quant keeps (calibrated or QAT-frozen)."""
    lo, hi = getattr(fq, "lo", None), getattr(fq, "hi", None)
    if lo is not None and hi is not None:  # quarl.quantize.calibration.CalibratedFakeQuant
        return float(lo), float(hi)
    scale = float(fq.scale.item())
    return (fq.qmin - fq.zero_point) * scale, (fq.qmax - fq.zero_point) * scale


def check_model(model: Any) -> None:
    """Refuse, in one sentence, SB3 policies the integer policy cannot take before building anything."""
    policy = getattr(model, "policy", None)
    if policy is not None and ("Recurrent" in type(policy).__name__ or hasattr(policy, "lstm_actor")):
        raise QuarlError(f"Recurrent policies ({type(policy).__name__}, LSTM) are not supported: {SUPPORTED}.")
