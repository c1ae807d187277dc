"""The integer policy as a full-integer LiteRT (.tflite) model, and the two interpreters that run it.

`tflite_model(policy)` writes the reference (`quarl.deploy.edge.integer.IntegerPolicy`) op for op in
LiteRT's own flatbuffer schema (`ai_edge_litert.schema_py_generated`, the schema every TFLite
converter writes), so every scale, zero point, weight and bias in the file is the reference's:

    obs (float32 [1, n]) -> [SUB mean, DIV std, MAXIMUM -clip, MINIMUM clip] -> SUB center -> DIV step
      -> MAXIMUM, MINIMUM (saturate to the input's codes: extreme observations as the reference)
      -> QUANTIZE (int8, scale 1) -> FULLY_CONNECTED (int8 per-channel weights, int32 bias, fused
      RELU where the layer has one) [-> TANH (out 1/128)] -> ... -> ARG_MAX (discrete: int32 [1])
      or DEQUANTIZE -> MAXIMUM low, MINIMUM high (clip) | ADD 1, MUL 0.5, MUL span, ADD low (squash)

With int16 activations (TFLite's 16x8 scheme) the same ops carry int16 tensors (zero point 0), int64
biases and int16 TANH (out 1/32768); a discrete head dequantizes before ARG_MAX, which takes no int16.

Why quarl writes the file itself rather than through a converter: no TFLite converter installs next to
quarl's pinned packages (`litert-torch` 0.10 and `litert-converter` 0.5 pull `xdsl`, which wants
typing-extensions < 4.13; onnx2tf pins numpy 1.26 and TensorFlow 2.19; `tensorflow-cpu` 2.21 wants
h5py < 3.15), and a converter calibrates and rounds with its own rules, which would then have to be
overwritten to equal the reference bit for bit. The ops above are plain TFLite builtins whose int8
arithmetic is the reference's (checked: `LiteRTPolicy` and `MicroPolicy` act exactly as
`IntegerPolicy.act`).

`LiteRTPolicy` runs the file with `ai-edge-litert` (TFLite's builtin kernels; `delegates=True` adds
the default XNNPACK delegate), `MicroPolicy` with TFLite Micro's Python interpreter (`tflite-micro`),
which also reports the tensor arena a microcontroller needs. Both are in the `edge` extra:
`pip install 'quarl[edge]'`.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any, Callable, Optional

import numpy as np

from quarl.deploy.edge.integer import IntegerPolicy
from quarl.errors import QuarlError

EXTRA = "pip install 'quarl[edge]' (ai-edge-litert and tflite-micro)"
INPUT, OUTPUT = "obs", "action"
METADATA = "quarl"


def require(package: str, what: str) -> Any:
    """Import `package` or raise one sentence naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(package)
    except ImportError:
        raise QuarlError(f"{what} needs {package.split('.')[0]}, which is not installed: {EXTRA}.") from None


def _schema() -> Any:
    return require("ai_edge_litert.schema_py_generated", "Writing a LiteRT model")


