"""Execution backends for acting networks, behind one interface: `compile_network` -> `Runner`.

The backends are plugins, one module each in `quarl.backends`, listed by the registry
(`quarl.config.backend_registry`; the table: docs/execution.md). This module holds the runners they
build on (eager torch, ONNX Runtime, MatMulNBits) and `auto`, which weighs the low-precision ones.

`onnx_int8` runs an MLP statically with a PTQ policy's own calibrated 8-bit ranges. `auto` takes a
low-precision backend only where it is measured faster than fp32; else the faster fp32 backend.

`c` and `tflite` run the full-integer policy of quarl.deploy.edge (TFLite's int8 scheme: static int8
activations, int32 biases, fixed-point requantization), the policy a microcontroller or a LiteRT
device runs, bit for bit. Their activation ranges come from the record (quant.act_bits=8
quant.input_bits=8) or from `example_obs` when it is a batch of calibration states
(quarl.deploy.edge.calibration_states); `auto` never picks them (they need a compiler / the edge
extra, and calibration states). `c_16x8` and `tflite_16x8` keep every activation in int16: 256 times
finer than int8, for policies whose greedy action turns on small logit gaps (PPO CartPole: action
agreement with fp32 0.955 at int8, 0.998 at 16x8; benchmarks/bench_edge_agreement.py).

Chosen by measurement (benchmarks/bench_deploy.py, batch 1, one thread): ONNX Runtime int8 is the
fastest int8 path for every policy size (3x2048 MLP 3.6x over fp32 eager torch, 4096-512-1024 5.2x,
Nature CNN 5.4x on a 2-core x86 with AVX-512 VNNI), ahead of torch's `quantize_dynamic` (2.4x, 1.7x
and 1.1x, and 2x *slower* than fp32 at 3x64; `torch.ao.quantization` is also deprecated), so that
is not a backend. For small MLPs int8 loses to fp32 on ONNX Runtime, which is itself 5-7x faster
than eager torch there (per-call overhead dominates): `auto` measures and falls back, saying so.
fp16 and bf16 give no CPU speed at batch 1 (0.5x-1.1x); they exist to execute half-precision
policies for real and halve the bytes.

4-bit and 2-bit weights (`onnx_int4`, `onnx_int2`) execute the policy's own weights where quarl
quantized it to at most that many bits (any scheme with zero on the grid, per tensor or per
channel: stored exactly, block scales all equal), and round any other weights block-wise (ONNX
Runtime's RTN, blocks of 128), saying so; convolutions and layers with fewer than 16 inputs stay
fp32. Measured on a 2-core AMD EPYC with AVX2 only (no VNNI; its 32 MB L3 holds the 3x2048 MLP's
8.4 MB of int8 weights), ONNX Runtime 1.31, 3x2048 MLP at batch 1: int4 is 7.7x smaller than fp32;
next to int8 it runs at 0.8x on a quiet machine (load ~1.5) and 1.2x-2.9x while other work loads
the two cores (load 6-8: three bench_deploy runs), where fewer weight bytes win. int2 is 14x smaller,
1.15x-4.2x int8 and 1.5x-1.8x int4, so 2-bit is a backend too (its 2-bit blocks of 256 have no fast
kernel: blocks of 128). Below ~1000 units both are within noise of int8 and ONNX fp32.
`auto` considers them only where they execute the policy's own weights, or where their action
agreement meets `min_agreement`.

A Runner maps a batch of raw observations (numpy) to actions (numpy), exactly like the acting
network it was compiled from, up to the backend's arithmetic.
"""

from __future__ import annotations

import copy
import logging
from typing import Optional

import numpy as np
import torch
import torch.nn as nn
from stable_baselines3.common.base_class import BaseAlgorithm

from quarl.config import backend_registry
from quarl.deploy import nbits, onnx_io
from quarl.deploy.acting import ActingNetwork, ActivationFakeQuant, BoxAction, ObsTransform, acting_network
from quarl.deploy.latency import quick_median_ms
from quarl.deploy.runner import Runner
from quarl.errors import QuarlError

log = logging.getLogger(__name__)

BACKENDS = {b.name: b.precision for b in backend_registry.registry().values()}  # backend -> precision
CHOICES = backend_registry.choices()
LOW = tuple(b.name for b in backend_registry.registry().values() if b.auto)  # what auto weighs against fp32
AGREEMENT_TOLERANCE = (
    0.05  # continuous actions agree within this fraction of the action range (as quarl.evaluate.fidelity)
)
AGREEMENT_MIN_OBS = 64  # observations min_agreement needs
INT8_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
CONV_LAYERS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
# auto runs int8 only when it takes at most this fraction of the fastest fp32 backend's time: closer
# than that is within run-to-run noise, and fp32 is the exact policy.
AUTO_MARGIN = 0.9


