"""FP8 execution of a wide policy (issue 57, item 6): the published 3x2048 MLP (4 inputs, three hidden
layers of 2048 units, 2 outputs, as QuaRL's wide DQN) at batch 1 and at an actor batch of 256, its
Linear layers in fp32, in bfloat16 and as FP8 E4M3 GEMMs (`quarl.deploy.fp8`, the torch_fp8 backend:
`torch._scaled_mm`, inputs scaled per call), measured side by side in one run: `--rounds` rounds,
each timing every precision in turn over `--calls` calls after a warm-up, the median per call; the
table gives each precision's time and its speed-up over fp32. On a CUDA device the products are
tensor-core GEMMs (FP8 on Hopper and later); on a CPU torch computes FP8 in software, so the CPU
table (batch 1 only) says how far FP8 is from useful there, not what a GPU gains.

Usage: python benchmarks/bench_fp8.py [--device cuda] [--rounds 5] [--calls 200] [--out fp8.txt]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn

from quarl.deploy.fp8 import fp8_layers

WIDTH, DEPTH, INPUTS, OUTPUTS = 2048, 3, 4, 2
BATCHES = (1, 256)  # a GPU's; a CPU runs batch 1 only (FP8 in software: minutes a call at 256)


def policy() -> nn.Sequential:
    """The 3x2048 MLP with fixed random weights."""
    torch.manual_seed(0)
    sizes = [INPUTS, *[WIDTH] * DEPTH]
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(WIDTH, OUTPUTS)).eval()


def precisions(net: nn.Sequential, device: torch.device) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """fp32, bf16 and FP8 forward passes of copies of `net` on `device`."""
    fp32 = copy.deepcopy(net).to(device)
    bf16 = copy.deepcopy(net).to(device).to(torch.bfloat16)
    fp8 = fp8_layers(copy.deepcopy(net).to(device))
    return {"fp32": fp32, "bf16": lambda x: bf16(x.to(torch.bfloat16)).float(), "fp8": fp8}


def per_call_ms(run: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, calls: int) -> float:
    """The mean ms per call over `calls` calls after three warm-up calls (synchronised on a CUDA device)."""
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    with torch.inference_mode():
        for _ in range(3):
            run(x)
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            run(x)
        sync()
    return 1e3 * (time.perf_counter() - start) / calls


def measure(device: torch.device, rounds: int, calls: int, batches: tuple[int, ...]) -> list[dict[str, object]]:
    """Per batch and precision: the median over rounds of the ms per call, and its ratio to fp32."""
    runs = precisions(policy(), device)
    rows = []
    for batch in batches:
        x = torch.randn(batch, INPUTS, device=device)
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(rounds):
            for name, run in runs.items():
                times[name].append(per_call_ms(run, x, calls))
        fp32 = statistics.median(times["fp32"])
        for name, ms in times.items():
            median = statistics.median(ms)
            rows.append({"batch": batch, "precision": name, "ms": median, "speedup": fp32 / median})
    return rows


def table(rows: list[dict[str, object]], device: str, rounds: int, calls: int) -> str:
    lines = [
        f"3x2048 MLP on {device}: median over {rounds} rounds of {calls} calls each, one side after another",
        "",
        "| batch | precision | ms per call | speed-up over fp32 |",
        "| ---: | --- | ---: | ---: |",
    ]
    lines += [f"| {r['batch']} | {r['precision']} | {r['ms']:.4f} | {r['speedup']:.2f}x |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, help="default: 5 on a GPU, 1 on a CPU (software FP8 is slow)")
    parser.add_argument("--calls", type=int, help="default: 200 on a GPU, 2 on a CPU")
    parser.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    args = parser.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    args.rounds = args.rounds or (5 if gpu else 1)
    args.calls = args.calls or (200 if gpu else 2)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    batches = BATCHES if gpu else BATCHES[:1]
    text = table(measure(device, args.rounds, args.calls, batches), name, args.rounds, args.calls)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
