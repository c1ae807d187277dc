"""ONNX: export an acting network, quantize it to int8 with ONNX Runtime, open an inference session.

Export uses torch's ONNX exporter (`torch.export` based; needs `onnx` and `onnxscript`); int8 uses
ONNX Runtime's quantizer, chosen by measurement (benchmarks/bench_deploy.py):

- networks without convolutions: dynamic quantization (weights uint8 per tensor, activations uint8
  quantized per call): `MatMulInteger` kernels. Asymmetric uint8 weights are quarl's default
  `affine` 8-bit scheme, and U8U8 kernels cannot saturate on x86 CPUs without VNNI.
- networks with convolutions: static quantization in QDQ format with ranges calibrated on real
  observations (int8 activations, int8 per-channel weights), the layout ONNX Runtime recommends for
  CNNs. The outputs of the last weight layers stay float, so Q-values and logits are not rounded
  onto an 8-bit grid before the argmax.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import logging
import tempfile
import warnings
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Optional

import numpy as np
import torch
import torch.nn as nn

from quarl.errors import QuarlError

log = logging.getLogger(__name__)

INPUT, OUTPUT = "obs", "action"
CALIBRATION_BATCH = 32  # observations per calibration call
CALIBRATION_MAX = 1024  # observations used for calibration at most
PIP = {"onnxruntime": "onnxruntime", "onnx": "onnx", "onnxscript": "onnxscript"}
# (id of the network, example shape, dtype) -> (the network, kept alive so that its id stays its own; its export)
_shared_exports: ContextVar[Optional[dict[tuple, tuple[nn.Module, bytes]]]] = ContextVar("shared_exports", default=None)


def require(package: str, purpose: str) -> ModuleType:
    """Import `package`, or raise a QuarlError naming it and the pip command that installs it."""
    try:
        return importlib.import_module(package)
    except ImportError:
        name = PIP.get(package, package)
        raise QuarlError(
            f"{purpose} needs the Python package {name}, which is not installed: "
            f"pip install {name} (or pip install onnx onnxscript onnxruntime for every deploy backend)."
        ) from None


def available() -> bool:
    """Whether every package the ONNX backends need is importable."""
    return all(importlib.util.find_spec(p) is not None for p in PIP)


def _not_onnxruntime(record: logging.LogRecord) -> bool:
    return "onnxruntime" not in record.pathname


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the exporter's and quantizer's chatter for one call (their messages are about their
    own internals, not about the model). ONNX Runtime's quantizer logs through module-level
    `logging.info/warning`, i.e. on the root logger: a filter on the root logger drops those records
    only (records of other loggers reach the root handlers without passing it), and a NullHandler
    keeps those calls from installing a handler in a process that has none."""
    noisy = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "onnxscript", "onnx_ir", "onnxruntime")]
    levels = [lg.level for lg in noisy]
    root = logging.getLogger()
    guard = logging.NullHandler() if not root.handlers else None
    if guard is not None:
        root.addHandler(guard)
    root.addFilter(_not_onnxruntime)
    try:
        for lg in noisy:
            lg.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", UserWarning)
            yield
    finally:
        for lg, level in zip(noisy, levels):
            lg.setLevel(level)
        root.removeFilter(_not_onnxruntime)
        if guard is not None:
            root.removeHandler(guard)


@functools.cache
def _torchlib_registry() -> Any:
    """torch.onnx's table of ATen-to-ONNX functions at its default opset. `torch.onnx.export` builds it
    afresh on every call, parsing the source of about 500 onnxscript functions: 0.4 of a small
    policy's 0.7 CPU s of export (benchmarks/bench_onnx_export.py). It never changes, so it is built
    once a process and handed to the exporter that `torch.onnx.export` calls."""
    from torch.onnx import _constants
    from torch.onnx._internal.exporter import _registration

    return _registration.ONNXRegistry.from_torchlib(opset_version=_constants.ONNX_DEFAULT_OPSET)


