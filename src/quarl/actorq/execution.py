"""The actors' policy, executed for real at `quant.actor_bits`.

Chosen by measurement (benchmarks/bench_actorq.py; batch 1, one thread): an int8 actor runs ONNX
Runtime's integer kernels (`DynamicQuantizeLinear` + `MatMulInteger`, the graph ONNX Runtime's
dynamic quantizer writes, built here directly from the published uint8 weights, so an actor never
exports or quantizes anything); an fp32 actor runs ONNX Runtime in float32 for small networks (4x
faster than eager torch there: per-call overhead dominates, and fp32 actors must not be handicapped
by it) and eager torch for large ones (where rebuilding a float32 session per pull costs more than
it saves; see FP32_ONNX_MAX_WEIGHTS); an fp16 actor runs torch with float16 weights (ONNX Runtime
has no float16 matrix kernels on x86 CPUs).

Loading a new version of the weights (`build`) creates a new session from the graph built once
per network shape, its weights handed over as external initializers (no protobuf of the weights
per pull): that is the actor's "load_state_dict" time. Converting the published weights to the execution precision, when
`actorq.comm_bits` differs from `quant.actor_bits`, is its "deserialize" time (`convert`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

import numpy as np
import torch

from quarl.actorq.params import Layer, dequantize, quantize_uint8
from quarl.deploy import onnx_io

# fp32 actors run ONNX Runtime up to this many weights and eager torch above: building a float32
# session costs ~230 ms at 8.4M weights (3x2048), more than it saves per step over torch (1.24 vs
# 1.54 ms), while at 256 units it costs ~3 ms and runs 4x faster than torch (0.011 vs 0.044 ms).
FP32_ONNX_MAX_WEIGHTS = 1_000_000
EXTERNAL_LOCATION = "actor-weights"  # the graph's initializers are handed to each session, not stored in it


class Executor(Protocol):
    """A policy network at some precision: a batch of float32 observations -> float32 outputs."""

    precision: str

    def __call__(self, obs: np.ndarray) -> np.ndarray: ...


def convert(layers: list[Layer], bits: int, number_format: str | None = None) -> list[Layer]:
    """The layers in the form an executor at `bits` takes: uint8 + scale for 8, float16 for 16,
    float32 for 32. Layers already in that form are returned as they are (no copy). With
    `number_format` (`quant.actor_format`), float32 weights rounded to that format (a block's axis:
    each output's inputs), executed in float32: the format simulated, as PTQ's fake quantization."""
    if number_format is not None:
        return [in_format(layer, number_format) for layer in layers]
    out = []
    for layer in layers:
        if bits == 8:
            if layer.scale is None:
                q, scale, zero_point = quantize_uint8(torch.from_numpy(dequantize(layer)))
                layer = Layer(q.numpy(), layer.b, float(scale), int(zero_point))
        else:
            dtype = np.float16 if bits == 16 else np.float32
            if layer.wt.dtype != dtype:
                layer = Layer(dequantize(layer).astype(dtype), layer.b)
        out.append(layer)
    return out


def in_format(layer: Layer, number_format: str) -> Layer:
    """`layer` with its weights rounded to `number_format` (`quarl.quantize.formats`), float32."""
    from quarl.quantize import formats

    weight = torch.from_numpy(np.ascontiguousarray(dequantize(layer).T))  # [out, in]: blocks along the inputs
    rounded = formats.get(number_format).fake_quantize(weight).T.contiguous().numpy()
    return Layer(rounded.astype(np.float32), layer.b.astype(np.float32))


def _tensors(layers: list[Layer]) -> dict[str, np.ndarray]:
    """The values of the graph's initializers for `layers` (views where the dtype already fits)."""
    tensors = {}
    for i, layer in enumerate(layers):
        tensors[f"w{i}"] = np.ascontiguousarray(layer.wt)
        tensors[f"b{i}"] = np.ascontiguousarray(layer.b, dtype=np.float32)
        if layer.scale is not None:
            tensors[f"ws{i}"] = np.array(layer.scale, np.float32)
            tensors[f"wz{i}"] = np.array(layer.zero_point, np.uint8)
    return tensors


@lru_cache(maxsize=8)
def _graph(shapes: tuple[tuple[int, int], ...], quantized: bool, squash: bool) -> bytes:
    """An ONNX graph computing an MLP of `shapes` (ReLU between, Tanh at the end if `squash`):
    float32 Gemm layers, or ONNX Runtime's dynamic int8 pattern for uint8 weights. Every
    initializer is declared external: its values come with each session (`OnnxExecutor`), so a
    new version of the weights is never serialized into a protobuf."""
    onnx_io.require("onnx", "int8 and fp32 ActorQ actors")
    from onnx import TensorProto, helper

    inits, nodes = [], []

    def external(name: str, dtype: int, dims: tuple[int, ...]) -> None:
        tensor = TensorProto(name=name, data_type=dtype, dims=dims)
        tensor.data_location = TensorProto.EXTERNAL
        tensor.external_data.add(key="location", value=EXTERNAL_LOCATION)
        inits.append(tensor)

    x = onnx_io.INPUT
    for i, (n_in, n_out) in enumerate(shapes):
        external(f"w{i}", TensorProto.UINT8 if quantized else TensorProto.FLOAT, (n_in, n_out))
        external(f"b{i}", TensorProto.FLOAT, (n_out,))
        y = f"y{i}"
        if not quantized:
            nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [y]))
        else:
            external(f"ws{i}", TensorProto.FLOAT, ())
            external(f"wz{i}", TensorProto.UINT8, ())
            nodes += [
                helper.make_node("DynamicQuantizeLinear", [x], [f"xq{i}", f"xs{i}", f"xz{i}"]),
                helper.make_node("MatMulInteger", [f"xq{i}", f"w{i}", f"xz{i}", f"wz{i}"], [f"acc{i}"]),
                helper.make_node("Cast", [f"acc{i}"], [f"accf{i}"], to=TensorProto.FLOAT),
                helper.make_node("Mul", [f"xs{i}", f"ws{i}"], [f"s{i}"]),
                helper.make_node("Mul", [f"accf{i}", f"s{i}"], [f"mm{i}"]),
                helper.make_node("Add", [f"mm{i}", f"b{i}"], [y]),
            ]
        if i < len(shapes) - 1:
            nodes.append(helper.make_node("Relu", [y], [f"h{i}"]))
            y = f"h{i}"
        x = y
    nodes.append(helper.make_node("Tanh" if squash else "Identity", [x], [onnx_io.OUTPUT]))
    graph = helper.make_graph(
        nodes,
        "actor",
        [helper.make_tensor_value_info(onnx_io.INPUT, TensorProto.FLOAT, ["batch", shapes[0][0]])],
        [helper.make_tensor_value_info(onnx_io.OUTPUT, TensorProto.FLOAT, ["batch", shapes[-1][1]])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


class OnnxExecutor:
    """ONNX Runtime, one thread: float32 Gemm layers or int8 (uint8 weights, activations quantized per call)."""

    def __init__(self, layers: list[Layer], squash: bool) -> None:
        quantized = layers[0].scale is not None
        self.precision = "int8" if quantized else "fp32"
        shapes = tuple((int(lay.wt.shape[0]), int(lay.wt.shape[1])) for lay in layers)
        self.session = onnx_io.session(_graph(shapes, quantized, squash), threads=1, initializers=_tensors(layers))

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.session.run(None, {onnx_io.INPUT: obs.astype(np.float32, copy=False)})[0]


class TorchExecutor:
    """Eager torch, one layer at a time. float32: `addmm` on the published `[in, out]` weights, no
    copy. float16: `linear` on weights copied to `[out, in]` at load, the only layout in which CPU
    half-precision matmuls are fast (measured at 2048x2048, batch 1: 0.75 ms vs 32 ms)."""

    def __init__(self, layers: list[Layer], squash: bool) -> None:
        self.dtype = torch.from_numpy(layers[0].wt[:0]).dtype
        self.precision = "fp16" if self.dtype == torch.float16 else "fp32"
        self.half = self.dtype == torch.float16
        self.layers = [
            (
                torch.from_numpy(lay.wt).t().contiguous() if self.half else torch.from_numpy(lay.wt),
                torch.from_numpy(lay.b).to(self.dtype),
            )
            for lay in layers
        ]
        self.squash = squash

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            x = torch.from_numpy(obs).to(self.dtype)
            for i, (w, b) in enumerate(self.layers):
                x = torch.nn.functional.linear(x, w, b) if self.half else torch.addmm(b, x, w)
                if i < len(self.layers) - 1:
                    x = torch.relu(x)
            if self.squash:
                x = torch.tanh(x)
            return x.float().numpy()


def build(layers: list[Layer], bits: int, squash: bool) -> Executor:
    """An executor at `bits` for layers already in its form (see `convert`)."""
    if bits == 8:
        return OnnxExecutor(layers, squash)
    if bits == 32 and sum(lay.wt.size for lay in layers) <= FP32_ONNX_MAX_WEIGHTS:
        return OnnxExecutor(layers, squash)
    return TorchExecutor(layers, squash)
