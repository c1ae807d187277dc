"""The edge targets as quarl execution backends (`quarl.deploy.execution`): `c` runs the compiled C
policy through ctypes, `tflite` the .tflite model under LiteRT, one observation per call."""

from __future__ import annotations

import numpy as np

from quarl.deploy.acting import ActingNetwork
from quarl.deploy.edge.convert import integer_policy
from quarl.deploy.edge.integer import MIN_CALIBRATION_OBS, IntegerPolicy
from quarl.deploy.runner import Runner


def edge_policy(
    net: ActingNetwork, example: np.ndarray, calibrated: bool, rounding: str, activation_bits: int = 8
) -> IntegerPolicy:
    """The integer policy of `net`: ranges from the record (PTQ act_bits/input_bits, QAT), the rest
    observed on `example` where it is a batch of calibration states (at least MIN_CALIBRATION_OBS)."""
    states = example if calibrated and len(example) >= MIN_CALIBRATION_OBS else None
    return integer_policy(net, states, rounding=rounding, activation_bits=activation_bits)


def _backend(name: str, integer: IntegerPolicy) -> tuple[str, str]:
    """The backend's name and the precision it executes (int8 activations, or 16x8)."""
    if integer.activation_bits == 16:
        return f"{name}_16x8", "16x8"
    return name, f"int{integer.weight_bits}"


class CRunner(Runner):
    """The C policy (quarl.deploy.edge.cgen) compiled by the host compiler, called through ctypes.

    `integer` is the integer policy it computes bit for bit; `nbytes` the bytes of its constant arrays.
    """

    def __init__(self, net: ActingNetwork, integer: IntegerPolicy) -> None:
        from quarl.deploy.edge.cgen import data_bytes
        from quarl.deploy.edge.toolchain import CPolicy

        self.net = net
        self.backend, self.precision = _backend("c", integer)
        self.threads, self.timings_ms = 1, {}
        self.integer = integer
        self.c = CPolicy(integer)
        self.nbytes = data_bytes(integer)

    def _run(self, obs: np.ndarray) -> np.ndarray:
        return self.c.act_one(obs) if len(obs) == 1 else self.c.act(obs)


class TfliteRunner(Runner):
    """The full-integer .tflite model (quarl.deploy.edge.tflite) under LiteRT's builtin kernels.

    `integer` is the integer policy it computes bit for bit in LiteRT's rounding ("ruy");
    `model` the .tflite bytes; `nbytes` the file's size.
    """

    def __init__(self, net: ActingNetwork, integer: IntegerPolicy) -> None:
        from quarl.deploy.edge.tflite import RUNTIME_ROUNDING, LiteRTPolicy, tflite_model

        self.net = net
        self.backend, self.precision = _backend("tflite", integer)
        self.threads, self.timings_ms = 1, {}
        self.integer = integer.with_rounding(RUNTIME_ROUNDING["litert"])
        self.model = tflite_model(integer)
        self.litert = LiteRTPolicy(self.model, self.integer)
        self.nbytes = len(self.model)

    def _run(self, obs: np.ndarray) -> np.ndarray:
        return self.litert.act(obs)