class _Graph:
    """A one-subgraph LiteRT model being written: tensors, constant buffers and operators."""

    def __init__(self, schema: Any) -> None:
        self.s = schema
        self.buffers = [schema.BufferT()]  # buffer 0: the empty sentinel every tensor without data uses
        self.tensors: list[Any] = []
        self.operators: list[Any] = []
        self.codes: dict[int, tuple[int, int]] = {}  # builtin code -> (index, version)

    def _quant(self, scale: Any, zero_point: Any, axis: int = 0) -> Any:
        q = self.s.QuantizationParametersT()
        q.scale = [float(v) for v in np.atleast_1d(scale)]
        q.zeroPoint = [int(v) for v in np.atleast_1d(zero_point)]
        q.quantizedDimension = axis
        return q

    def tensor(
        self,
        name: str,
        shape: list[int],
        dtype: int,
        quant: Optional[tuple[Any, Any]] = None,
        data: Optional[np.ndarray] = None,
        signature: Optional[list[int]] = None,
    ) -> int:
        t = self.s.TensorT()
        t.name = name.encode()
        t.shape = list(shape)
        if signature is not None:
            t.shapeSignature = list(signature)
        t.type = dtype
        t.buffer = 0
        if data is not None:
            buffer = self.s.BufferT()
            buffer.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.uint8)
            self.buffers.append(buffer)
            t.buffer = len(self.buffers) - 1
        if quant is not None:
            t.quantization = self._quant(*quant)
        self.tensors.append(t)
        return len(self.tensors) - 1

    def const(self, name: str, values: np.ndarray, dtype: int, quant: Optional[tuple[Any, Any]] = None) -> int:
        return self.tensor(name, list(np.shape(values)), dtype, quant, data=values)

    def op(
        self,
        code: int,
        inputs: list[int],
        outputs: list[int],
        version: int = 1,
        options: Optional[tuple[int, Any]] = None,
    ) -> None:
        if code not in self.codes:
            self.codes[code] = (len(self.codes), version)
        else:
            index, known = self.codes[code]
            self.codes[code] = (index, max(known, version))
        o = self.s.OperatorT()
        o.opcodeIndex = self.codes[code][0]
        o.inputs, o.outputs = list(inputs), list(outputs)
        if options is not None:
            o.builtinOptionsType, o.builtinOptions = options
        self.operators.append(o)

    def finish(self, inputs: list[int], outputs: list[int], description: str, metadata: dict[str, Any]) -> bytes:
        import flatbuffers

        s = self.s
        model = s.ModelT()
        model.version = 3
        model.description = description.encode()
        codes = []
        for code, (_, version) in sorted(self.codes.items(), key=lambda kv: kv[1][0]):
            c = s.OperatorCodeT()
            c.builtinCode = code
            c.deprecatedBuiltinCode = min(code, 127)
            c.version = version
            codes.append(c)
        model.operatorCodes = codes
        graph = s.SubGraphT()
        graph.tensors, graph.operators = self.tensors, self.operators
        graph.inputs, graph.outputs = inputs, outputs
        graph.name = b"main"
        model.subgraphs = [graph]
        meta_buffer = s.BufferT()
        meta_buffer.data = np.frombuffer(json.dumps(metadata, sort_keys=True).encode(), dtype=np.uint8)
        self.buffers.append(meta_buffer)
        entry = s.MetadataT()
        entry.name, entry.buffer = METADATA.encode(), len(self.buffers) - 1
        model.metadata = [entry]
        model.buffers = self.buffers
        signature = s.SignatureDefT()
        signature.signatureKey = b"serving_default"
        signature.subgraphIndex = 0
        signature.inputs = [_tensor_map(s, INPUT, inputs[0])]
        signature.outputs = [_tensor_map(s, OUTPUT, outputs[0])]
        model.signatureDefs = [signature]
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())


def _tensor_map(schema: Any, name: str, index: int) -> Any:
    m = schema.TensorMapT()
    m.name, m.tensorIndex = name.encode(), index
    return m