class TorchRunner(Runner):
    """Eager PyTorch: fp32, or the weight layers cast to `cast`, a torch dtype's name (float16, bfloat16)."""

    def __init__(self, net: ActingNetwork, backend: str, cast: Optional[str] = None) -> None:
        self.net, self.backend, self.precision = net, backend, backend_registry.get(backend).precision
        self.threads, self.timings_ms = torch.get_num_threads(), {}
        self.module: nn.Module = net
        if cast is not None:
            self.module = copy.deepcopy(net)
            self.module.body = _Cast(self.module.body, getattr(torch, cast))
        self.module.eval()
        self.nbytes = sum(t.numel() * t.element_size() for t in (*self.module.parameters(), *self.module.buffers()))

    def _run(self, obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return self.module(torch.from_numpy(obs)).numpy()


def net_body(module: nn.Module) -> nn.Module:
    """An acting network's body (its layers between the observation transform and the action head)."""
    body = module.body
    assert isinstance(body, nn.Module)
    return body


class Fp8Runner(TorchRunner):
    """PyTorch with the body's Linear layers as FP8 E4M3 matrix products (`quarl.deploy.fp8`)."""

    def __init__(self, net: ActingNetwork, backend: str) -> None:
        from quarl.deploy.fp8 import fp8_layers, fp8_weight_bytes

        super().__init__(copy.deepcopy(net), backend)
        body = fp8_layers(net_body(self.module))
        rest = sum(t.numel() * t.element_size() for t in self.module.parameters())  # what stays float
        self.nbytes = fp8_weight_bytes(body) + rest


class OnnxRunner(Runner):
    """ONNX Runtime on the CPU: fp32, int8, or 4-/2-bit weights (NbitsRunner)."""

    def __init__(self, net: ActingNetwork, backend: str, model: bytes, threads: int) -> None:
        self.net, self.backend, self.precision = net, backend, backend_registry.get(backend).precision
        self.threads, self.timings_ms = threads, {}
        self._model = model
        self.session = onnx_io.session(model, threads)
        self.nbytes = onnx_io.weight_bytes(model)

    @property
    def onnx_model(self) -> bytes:
        return self._model

    def _run(self, obs: np.ndarray) -> np.ndarray:
        return self.session.run([onnx_io.OUTPUT], {onnx_io.INPUT: obs})[0]


class NbitsRunner(OnnxRunner):
    """ONNX Runtime with 4-bit or 2-bit weights (MatMulNBits); `report` says, per weight layer,
    whether it runs the network's own weights (exact), weights rounded block-wise, or float32."""

    def __init__(self, net: ActingNetwork, backend: str, model: bytes, threads: int, report: nbits.Report) -> None:
        super().__init__(net, backend, model, threads)
        self.report = report

    @property
    def exact(self) -> bool:
        """Whether every layer it runs in low precision holds the network's own weights."""
        return not self.report.rtn


class _Cast(nn.Module):
    """Runs `body` in `dtype`: inputs cast in, outputs cast back to float32."""

    def __init__(self, body: nn.Module, dtype: torch.dtype) -> None:
        super().__init__()
        self.body, self.dtype = body.to(dtype), dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x.to(self.dtype)).float()


def check_int8(net: ActingNetwork, backend: str = "onnx_int8") -> None:
    """Raise a QuarlError naming the first layer with weights an int8 backend cannot quantize."""
    for name, module in net.body.named_modules():
        own_params = any(True for _ in module.parameters(recurse=False))
        if own_params and not isinstance(module, INT8_LAYERS):
            raise QuarlError(
                f"backend={backend} cannot quantize layer body.{name} ({type(module).__name__}): int8 backends "
                "quantize Linear and Conv layers; run this policy with backend=onnx or torch (fp32), "
                "torch_fp16 or torch_bf16."
            )


def without_fake_quant(net: ActingNetwork) -> ActingNetwork:
    """A copy of `net` without QAT activation fake quants: int8 backends quantize activations themselves."""
    if not any(isinstance(m, ActivationFakeQuant) for m in net.modules()):
        return net
    net = copy.deepcopy(net)
    for name, module in list(net.named_modules()):
        if isinstance(module, ActivationFakeQuant):
            parent_name, _, child = name.rpartition(".")
            setattr(net.get_submodule(parent_name) if parent_name else net, child, nn.Identity())
    return net


def has_conv(net: ActingNetwork) -> bool:
    """Whether the network has convolutions (int8: static quantization with calibration)."""
    return any(isinstance(m, CONV_LAYERS) for m in net.body.modules())


