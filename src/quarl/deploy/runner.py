"""What every execution backend compiles a policy into: a `Runner` that acts on raw observations."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Optional

import numpy as np

from quarl.deploy.acting import ActingNetwork
from quarl.errors import QuarlError


class Runner(ABC):
    """A compiled policy: `runner(obs)` -> actions for a batch of raw observations.

    Attributes:
        backend: the registered backend that runs it (a key of BACKENDS, as compile_network named it).
        precision: "fp32", "int8", "int4", "int2", "fp16" or "bf16".
        nbytes: bytes of the stored tensors it computes with (weights as stored by the backend:
            int8 weights 1 byte each plus their scales and zero points; 4-/2-bit weights packed two
            / four to a byte plus a float32 scale and a packed zero point per block; layers left in
            fp32, biases and normalisation constants included).
        threads: intra-op threads (ONNX Runtime runners; torch runners use torch's setting).
        net: the float32 acting network it was compiled from (shapes, dtypes, action kind).
        reason: why this backend runs it (set by backend="auto").
        timings_ms: median ms per batch-1 call of each backend "auto" measured ({} otherwise).
    """

    backend: str
    precision: str
    nbytes: int
    threads: int
    net: ActingNetwork
    reason: str = ""
    timings_ms: dict[str, float]

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Actions (int64 for discrete, float32 for continuous) for a batch of observations
        (or one observation, given a batch axis)."""
        return self._run(self.net.batch(obs))

    @abstractmethod
    def _run(self, obs: np.ndarray) -> np.ndarray: ...

    def predict(
        self, observation: np.ndarray, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, None]:
        """SB3's `predict` signature, so a runner can stand in for the model in
        `quarl.evaluate.episodes.evaluate` (pass obs_transform=None there: the runner normalises itself)."""
        if not deterministic:
            raise QuarlError("A compiled policy acts greedily: evaluate it with eval.deterministic=true.")
        single = np.shape(observation) == self.net.obs_shape
        actions = self(observation)
        return (actions[0] if single else actions), None

    @property
    def onnx_model(self) -> Optional[bytes]:
        """The serialized ONNX model this runner executes (None for torch runners)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(backend={self.backend}, precision={self.precision}, nbytes={self.nbytes})"