@contextlib.contextmanager
def shared_exports() -> Iterator[None]:
    """Inside, `to_onnx` of a network object it exported already (the same example shape and dtype)
    returns that export's bytes: for a caller that builds several runners of one network it leaves
    unchanged meanwhile (`backend=auto`'s candidates)."""
    token = _shared_exports.set({})
    try:
        yield
    finally:
        _shared_exports.reset(token)


def to_onnx(net: nn.Module, example: np.ndarray) -> bytes:
    """`net` as a serialized ONNX model with input "obs" (any batch size) and output "action": what
    `torch.onnx.export(net, dynamo=True, dynamic_shapes=...)` writes, the same bytes, with the
    exporter's function table built once (`_torchlib_registry`)."""
    shared = _shared_exports.get()
    key = (id(net), example.shape[1:], example.dtype.str)
    if shared is not None and key in shared:
        return shared[key][1]
    require("onnx", "Exporting to ONNX")
    require("onnxscript", "Exporting to ONNX")
    from torch.onnx import _constants
    from torch.onnx._internal.exporter import _core

    x = torch.from_numpy(np.repeat(example[:1], 2, axis=0))  # batch 2: the batch axis stays dynamic
    dynamic = ({0: torch.export.Dim("batch")},)
    try:
        with _quiet(), torch.no_grad():
            program = _core.export(
                net.eval(),
                (x,),
                {},
                registry=_torchlib_registry(),
                dynamic_shapes=dynamic,
                input_names=[INPUT],
                output_names=[OUTPUT],
                verbose=False,
                optimize=True,
                opset_version=_constants.ONNX_DEFAULT_OPSET,
            )
            program._rename_dynamic_axes(dynamic)  # the batch axis is named "batch", not torch's symbol
    except Exception as exc:  # the exporter raises many types; name the cause in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise QuarlError(f"This policy network cannot be exported to ONNX ({type(exc).__name__}: {first}).") from None
    proto = program.model_proto
    _strip_annotations(proto)
    exported = proto.SerializeToString()
    if shared is not None:
        shared[key] = (net, exported)
    return exported


def _strip_annotations(proto) -> None:
    """Drop the exporter's per-node annotations (source stack traces, torch node names): they are
    most of a small model's file and name paths of the machine that exported it."""
    graph = proto.graph
    for node in graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    for value in (*graph.input, *graph.output, *graph.value_info):
        del value.metadata_props[:]
    for tensor in graph.initializer:
        del tensor.metadata_props[:]


class _Calibration:
    """ONNX Runtime calibration reader over a batch of observations."""

    def __init__(self, obs: np.ndarray) -> None:
        self.batches = iter([{INPUT: obs[i : i + CALIBRATION_BATCH]} for i in range(0, len(obs), CALIBRATION_BATCH)])

    def get_next(self) -> Optional[dict[str, np.ndarray]]:
        return next(self.batches, None)


def _input_overrides(
    onnx: Any, path: Path, ranges: list[tuple[float, int]]
) -> Optional[dict[str, list[dict[str, Any]]]]:
    """ONNX Runtime's TensorQuantOverrides giving the input of the i-th MatMul/Gemm the i-th (scale,
    uint8 zero point); None when the graph's weight layers do not pair up with `ranges`."""
    from onnxruntime.quantization import QuantType

    nodes = [n for n in onnx.load(str(path)).graph.node if n.op_type in ("Gemm", "MatMul")]
    if len(nodes) != len(ranges):
        return None
    return {
        n.input[0]: [
            {
                "quant_type": QuantType.QUInt8,
                "scale": np.array(scale, dtype=np.float32),
                "zero_point": np.array(zp, dtype=np.uint8),
            }
        ]
        for n, (scale, zp) in zip(nodes, ranges)
    }


