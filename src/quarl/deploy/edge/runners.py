"""The edge targets as quarl execution backends (`quarl.deploy.backends`): `c` runs the compiled C
policy through ctypes, `tflite` the .tflite model under LiteRT, one observation per call."""

from __future__ import annotations

import numpy as np

from quarl.deploy.acting import ActingNetwork
from quarl.deploy.edge.convert import integer_policy
from quarl.deploy.edge.integer import MIN_CALIBRATION_OBS, IntegerPolicy
from quarl.deploy.runner import Runner


def edge_policy(net: ActingNetwork, example: np.ndarray, calibrated: bool, rounding: str) -> IntegerPolicy:
    """The integer policy of `net`: ranges from the record (PTQ act_bits/input_bits, QAT), the rest
    observed on `example` where it is a batch of calibration states (at least MIN_CALIBRATION_OBS)."""
    states = example if calibrated and len(example) >= MIN_CALIBRATION_OBS else None
    return integer_policy(net, states, rounding=rounding)


class CRunner(Runner):
    """The C policy (quarl.deploy.edge.cgen) compiled by the host compiler, called through ctypes.

    `integer` is the integer policy it computes bit for bit; `nbytes` the bytes of its constant arrays.
    """

    def __init__(self, net: ActingNetwork, integer: IntegerPolicy) -> None:
        from quarl.deploy.edge.cgen import data_bytes
        from quarl.deploy.edge.toolchain import CPolicy

        self.net, self.backend, self.precision = net, "c", f"int{integer.weight_bits}"
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

        self.net, self.backend, self.precision = net, "tflite", "int8"
        self.threads, self.timings_ms = 1, {}
        self.integer = integer.with_rounding(RUNTIME_ROUNDING["litert"])
        self.model = tflite_model(integer)
        self.litert = LiteRTPolicy(self.model, self.integer)
        self.nbytes = len(self.model)

    def _run(self, obs: np.ndarray) -> np.ndarray:
        return self.litert.act(obs)