def tflite_model(policy: IntegerPolicy, metadata: Optional[dict[str, Any]] = None) -> bytes:
    """The full-integer LiteRT model of `policy` (see the module doc), as the bytes of a .tflite file.

    `metadata` (JSON-able) is stored in the file's "quarl" metadata with the policy's own shapes.
    """
    s = _schema()
    op, tt = s.BuiltinOperator, s.TensorType
    g = _Graph(s)
    n = policy.obs_dim
    x = g.tensor(INPUT, [1, n], tt.FLOAT32, signature=[-1, n])
    first = x

    def binary(code: int, a: int, const: np.ndarray, name: str, options: Optional[tuple[int, Any]] = None) -> int:
        c = g.const(f"{name}/const", np.asarray(const, dtype=np.float32), tt.FLOAT32)
        out = g.tensor(name, [1, n], tt.FLOAT32, signature=[-1, n])
        g.op(code, [a, c], [out], 1, options)
        return out

    if policy.mean is not None and policy.std is not None and policy.clip is not None:
        x = binary(op.SUB, x, policy.mean, "normalize/sub_mean", (s.BuiltinOptions.SubOptions, s.SubOptionsT()))
        x = binary(op.DIV, x, policy.std, "normalize/div_std", (s.BuiltinOptions.DivOptions, s.DivOptionsT()))
        clip = np.float32(policy.clip)
        x = binary(op.MAXIMUM, x, np.array([-clip]), "normalize/clip_low")
        x = binary(op.MINIMUM, x, np.array([clip]), "normalize/clip_high")
    x = binary(op.SUB, x, policy.center, "input/sub_center", (s.BuiltinOptions.SubOptions, s.SubOptionsT()))
    x = binary(op.DIV, x, policy.step, "input/div_step", (s.BuiltinOptions.DivOptions, s.DivOptionsT()))
    # saturate to the input's codes before QUANTIZE, whose float-to-int conversion of a value beyond
    # int32 (a huge or infinite observation) is undefined in C++ (x86: the lowest int): every runtime
    # then does what the reference and the C policy do (NaN: MAXIMUM keeps the lower bound)
    codes = np.array([policy.input.qmin, policy.input.qmax], np.float32) - np.float32(policy.input.zero_point)
    x = binary(op.MAXIMUM, x, codes[:1], "input/saturate_low")
    x = binary(op.MINIMUM, x, codes[1:], "input/saturate_high")
    act_type, bias_type, bias_dtype = (
        (tt.INT8, tt.INT32, "<i4") if policy.activation_bits == 8 else (tt.INT16, tt.INT64, "<i8")
    )
    kind = f"int{policy.activation_bits}"
    q = g.tensor(f"input/{kind}", [1, n], act_type, (policy.input.scale, policy.input.zero_point), signature=[-1, n])
    g.op(op.QUANTIZE, [x], [q], 2)
    for layer in policy.layers:
        rows, cols = layer.weight.shape
        if layer.weight_bits != 8:
            raise QuarlError(
                f"LiteRT models hold 8-bit weights here, not {layer.weight_bits}-bit: export the C policy for "
                "packed 4-/2-bit weights, or build the integer policy with weight_bits=8."
            )
        w = g.const(
            f"{layer.name}/weights",
            layer.weight.astype(np.int8),
            tt.INT8,
            (layer.weight_scale, np.zeros(rows, dtype=np.int64)),
        )
        bias_scale = (np.float32(layer.input.scale) * layer.weight_scale).astype(np.float32)
        bias_quant = (bias_scale, np.zeros(rows, np.int64))
        b = g.const(f"{layer.name}/bias", layer.bias.astype(bias_dtype), bias_type, bias_quant)
        out = g.tensor(f"{layer.name}/out", [1, rows], act_type, (layer.output.scale, layer.output.zero_point))
        g.tensors[out].shapeSignature = [-1, rows]
        options = s.FullyConnectedOptionsT()
        options.fusedActivationFunction = (
            s.ActivationFunctionType.RELU if layer.activation == "relu" else s.ActivationFunctionType.NONE
        )
        g.op(op.FULLY_CONNECTED, [q, w, b], [out], 12, (s.BuiltinOptions.FullyConnectedOptions, options))
        q = out
        if layer.activation == "tanh":
            t = g.tensor(f"{layer.name}/tanh", [1, rows], act_type, (layer.out_quant.scale, layer.out_quant.zero_point))
            g.tensors[t].shapeSignature = [-1, rows]
            g.op(op.TANH, [q], [t], 2 if policy.activation_bits == 8 else 3)
            q = t
    k = policy.n_outputs
    if policy.action_kind == "discrete":
        if policy.activation_bits == 16:  # exact: distinct int16 codes stay distinct in float32
            logits = g.tensor("head/dequantize", [1, k], tt.FLOAT32, signature=[-1, k])
            g.op(op.DEQUANTIZE, [q], [logits], 2)
            q = logits
        axis = g.const("argmax/axis", np.array([1], dtype="<i4"), tt.INT32)
        action = g.tensor(OUTPUT, [1], tt.INT32, signature=[-1])
        options = s.ArgMaxOptionsT()
        options.outputType = tt.INT32
        g.op(op.ARG_MAX, [q, axis], [action], 2, (s.BuiltinOptions.ArgMaxOptions, options))
    else:
        y = g.tensor("head/dequantize", [1, k], tt.FLOAT32, signature=[-1, k])
        g.op(op.DEQUANTIZE, [q], [y], 2)
        assert policy.low is not None and policy.high is not None
        low, high = policy.low.astype(np.float32), policy.high.astype(np.float32)

        def head(code: int, a: int, const: np.ndarray, name: str, options: Optional[tuple[int, Any]] = None) -> int:
            c = g.const(f"{name}/const", np.asarray(const, dtype=np.float32), tt.FLOAT32)
            out = g.tensor(name, [1, k], tt.FLOAT32, signature=[-1, k])
            g.op(code, [a, c], [out], 1, options)
            return out

        if policy.squash:  # SB3's unscale_action: low + (0.5 * (a + 1) * (high - low))
            span = (high - low).astype(np.float32)
            y = head(op.ADD, y, np.array([1.0]), "head/add_one", (s.BuiltinOptions.AddOptions, s.AddOptionsT()))
            y = head(op.MUL, y, np.array([0.5]), "head/mul_half", (s.BuiltinOptions.MulOptions, s.MulOptionsT()))
            y = head(op.MUL, y, span, "head/mul_span", (s.BuiltinOptions.MulOptions, s.MulOptionsT()))
            y = head(op.ADD, y, low, "head/add_low", (s.BuiltinOptions.AddOptions, s.AddOptionsT()))
        else:  # SB3 clips the mean to the bounds
            y = head(op.MAXIMUM, y, low, "head/clip_low")
            y = head(op.MINIMUM, y, high, "head/clip_high")
        g.tensors[y].name = OUTPUT.encode()
        action = y
    meta = {
        "algo": policy.algo,
        "obs_shape": list(policy.obs_shape),
        "action_kind": policy.action_kind,
        "action_shape": list(policy.action_shape),
        "ranges": policy.ranges,
        **(metadata or {}),
    }
    description = (
        f"quarl full-integer {policy.algo or 'SB3'} policy: input '{INPUT}' = float32 raw observations "
        f"[1, {n}]; output '{OUTPUT}' = greedy {policy.action_kind} actions."
    )
    return g.finish([first], [action], description, meta)