def quantize_int8(
    model: bytes,
    calibration: Optional[np.ndarray],
    static: bool,
    input_ranges: Optional[list[tuple[float, int]]] = None,
) -> bytes:
    """The int8 version of an fp32 ONNX model: dynamic, or static (QDQ) calibrated on `calibration`;
    with `input_ranges` (an MLP's (scale, uint8 zero point) of every weight layer's input, in order),
    static with exactly those activation ranges (calibration then only for tensors they do not cover)."""
    onnx = require("onnx", "The onnx_int8 backend")
    require("onnxruntime", "The onnx_int8 backend")
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quant_pre_process,
        quantize_dynamic,
        quantize_static,
    )

    class Reader(_Calibration, CalibrationDataReader):
        pass

    with tempfile.TemporaryDirectory(prefix="quarl-int8-") as tmp, _quiet():
        src, pre, out = Path(tmp, "fp32.onnx"), Path(tmp, "pre.onnx"), Path(tmp, "int8.onnx")
        proto = onnx.load_model_from_string(model)
        # the exporter's shape annotations go stale when the quantizer rewrites Gemm as MatMul with
        # transposed weights; ONNX shape inference recomputes them
        del proto.graph.value_info[:]
        src.write_bytes(proto.SerializeToString())
        # ONNX shape inference and graph fusions, as ONNX Runtime advises (its symbolic shape
        # inference is for transformers and fails on ReduceLogSumExp)
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
        overrides = _input_overrides(onnx, pre, input_ranges) if input_ranges else None
        if input_ranges and overrides is None:
            log.warning(
                "The int8 graph's weight layers do not pair up with the policy's %d calibrated activation "
                "ranges: quantizing activations dynamically instead.",
                len(input_ranges),
            )

        def qdq(activations: Any, ops: list[str], **extra: Any) -> None:
            """Static QDQ quantization, int8 weights per channel, ranges from the calibration observations."""
            assert calibration is not None
            quantize_static(
                str(pre),
                str(out),
                Reader(calibration[:CALIBRATION_MAX]),
                quant_format=QuantFormat.QDQ,
                activation_type=activations,
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=ops,
                extra_options={"OpTypesToExcludeOutputQuantization": ["Gemm", "MatMul"], **extra},
            )

        if overrides is not None:  # the caller passes observations with input_ranges
            qdq(QuantType.QUInt8, ["Gemm", "MatMul"], TensorQuantOverrides=overrides)
        elif static:
            if calibration is None or len(calibration) == 0:
                raise QuarlError(
                    "Static int8 quantization of a convolutional policy needs calibration observations: "
                    "pass a batch of real observations (a few hundred from the environment)."
                )
            qdq(QuantType.QInt8, ["Conv", "Gemm", "MatMul", "Relu", "Reshape", "Flatten", "MaxPool", "AveragePool"])
        else:
            quantize_dynamic(
                str(pre), str(out), weight_type=QuantType.QUInt8, per_channel=False, op_types_to_quantize=["MatMul"]
            )
        return out.read_bytes()


def session(model: bytes, threads: int = 1, initializers: Optional[dict[str, np.ndarray]] = None):
    """An ONNX Runtime CPU session running `model` with `threads` intra-op threads (1: the latency
    setting), all graph optimisations on and only errors logged. `initializers`: the values of the
    model's external initializers, by name."""
    ort = require("onnxruntime", "The ONNX backends")
    options = ort.SessionOptions()
    given = initializers or {}
    values = [ort.OrtValue.ortvalue_from_numpy(v) for v in given.values()]
    if values:
        options.add_external_initializers(list(given), values)
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    created = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    created.initializer_values = values  # ONNX Runtime reads their memory for as long as the session lives
    return created


def weight_bytes(model: bytes) -> int:
    """Bytes of a serialized ONNX model's stored tensors (weights, scales, zero points, constants)."""
    onnx = require("onnx", "Reading an ONNX model")
    from onnx import numpy_helper

    proto = onnx.load_model_from_string(model)
    total = sum(numpy_helper.to_array(t).nbytes for t in proto.graph.initializer)
    for node in proto.graph.node:  # tensors folded into Constant nodes
        if node.op_type == "Constant":
            total += sum(
                numpy_helper.to_array(a.t).nbytes for a in node.attribute if a.type == onnx.AttributeProto.TENSOR
            )
    return total