def _example(net: ActingNetwork, example_obs: Optional[np.ndarray]) -> np.ndarray:
    if example_obs is None:
        return np.zeros((1, *net.obs_shape), dtype=net.obs_dtype)
    return net.batch(example_obs)


def _build(net: ActingNetwork, backend: str, example: np.ndarray, calibrated: bool, threads: int) -> Runner:
    """The runner of the registered `backend`, named as registered: a plugin that reuses another's
    runner (a `c_ruy` built on `CRunner`) is logged and recorded under its own name."""
    runner = backend_registry.get(backend).build(net, example, calibrated, threads)
    runner.backend = backend
    return runner


def calibrated_int8_ranges(net: ActingNetwork) -> Optional[list[tuple[float, int]]]:
    """(scale, zero point) of every weight layer's input where a PTQ policy calibrated all of them at
    8 bits (quant.act_bits=8 quant.input_bits=8: `quarl.quantize.calibration`), in layer order; else None.
    onnx_int8 then runs static int8 with exactly these ranges instead of dynamic activations."""
    from quarl.quantize.calibration import CalibratedFakeQuant  # it builds on this package

    quants = [m for m in net.body.modules() if isinstance(m, CalibratedFakeQuant)]
    layers = [m for m in net.body.modules() if isinstance(m, INT8_LAYERS)]
    if not quants or len(quants) != len(layers) or any(q.bits != 8 for q in quants):
        return None
    return [(float(q.scale.item()), int(q.zero_point)) for q in quants]


def action_agreement(net: ActingNetwork, runner: Runner, obs: np.ndarray) -> float:
    """Fraction of `obs` on which `runner` acts as the float32 network: the same discrete action, or
    a continuous action within AGREEMENT_TOLERANCE of the action range in every dimension."""
    expected, got = net.act(obs), runner(obs)
    if net.action_kind == "discrete":
        return float(np.mean(expected == got))
    head = net.head
    span = head.span.numpy().reshape(-1) if isinstance(head, BoxAction) else np.full(1, 2.0, np.float32)
    diff = np.abs(got.reshape(len(obs), -1) - expected.reshape(len(obs), -1)) / span
    return float(np.mean(np.all(diff <= AGREEMENT_TOLERANCE, axis=1)))


def compile_network(
    net: ActingNetwork,
    backend: str = "auto",
    example_obs: Optional[np.ndarray] = None,
    threads: int = 1,
    min_agreement: Optional[float] = None,
) -> Runner:
    """Compile an acting network for a backend.

    Args:
        net: from `acting_network(model, obs_transform)`.
        backend: one of CHOICES. "auto" measures the fp32 backends (`torch`, `onnx`) and the
            low-precision ones it may run (`onnx_int8`; `onnx_int4` / `onnx_int2` where they execute
            the network's own weights, i.e. a policy quantized to at most 4 / 2 bits, or where they
            meet `min_agreement`) at batch 1 on one thread, and runs the fastest low-precision one
            when it takes at most AUTO_MARGIN of the fastest fp32 backend's time; otherwise that
            fp32 backend, logging a warning that says why.
        example_obs: a batch of real observations. Its first row traces the network; for int8 on
            convolutional policies all of it (up to 1024) calibrates the activation ranges, so pass a
            few hundred from the environment. None: zeros (not enough for int8 CNNs). For `c` and
            `tflite`, the calibration states (`quarl.deploy.edge.calibration_states`) every activation
            range the record does not carry is observed on.
        threads: ONNX Runtime intra-op threads (1 is the latency setting).
        min_agreement: auto only: the accuracy bound, in (0, 1]. A low-precision backend is a
            candidate only if its actions agree with the float32 network's on at least this fraction
            of `example_obs` (at least AGREEMENT_MIN_OBS of them; see `action_agreement`), and then
            onnx_int4 / onnx_int2 may also round weights that are not on their grid. None: no
            measured bound, and the 4-/2-bit backends only where they run the network's own weights.

    Raises:
        QuarlError: unknown backend; its Python package missing (naming the pip command); a layer
            the int8 backend cannot quantize; a CNN without calibration observations; no layer a
            4-/2-bit backend can run; a bad min_agreement; a network the ONNX exporter cannot export.
    """
    if not isinstance(net, ActingNetwork):
        raise TypeError(
            f"compile_network takes an ActingNetwork (from acting_network(model)), not {type(net).__name__}"
        )
    if backend not in backend_registry.choices():
        raise QuarlError(f"backend={backend} is not known: choose one of {', '.join(backend_registry.choices())}.")
    if min_agreement is not None:
        _check_bound(backend, min_agreement, example_obs)
    example = _example(net, example_obs)
    if backend == "auto":
        return _auto(net, example, example_obs is not None, threads, min_agreement)
    return _build(net, backend, example, example_obs is not None, threads)