def read_metadata(model: bytes) -> dict[str, Any]:
    """The "quarl" metadata of a .tflite file written by `tflite_model`."""
    s = _schema()
    m = s.Model.GetRootAs(model, 0)
    for i in range(m.MetadataLength()):
        entry = m.Metadata(i)
        if entry.Name() == METADATA.encode():
            return dict(json.loads(m.Buffers(entry.Buffer()).DataAsNumpy().tobytes()))
    return {}


def _shape_actions(out: np.ndarray, policy: IntegerPolicy, n: int) -> np.ndarray:
    if policy.action_kind == "discrete":
        return np.asarray(out).reshape(n).astype(np.int64)
    return np.asarray(out, dtype=np.float32).reshape((n, *policy.action_shape))


#: the requantization rounding each runtime's int8 kernels use (`fixedpoint.ROUNDINGS`), measured:
#: LiteRT 2.3's builtin kernels are ruy's (one observation per invoke; a large batch takes another
#: path), its reference kernels are built with TFLITE_SINGLE_ROUNDING, TFLite Micro rounds as gemmlowp.
#: Its XNNPACK delegate requantizes in float32 and is not bit-exact with any integer rounding.
RUNTIME_ROUNDING = {"litert": "ruy", "litert-reference": "single", "tflite-micro": "gemmlowp"}


