"""int4 vs int8 at batch 1 on the 3x2048 MLP: every ONNX Runtime setting that could make 4-bit weights
faster, measured side by side in one run.

The policy: bench_deploy's trained PPO CartPole policy with a 3x2048 actor (from quarl's policy cache,
trained there first if missing), quantized by quarl's PTQ to 4 bits (its default: affine, per tensor),
so that `onnx_int4` executes its own weights. Variants:

- int8: quarl's `onnx_int8` (dynamic, uint8 weights per tensor: MatMulInteger) and, as references,
  ONNX Runtime's other int8 layouts of the same network: dynamic with int8 weights per channel,
  static QOperator (QLinearMatMul) and static QDQ, both calibrated on 512 CartPole states.
- int4 (MatMulNBits): quarl's `onnx_int4` (accuracy_level 4, blocks of 256), accuracy levels 0, 1, 2,
  blocks of 16 to 128, and quarl's setting with graph optimisation `basic` and without prepacking.

Each variant: median ms per call (batch 1, one ONNX Runtime thread) over interleaved rounds (the median
of the round medians, and the best round: on a shared machine the best round is the nearest to a quiet
one), the time of quarl's int8 over its time, and the fraction of 2048 CartPole states (random-action
episodes) on which it acts as the fake-quantized 4-bit network. The last line is the row
"int4 vs int8, 3x2048, batch 1" (quarl's `onnx_int4` against quarl's `onnx_int8`).

Usage (pin it to one core; the load average is printed beside the table):
    OMP_NUM_THREADS=1 taskset -c 0 python benchmarks/bench_int4.py [--rounds 9] [--budget 0.5]
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd
from bench_deploy import ROOT, cartpole_obs, ptq, trained_models

from quarl.deploy import Runner, acting_network, compile_network, measure, nbits, onnx_io
from quarl.deploy.execution import NbitsRunner, OnnxRunner, action_agreement
from quarl.rl.envs import random_observations

NETWORK = "MLP 3x2048"
INT8, INT4 = "int8 onnx_int8 (quarl)", "int4 onnx_int4 (quarl)"
ROW = "int4 vs int8, 3x2048, batch 1"
# what ONNX Runtime 1.31 runs for each variant on x86 (MLAS; from its source: matmul_nbits.cc, qnbitgemm)
KERNELS = {
    INT8: "DynamicQuantizeMatMul, U8U8 QGEMM (16-bit vpmaddwd)",
    "int8 dynamic, int8 weights per channel": "DynamicQuantizeMatMul, U8S8 QGEMM (vpmaddubsw)",
    "int8 static QLinearMatMul": "QLinearMatMul, U8S8 QGEMM",
    "int8 static QDQ per channel": "QDQ fused to MatMulIntegerToFloat, U8S8 QGEMM",
    INT4: "CompInt8: int8 activations, 4-bit codes unpacked, vpmaddubsw (vpdpbusd with VNNI)",
    "int4 accuracy_level 0": "CompFp32: codes -> fp32 in registers, FMA",
    "int4 accuracy_level 1": "CompFp32: codes -> fp32 in registers, FMA",
    "int4 accuracy_level 2": "CompFp32 (fp16 compute falls back to fp32 on x86)",
    **{f"int4 block {b}": "CompInt8" for b in (16, 32, 64, 128)},
    "int4, graph optimisation basic": "CompInt8",
    "int4, prepacking off": "unpacked: all weights dequantized to fp32 per call, then SGEMM",
}


def session(model: bytes, basic: bool = False, prepack: bool = True) -> Any:
    """An ONNX Runtime session as quarl opens it (one thread, all optimisations), or with graph
    optimisation `basic`, or with prepacking disabled."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_BASIC if basic
                                        else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    options.log_severity_level = 3
    if not prepack:
        options.add_session_config_entry("session.disable_prepacking", "1")
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def ort_int8(fp32: bytes, calibration: np.ndarray, layout: str) -> bytes:
    """`fp32` quantized to int8 by ONNX Runtime's quantizer (preprocessed as quarl does) in `layout`:
    "dynamic_s8" (int8 weights per channel), "qoperator" or "qdq" (static, calibrated, uint8 activations)."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quant_pre_process,
        quantize_dynamic,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter({onnx_io.INPUT: calibration[i:i + 32]} for i in range(0, len(calibration), 32))

        def get_next(self) -> Optional[dict[str, np.ndarray]]:
            return next(self.batches, None)

    with tempfile.TemporaryDirectory(prefix="bench-int8-") as tmp:
        src, pre, out = Path(tmp, "fp32.onnx"), Path(tmp, "pre.onnx"), Path(tmp, "int8.onnx")
        proto = onnx.load_model_from_string(fp32)
        del proto.graph.value_info[:]
        src.write_bytes(proto.SerializeToString())
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
        if layout == "dynamic_s8":
            quantize_dynamic(str(pre), str(out), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"])
        else:
            qdq = layout == "qdq"
            quantize_static(
                str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ if qdq else QuantFormat.QOperator,
                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=qdq,
                op_types_to_quantize=["Gemm", "MatMul"],
                extra_options={"OpTypesToExcludeOutputQuantization": ["Gemm", "MatMul"]} if qdq else {},
            )
        return out.read_bytes()


def variants(net: Any, example: np.ndarray) -> dict[str, Runner]:
    """Every runner measured, by name (quarl's int8 and int4 first)."""
    fp32 = onnx_io.to_onnx(net, net.batch(example))
    runners: dict[str, Runner] = {INT8: compile_network(net, "onnx_int8", example),
                                  INT4: compile_network(net, "onnx_int4", example)}
    for name, layout in (("int8 dynamic, int8 weights per channel", "dynamic_s8"),
                         ("int8 static QLinearMatMul", "qoperator"), ("int8 static QDQ per channel", "qdq")):
        runners[name] = OnnxRunner(net, "onnx_int8", ort_int8(fp32, example, layout), 1)

    def int4(name: str, block: Optional[int] = None, level: int = nbits.ACCURACY_LEVEL, **options: bool) -> None:
        model, report = nbits.quantize_nbits(fp32, 4, block_size=block, accuracy_level=level)
        runner = NbitsRunner(net, "onnx_int4", model, 1, report)
        if options:
            runner.session = session(model, **options)
        runners[name] = runner

    for level in (0, 1, 2):
        int4(f"int4 accuracy_level {level}", level=level)
    for block in (16, 32, 64, 128):
        int4(f"int4 block {block}", block=block)
    int4("int4, graph optimisation basic", basic=True)
    int4("int4, prepacking off", prepack=False)
    return runners


def interleaved(runners: dict[str, Runner], obs: np.ndarray, rounds: int, budget_s: float) -> dict[str, list[float]]:
    """Per runner, the median ms of each of `rounds` rounds; every round times all runners in turn
    (about `budget_s` seconds each, 20 to 500 calls), so a busy moment of the machine hits them alike."""
    once = {name: measure(r, obs, warmup=5, calls=5)["median_ms"] for name, r in runners.items()}
    calls = {name: int(min(500, max(20, budget_s * 1e3 / t))) for name, t in once.items()}
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, r in runners.items():
            times[name].append(measure(r, obs, warmup=10, calls=calls[name])["median_ms"])
    return times


def table(runners: dict[str, Runner], times: dict[str, list[float]], agreement: Callable[[Runner], float]) -> pd.DataFrame:
    base, base_best = statistics.median(times[INT8]), min(times[INT8])
    rows = []
    for name, r in runners.items():
        median, best = statistics.median(times[name]), min(times[name])
        rows.append({"variant": name, "ONNX Runtime kernel (x86)": KERNELS[name], "median ms": median,
                     "best round ms": best, "vs quarl int8 (median)": base / median,
                     "vs quarl int8 (best)": base_best / best, "agreement": agreement(r), "bytes": r.nbytes})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", type=Path, default=ROOT / "outputs" / "policies", help="quarl policy cache")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved latency rounds")
    parser.add_argument("--budget", type=float, default=0.5, help="seconds of timed calls per variant and round")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("quarl.deploy.execution").setLevel(logging.ERROR)
    start = time.perf_counter()

    model = trained_models([NETWORK], args.policies, jobs=1)[NETWORK]
    net = ptq(acting_network(model), 4)
    runners = variants(net, cartpole_obs())
    states = random_observations("CartPole-v1", 2048, 3)
    load_before = os.getloadavg()[0]
    times = interleaved(runners, states[:1], args.rounds, args.budget)
    load_after = os.getloadavg()[0]
    result = table(runners, times, lambda r: action_agreement(net, r, states))

    import onnxruntime

    print(f"\n## {ROW}: ONNX Runtime settings side by side ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, onnxruntime {onnxruntime.__version__}, one thread, {args.rounds} interleaved "
          f"rounds, load average {load_before:.1f} -> {load_after:.1f})\n")
    print("Agreement: fraction of 2048 CartPole states on which the variant acts as the fake-quantized "
          "PTQ 4-bit network.\n")
    print(result.to_markdown(index=False, floatfmt=".4g"))
    int4 = result.set_index("variant").loc[INT4]
    print(f"\n{ROW}: {int4['vs quarl int8 (median)']:.2f}x faster (median of rounds; best rounds "
          f"{int4['vs quarl int8 (best)']:.2f}x; target >= 1.5x)")
    print(f"\n{time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