def compile_policy(
    model: BaseAlgorithm,
    backend: str = "auto",
    example_obs: Optional[np.ndarray] = None,
    obs_transform: ObsTransform = None,
    threads: int = 1,
    min_agreement: Optional[float] = None,
) -> Runner:
    """`compile_network(acting_network(model, obs_transform), backend, example_obs, threads, min_agreement)`."""
    return compile_network(acting_network(model, obs_transform), backend, example_obs, threads, min_agreement)


def _check_bound(backend: str, min_agreement: float, example_obs: Optional[np.ndarray]) -> None:
    if backend != "auto":
        raise QuarlError(
            f"min_agreement={min_agreement} bounds backend=auto's choice: use backend=auto, or leave it unset."
        )
    if not 0 < min_agreement <= 1:
        raise QuarlError(
            f"min_agreement={min_agreement} is out of range: use a fraction in (0, 1], e.g. 0.99, or leave it unset."
        )
    if example_obs is None or np.ndim(example_obs) < 2 or len(example_obs) < AGREEMENT_MIN_OBS:
        raise QuarlError(
            f"min_agreement needs example_obs, a batch of at least {AGREEMENT_MIN_OBS} real observations to measure "
            "action agreement on."
        )


def _eligible(net: ActingNetwork, runner: Runner, example: np.ndarray, min_agreement: Optional[float]) -> Optional[str]:
    """Why auto may not run `runner` (None: it may)."""
    if min_agreement is not None:
        agreement = action_agreement(net, runner, example)
        if agreement < min_agreement:
            return f"its action agreement {agreement:.3f} is below min_agreement={min_agreement}"
        return None
    if isinstance(runner, NbitsRunner) and not runner.exact:
        bits = backend_registry.get(runner.backend).max_bits
        return (
            f"its {bits}-bit weights would be rounded from the policy's, which are not on a {bits}-bit grid "
            f"(quantize to quant.bits<={bits}, or bound it with min_agreement)"
        )
    return None


def _auto(
    net: ActingNetwork, example: np.ndarray, calibrated: bool, threads: int, min_agreement: Optional[float]
) -> Runner:
    runner: Runner
    if not onnx_io.available():
        runner = TorchRunner(net, "torch")
        runner.reason = (
            "backend=auto: int8 needs ONNX Runtime, which is not installed "
            "(pip install onnx onnxscript onnxruntime); running fp32 on torch."
        )
        log.warning(runner.reason)
        return runner
    with onnx_io.shared_exports():  # the candidates but int8 run the same network: exported once
        candidates: dict[str, Runner] = {
            "torch": TorchRunner(net, "torch"),
            "onnx": _build(net, "onnx", example, calibrated, threads),
        }
        problems: dict[str, str] = {}
        quiet = logging.getLogger(__name__).level
        log.setLevel(max(quiet, logging.ERROR))  # a candidate's own notes are not auto's choice
        try:
            for backend in LOW:
                try:
                    runner = _build(net, backend, example, calibrated, threads)
                except QuarlError as exc:  # a layer it cannot run, or a CNN without calibration data
                    problems[backend] = f"{backend} is not possible ({str(exc).rstrip('.')})"
                    continue
                why = _eligible(net, runner, example, min_agreement)
                if why is None:
                    candidates[backend] = runner
                else:
                    problems[backend] = f"{backend} is not run: {why}"
        finally:
            log.setLevel(quiet)
    timings = quick_median_ms(candidates, example[:1])
    fp32 = min(("torch", "onnx"), key=timings.__getitem__)
    shown = ", ".join(f"{b} {t:.4f} ms" for b, t in timings.items())
    low = [b for b in LOW if b in timings]
    fastest = min(low, key=timings.__getitem__) if low else None
    if fastest is not None and timings[fastest] <= AUTO_MARGIN * timings[fp32]:
        chosen = candidates[fastest]
        chosen.reason = (
            f"backend=auto: running {chosen.precision} on {fastest}, {timings[fp32] / timings[fastest]:.2f}x "
            f"faster than fp32 {fp32} ({shown}, batch 1)" + "".join(f"; {why}" for why in problems.values()) + "."
        )
        log.info(chosen.reason)
    else:
        chosen = candidates[fp32]
        whys = list(problems.values())
        whys += [
            f"{b} ({timings[b]:.4f} ms) is not faster than fp32 ({fp32}, {timings[fp32]:.4f} ms) for this network "
            f"at batch 1 (needs <= {AUTO_MARGIN:.0%} of the fp32 time)"
            for b in low
        ]
        chosen.reason = f"backend=auto: {'; '.join(whys)}; falling back to fp32 on {fp32} ({shown})."
        log.warning(chosen.reason)
    chosen.timings_ms = timings
    return chosen
