"""The greedy search for the smallest mixed-precision policy that keeps the bound (docs/sensitivity.md)."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import pandas as pd

from quarl.quantize.weights import inference_layers, layer_bytes
from quarl.sensitivity.measure import Bound, Measure, Probe

log = logging.getLogger(__name__)


@dataclass
class Search:
    """The searched policy: per-layer weight bits, its measure, bytes and the steps that led there."""

    layer_bits: dict[str, int]
    bound: str
    met: bool
    reward: float
    agreement: float
    e: Optional[float]
    bytes: int
    uniform_bytes: int  # every layer at the widest width of the set
    uniform_bits: int
    fp32_bytes: int
    fp32_reward: float
    evaluations: int
    steps: list[dict[str, Any]] = field(default_factory=list)


def search(probe: Probe, table: pd.DataFrame, bits: list[int], bound: Bound) -> Search:
    """Greedy descent (see the module docstring) from every layer at max(bits)."""
    widest = max(bits)
    current = {name: widest for name in probe.layers}
    start = probe.measure(probe.quant(current))
    uniform_bytes = probe.bytes(probe.quant(current))
    best, steps = (
        start,
        [{"layer": f"(every layer at {widest})", "bits": widest, **asdict(start), "kept": bound.met(start)}],
    )
    if not bound.met(start):
        log.warning("Uniform %d-bit weights already break the bound (%s): nothing to search.", widest, bound.text())
    frozen: set[str] = set() if bound.met(start) else set(current)
    alone = {
        (r.layer, r.bits): Measure(r.reward, r.agreement, None if pd.isna(r.e) else r.e) for r in table.itertuples()
    }
    layers = inference_layers(probe.reference)
    while True:
        candidates = []
        for name in probe.layers:
            lower = [b for b in bits if b < current[name]]
            if name in frozen or not lower:
                continue
            b = max(lower)
            single = alone[(name, b)]
            if not bound.met(single):
                frozen.add(name)  # alone at that width it already breaks the bound
                continue
            saved = layer_bytes(name, layers[name], probe.quant({name: current[name]})) - layer_bytes(
                name, layers[name], probe.quant({name: b})
            )
            candidates.append((saved / (1.0 - single.agreement + 1e-3), name, b))
        if not candidates:
            break
        _, name, b = max(candidates)
        trial = {**current, name: b}
        m = probe.measure(probe.quant(trial))
        kept = bound.met(m)
        steps.append({"layer": name, "bits": b, **asdict(m), "kept": kept})
        log.info(
            "%s -> %d bits: agreement %.3f, reward %.2f: %s",
            name,
            b,
            m.agreement,
            m.reward,
            "kept" if kept else "rejected",
        )
        if kept:
            current, best = trial, m
        else:
            frozen.add(name)
    quant = probe.quant(current)
    return Search(
        layer_bits=current,
        bound=bound.text(),
        met=bound.met(best),
        reward=best.reward,
        agreement=best.agreement,
        e=best.e,
        bytes=probe.bytes(quant),
        uniform_bytes=uniform_bytes,
        uniform_bits=widest,
        fp32_bytes=probe.bytes(probe.quant()),
        fp32_reward=probe.fp32_reward,
        evaluations=probe.evaluations,
        steps=steps,
    )
