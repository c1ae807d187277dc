"""The sensitivity study's measurements: each inference layer (and the input) quantized alone at
each bit width, measured on the cell's own evaluation episodes and fp32 states."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any, Optional

import pandas as pd
from omegaconf import OmegaConf, open_dict

from quarl.errors import QuarlError
from quarl.evaluate.episodes import evaluate_cell
from quarl.evaluate.fidelity import STATES, policy_fidelity
from quarl.quantize.calibration import calibrate, calibration_seeds
from quarl.quantize.weights import inference_layers, layer_bytes, policy_bytes, quantize_policy

log = logging.getLogger(__name__)


INPUT = "input"  # the study's row for the observation entering the network
DEFAULT_BITS = (2, 3, 4, 6, 8)


@dataclass(frozen=True)
class Measure:
    """One quantized variant on the study's episodes and states."""

    reward: float
    agreement: float
    e: Optional[float]


@dataclass(frozen=True)
class Bound:
    """What "keeps its behaviour" means: action agreement >= min_agreement and, where given, E <= max_error."""

    min_agreement: float = 0.99
    max_error: Optional[float] = None

    def met(self, m: Measure) -> bool:
        if m.agreement < self.min_agreement:
            return False
        return self.max_error is None or (m.e is not None and m.e <= self.max_error)

    def text(self) -> str:
        parts = [f"action agreement >= {self.min_agreement:g}"]
        if self.max_error is not None:
            parts.append(f"E <= {100 * self.max_error:g}%")
        return " and ".join(parts)


def check_bits(bits: list[int] | str) -> list[int]:
    """The bit widths of a study (a list, or --bits text such as '2,4,8'), narrowest first; a
    QuarlError for a width that is not a whole number in 2..16."""
    if isinstance(bits, str):
        try:
            bits = [int(b) for b in bits.split(",") if b.strip()]
        except ValueError:
            raise QuarlError(f"--bits {bits} is not a list of whole numbers: use e.g. --bits 2,3,4,6,8.") from None
    if not bits:
        raise QuarlError("--bits is empty: give bit widths in 2..16, e.g. --bits 2,3,4,6,8.")
    for b in bits:
        if not 2 <= b <= 16:
            raise QuarlError(f"--bits {b} is out of range: use bit widths in 2..16, e.g. --bits 2,3,4,6,8.")
    return sorted(set(bits))


def check_bound(bound: Bound) -> None:
    if not 0 < bound.min_agreement <= 1:
        raise QuarlError(f"--min-agreement {bound.min_agreement} is out of range: use a fraction in (0, 1], e.g. 0.99.")
    if bound.max_error is not None and bound.max_error < 0:
        raise QuarlError(f"--max-error {bound.max_error} is out of range: use a fraction >= 0, e.g. 0.01 for E <= 1%.")


class Probe:
    """Quantized variants of one fp32 policy, measured as a cell of `cfg` measures them: reward and E
    on `cfg`'s seeded episodes, action agreement on the states its fp32 evaluation visits."""

    def __init__(self, cfg: Any, policy: Any) -> None:
        from quarl.evaluate.fidelity import relative_error  # the cells' own E

        self.cfg, self.policy, self._relative_error = cfg, policy, relative_error
        self.reference, self.transform = policy.load(), policy.obs_transform()
        ev = evaluate_cell(self.reference, self.cfg, self.transform, keep_states=STATES)
        assert ev.states is not None
        self.fp32_reward, self.states = ev.mean, ev.states
        seeds = calibration_seeds(int(cfg.seed), int(cfg.quant.calibration_episodes), int(cfg.eval.episodes))
        self.ranges = calibrate(self.reference, cfg.env, seeds, cfg.quant.calibration, self.transform)
        self.layers = list(inference_layers(self.reference))
        self.evaluations = 0

    def quant(self, layer_bits: Optional[dict[str, int]] = None, input_bits: int = 32, bits: int = 32) -> Any:
        """`cfg.quant` (its scheme, granularity, calibration) with these bit widths, activations fp32."""
        quant = OmegaConf.create(OmegaConf.to_container(self.cfg.quant, resolve=True))
        with open_dict(quant):
            quant.update(method="ptq", bits=bits, act_bits=32, input_bits=input_bits, layer_bits=layer_bits or None)
        return quant

    def measure(self, quant: Any) -> Measure:
        model = self.policy.load()
        quantize_policy(model, quant, calibrate=lambda _: self.ranges)
        ev = evaluate_cell(model, self.cfg, self.transform)
        fidelity = policy_fidelity(self.reference, self.transform, model, self.transform, self.states)
        e, _ = self._relative_error(self.fp32_reward, ev.mean, self.cfg.env.return_scale)
        self.evaluations += 1
        return Measure(ev.mean, fidelity.agreement, e)

    def bytes(self, quant: Any) -> int:
        return policy_bytes(self.reference, quant)


def study(probe: Probe, bits: list[int]) -> pd.DataFrame:
    """One row per (layer or input, bits): reward, agreement, E, the layer's bytes at those bits and
    its rank (1: most sensitive, by mean disagreement over the widths)."""
    rows = []
    layers = inference_layers(probe.reference)
    for name in [*probe.layers, INPUT]:
        for b in bits:
            quant = probe.quant(input_bits=b) if name == INPUT else probe.quant({name: b})
            m = probe.measure(quant)
            nbytes = layer_bytes(name, layers[name], quant) if name != INPUT else None
            rows.append({"layer": name, "bits": b, **asdict(m), "layer_bytes": nbytes})
            log.info("%s at %d bits alone: reward %.2f, agreement %.3f", name, b, m.reward, m.agreement)
    table = pd.DataFrame(rows)
    score = (1 - table.groupby("layer", sort=False)["agreement"].mean()).rename("sensitivity")
    ranks = score.rank(ascending=False, method="first").astype(int).rename("rank")
    return table.merge(score, on="layer").merge(ranks, on="layer")