class LiteRTPolicy:
    """A .tflite policy under the LiteRT interpreter (`ai-edge-litert`), one thread, one observation
    per invoke (as deployed). TFLite's builtin kernels (their rounding: RUNTIME_ROUNDING["litert"]);
    `kernels="reference"` its reference kernels; `kernels="xnnpack"` the default delegates, as
    `Interpreter(model_path)` applies them on a Raspberry Pi (float32 requantization)."""

    def __init__(self, model: bytes, policy: IntegerPolicy, kernels: str = "builtin") -> None:
        litert = require("ai_edge_litert.interpreter", "Running a LiteRT model")
        kinds = {
            "builtin": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            "reference": litert.OpResolverType.BUILTIN_REF,
            "xnnpack": litert.OpResolverType.AUTO,
        }
        if kernels not in kinds:
            raise QuarlError(f"kernels={kernels} is not known: choose one of {', '.join(kinds)}.")
        kind = kinds[kernels]
        self.kernels = kernels
        self.policy, self.model = policy, model
        self.interpreter = litert.Interpreter(model_content=model, experimental_op_resolver_type=kind, num_threads=1)
        self.interpreter.allocate_tensors()
        self.input = self.interpreter.get_input_details()[0]["index"]
        self.output = self.interpreter.get_output_details()[0]["index"]

    def act(self, obs: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(self.policy.batch(obs), dtype=np.float32)
        out = []
        for k in range(len(x)):
            self.interpreter.set_tensor(self.input, x[k : k + 1])
            self.interpreter.invoke()
            out.append(np.array(self.interpreter.get_tensor(self.output)).reshape(-1))
        return _shape_actions(np.stack(out) if out else np.zeros((0, 1)), self.policy, len(x))


class MicroPolicy:
    """A .tflite policy under TFLite Micro's Python interpreter (`tflite-micro`): one observation per
    invoke, as on a microcontroller. `arena_bytes` is the tensor arena it allocated."""

    def __init__(self, model: bytes, policy: IntegerPolicy, arena_size: Optional[int] = None) -> None:
        runtime = require("tflite_micro.python.tflite_micro.runtime", "Running a model with TFLite Micro")
        self.policy, self.model = policy, model
        self.interpreter = runtime.Interpreter.from_bytes(model, arena_size=arena_size or max(16384, 4 * len(model)))
        self.arena_bytes = _arena_bytes(self.interpreter)

    def act(self, obs: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(self.policy.batch(obs), dtype=np.float32)
        out = []
        for row in x:
            self.interpreter.set_input(row[None], 0)
            self.interpreter.invoke()
            out.append(np.array(self.interpreter.get_output(0)).reshape(-1))
        return _shape_actions(np.stack(out), self.policy, len(x))


def _arena_bytes(interpreter: Any) -> Optional[int]:
    """The arena TFLite Micro's recording allocator reports (it prints to the C stdout / stderr)."""
    import ctypes
    import sys

    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    sys.stderr.flush()
    libc.fflush(None)
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        for fd in saved:
            os.dup2(tmp.fileno(), fd)
        try:
            interpreter.print_allocations()
            libc.fflush(None)
        finally:
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
        tmp.seek(0)
        text = tmp.read().decode(errors="replace")
    found = re.search(r"Arena allocation total (\d+) bytes", text)
    return int(found.group(1)) if found else None


def check(model: bytes, policy: IntegerPolicy, states: np.ndarray) -> dict[str, int]:
    """Run the .tflite under LiteRT (builtin and reference kernels) and TFLite Micro, and count the
    states on which each one's actions differ from the reference's in that runtime's rounding
    (`RUNTIME_ROUNDING`): every count is 0 for a correct file. Runtimes not installed are left out."""
    runners: dict[str, Callable[[], LiteRTPolicy | MicroPolicy]] = {
        "litert": lambda: LiteRTPolicy(model, policy),
        "litert-reference": lambda: LiteRTPolicy(model, policy, kernels="reference"),
        "tflite-micro": lambda: MicroPolicy(model, policy),
    }
    counts: dict[str, int] = {}
    for runtime, make in runners.items():
        try:
            runner = make()
        except QuarlError:
            continue
        expected = policy.with_rounding(RUNTIME_ROUNDING[runtime]).act(states)
        got = runner.act(states)
        counts[runtime] = int(np.sum(np.any((got != expected).reshape(len(states), -1), axis=1)))
    return counts
