"""Inference latency of a compiled policy: batch 1, one thread, median of many calls after warm-up."""

from __future__ import annotations

import gc
import statistics
import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import numpy as np
import torch

QUICK_BUDGET_S = 0.25  # per backend, for backend="auto"


@contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread, garbage collection paused; both restored afterwards."""
    threads, collecting = torch.get_num_threads(), gc.isenabled()
    torch.set_num_threads(1)
    gc.disable()
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        if collecting:
            gc.enable()


def _one(runner: Any, obs: np.ndarray) -> np.ndarray:
    """One observation as a batch of 1 in the runner's input dtype."""
    return runner.net.batch(obs)[:1]


def _times(runner: Any, x: np.ndarray, calls: int) -> list[float]:
    run = runner._run  # the backend call itself, without input checks
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        run(x)
        times.append(time.perf_counter() - start)
    return times


def measure(runner: Any, obs: np.ndarray, warmup: int = 50, calls: int = 500) -> dict[str, float]:
    """Latency of one action at batch 1 on one thread (torch threads set to 1 and restored; ONNX
    Runtime runners are compiled with `threads=1` by default).

    Args:
        runner: a `Runner` from `compile_network` / `compile_policy`.
        obs: one observation, or a batch whose first row is used.
        warmup: calls before timing (allocations, caches, lazy kernel selection).
        calls: timed calls.

    Returns:
        {"median_ms", "p90_ms", "mean_ms", "calls", "threads"} (threads: the runner's ONNX Runtime
        intra-op threads, or 1 for torch runners during the measurement).
    """
    x = _one(runner, obs)
    with one_thread():
        _times(runner, x, warmup)
        times = np.asarray(_times(runner, x, calls)) * 1e3
    threads = runner.threads if runner.onnx_model is not None else 1
    return {
        "median_ms": float(np.median(times)),
        "p90_ms": float(np.percentile(times, 90)),
        "mean_ms": float(times.mean()),
        "calls": int(calls),
        "threads": int(threads),
    }


def quick_median_ms(runners: Mapping[str, Any], obs: np.ndarray, rounds: int = 3) -> dict[str, float]:
    """Median batch-1 latency of each runner within about QUICK_BUDGET_S each, measured in
    interleaved rounds so that a slow moment of the machine does not land on one backend only."""
    x = {name: _one(r, obs) for name, r in runners.items()}
    with one_thread():
        calls = {}
        for name, r in runners.items():  # warm up and size the rounds from one timed call
            _times(r, x[name], 5)
            once = max(min(_times(r, x[name], 3)), 1e-6)
            calls[name] = int(min(200, max(10, QUICK_BUDGET_S / once / rounds)))
        samples: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(rounds):
            for name, r in runners.items():
                samples[name] += _times(r, x[name], calls[name])
    return {name: statistics.median(s) * 1e3 for name, s in samples.items()}
