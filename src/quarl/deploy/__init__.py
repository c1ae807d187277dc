"""Real low-precision execution and deployment of quarl policies.

- `acting_network(model, obs_transform)`: the deterministic policy as one torch module
  (raw observations -> actions, exactly as `model.predict(..., deterministic=True)`).
- `compile_network(net, backend, example_obs)` / `compile_policy(model, backend, example_obs,
  obs_transform)`: a `Runner` on one of `CHOICES` ("auto", "torch", "onnx", "onnx_int8",
  "onnx_int4", "onnx_int2", "torch_fp16", "torch_bf16", and the full-integer "c" and "tflite");
  `runner(obs)` -> actions, `runner.nbytes`, `runner.backend`.
- `measure(runner, obs)`: batch-1, one-thread latency (median and p90 ms).
- `export(model, path, precision)`: a standalone ONNX file (fp32, int8, int4 or int2) that acts with
  onnxruntime and numpy only (examples/act_onnx.py).

Backends that need ONNX (`onnx`, `onnx_int8`, export) need `pip install onnx onnxscript onnxruntime`.

`quarl.deploy.edge`: the full-integer int8 policy (TFLite's scheme) as a numpy reference, a C99 policy
for microcontrollers and a LiteRT model, each bit for bit the reference (`export_edge`); backend `c`
needs a host C compiler, `tflite` needs `pip install 'quarl[edge]'`.
"""

from quarl.deploy.acting import ActingNetwork, acting_network
from quarl.deploy.execution import BACKENDS, CHOICES, Runner, compile_network, compile_policy
from quarl.deploy.latency import measure
from quarl.deploy.onnx_export import export

__all__ = [
    "BACKENDS",
    "CHOICES",
    "ActingNetwork",
    "Runner",
    "acting_network",
    "compile_network",
    "compile_policy",
    "export",
    "measure",
]
