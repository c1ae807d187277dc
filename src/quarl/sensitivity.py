"""Per-layer sensitivity of a policy to quantization, and a search for the smallest mixed-precision
policy that keeps its behaviour (`quarl sensitivity`).

Study: each inference layer's weights (and the input, with its calibrated range) quantized alone at
each bit width, everything else fp32, measured on the cell's own seeded evaluation episodes (reward,
E) and on the states its fp32 evaluation visits (action agreement, as every record measures it).
Layers are ranked by their mean disagreement over the bit widths.

Search: greedy descent from every layer at the widest width of the set. A step lowers one layer to
the next narrower width; the step tried first is the one that saves the most bytes per unit of
sensitivity (that layer's disagreement alone at the new width, from the study); a layer that alone
already breaks the bound is not tried. Each step is measured on the whole mixed policy and kept only
if the policy still meets the bound; a rejected layer stays where it is. Why greedy and not a
knapsack over the study's numbers: bytes add up over layers but errors do not (they compound through
the network), so a knapsack solution would only be predicted to meet the bound; every step here is
measured jointly, so the result meets it on the study's episodes and states, in at most
layers x (widths - 1) evaluations. The result is a `quant.layer_bits` cell that run.py evaluates,
stores with its bytes and exports like any other.
"""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from omegaconf import OmegaConf, open_dict

from quarl.config import method_registry
from quarl.config.method_registry import fp32_config
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


def heatmap(table: pd.DataFrame, title: str) -> Figure:
    """Layer x bits heat maps of action agreement and reward (layers in rank order, most sensitive on top)."""
    order = table.sort_values("rank")["layer"].drop_duplicates().tolist()
    fig = Figure(figsize=(11, 1.2 + 0.55 * len(order)), layout="constrained")
    FigureCanvasAgg(fig)
    for ax, (value, label, cmap) in zip(
        fig.subplots(1, 2), (("agreement", "action agreement", "viridis"), ("reward", "reward", "magma"))
    ):
        grid = table.pivot(index="layer", columns="bits", values=value).reindex(order)
        data = grid.to_numpy(dtype=float)
        image = ax.imshow(
            data,
            cmap=cmap,
            aspect="auto",
            vmin=0 if value == "agreement" else None,
            vmax=1 if value == "agreement" else None,
        )
        ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
        ax.set_yticks(range(grid.shape[0]), order)
        ax.set_xlabel("bits (this layer alone; the rest fp32)")
        for (i, j), v in np.ndenumerate(data):
            ax.text(
                j,
                i,
                f"{v:.2f}" if value == "agreement" else f"{v:.0f}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if (v < 0.6 if value == "agreement" else v < np.nanmean(data)) else "black",
            )
        fig.colorbar(image, ax=ax, label=label)
    fig.suptitle(title)
    return fig


def run_command(overrides: list[str], layer_bits: dict[str, int], bits: int) -> str:
    """The run.py command of the searched cell: the study's overrides, quant=ptq, quant.bits and quant.layer_bits."""
    kept = [o for o in overrides if not o.split("=", 1)[0].lstrip("+~").startswith("quant")]
    spec = "{" + ",".join(f"{k}:{v}" for k, v in layer_bits.items()) + "}"
    return shlex.join(["python", "run.py", *kept, "quant=ptq", f"quant.bits={bits}", f"quant.layer_bits={spec}"])


def write(out: Path, table: pd.DataFrame, result: Optional[Search], title: str, command: Optional[str]) -> list[Path]:
    """sensitivity.csv (every layer x bits), ranking.md/.csv/.tex, heatmap.png/.pdf, and search.json/.md
    where searched; returns the paths."""
    from quarl.collate import plots, tables

    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "sensitivity.csv", index=False)
    ranking = table.pivot(index="layer", columns="bits", values="agreement")
    ranking.columns = [f"agreement@{b}" for b in ranking.columns]
    ranking = ranking.join(table.groupby("layer")[["rank", "sensitivity"]].first()).sort_values("rank").reset_index()
    written = [out / "sensitivity.csv"]
    written += tables.write(
        ranking,
        out / "ranking",
        f"{title}: sensitivity, most sensitive first",
        "Action agreement with the fp32 policy when only this layer's weights (or the input) are "
        "quantized, the rest fp32; rank 1 = most sensitive (mean disagreement over the widths).",
        floatfmt=".3f",
    )
    fig = heatmap(table, f"{title}: each layer quantized alone")
    try:
        written += plots.save(fig, out / "heatmap")
    finally:
        fig.clear()
    if result is not None:
        record = {**asdict(result), "command": command}
        (out / "search.json").write_text(json.dumps(record, indent=2))
        steps = pd.DataFrame(result.steps)
        lines = [
            f"## {title}: smallest policy with {result.bound}",
            "",
            f"- layer bits: {json.dumps(result.layer_bits)}",
            f"- bytes: {result.bytes} (uniform {result.uniform_bits}-bit: {result.uniform_bytes}, fp32: "
            f"{result.fp32_bytes}); {result.uniform_bytes / result.bytes:.2f}x smaller than uniform",
            f"- agreement {result.agreement:.4f}, reward {result.reward:.2f} (fp32 {result.fp32_reward:.2f}), "
            f"E {'n/a' if result.e is None else f'{100 * result.e:.2f}%'}; bound met: {result.met}",
            f"- {result.evaluations} evaluations; run it as a cell: `{command}`",
            "",
            steps.to_markdown(index=False, floatfmt=".4g"),
            "",
        ]
        (out / "search.md").write_text("\n".join(lines))
        written += [out / "search.json", out / "search.md"]
    return written


def compose_cell(conf_dir: Path, overrides: list[str]) -> Any:
    """The PTQ cell `python run.py OVERRIDES` would run (quant=ptq unless another quant is chosen), checked."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from quarl.config import schema

    schema.register()
    chosen = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") == "quant"]
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = compose("config", overrides=([] if chosen else ["quant=ptq"]) + list(overrides))
    except HydraException as exc:
        raise QuarlError(f"These overrides do not make a cell: {exc}") from None
    method = method_registry.of(cfg)
    if method.trains_policy or not method.integer:  # it quantizes the fp32 policy's layers to integers
        raise QuarlError(
            f"quarl sensitivity studies post-training quantization: use quant=ptq, not quant={cfg.quant.method}."
        )
    schema.check(cfg)
    return cfg


def run_study(
    conf_dir: Path,
    overrides: list[str],
    bits: list[int] | str,
    min_agreement: float,
    max_error: Optional[float],
    out: Optional[Path],
    search_too: bool = True,
) -> list[Path]:
    """`quarl sensitivity`: obtain the cell's fp32 policy (trained if not cached), study it, search,
    and write the outputs (see `write`) into `out` (default outputs/sensitivity/<algo>-<env>-seed<seed>-<policy>)."""
    from quarl.config.keys import slug
    from quarl.rl.algos import check_action_kind
    from quarl.rl.envs import action_kind
    from quarl.train.cache import obtain

    bits, bound = check_bits(bits), Bound(min_agreement, max_error)
    check_bound(bound)
    cfg = compose_cell(conf_dir, overrides)
    check_action_kind(cfg.algo.name, cfg.env.id, action_kind(cfg.env), "ptq")
    policy = obtain(fp32_config(cfg), Path(cfg.store.policies), progress=bool(cfg.train.progress))
    out = out or Path("outputs/sensitivity") / slug(f"{cfg.algo.name}-{cfg.env.name}-seed{cfg.seed}-{policy.key}")
    probe = Probe(cfg, policy)
    if (
        max_error is not None
        and probe._relative_error(probe.fp32_reward, probe.fp32_reward, cfg.env.return_scale)[0] is None
    ):
        raise QuarlError(
            f"--max-error {max_error} cannot be checked: E is n/a for this policy (its fp32 reward "
            f"{probe.fp32_reward:.4g} is too close to 0); bound it with --min-agreement only."
        )
    table = study(probe, bits)
    result = search(probe, table, bits, bound) if search_too else None
    command = run_command(overrides, result.layer_bits, max(bits)) if result is not None else None
    title = f"{cfg.algo.name} on {cfg.env.name} (seed {cfg.seed})"
    written = write(out, table, result, title, command)
    if result is not None:
        log.info(
            "Smallest policy with %s: %s, %d bytes (uniform %d-bit %d, fp32 %d); agreement %.4f, reward %.2f "
            "(fp32 %.2f). Run it as a cell: %s",
            result.bound,
            json.dumps(result.layer_bits),
            result.bytes,
            result.uniform_bits,
            result.uniform_bytes,
            result.fp32_bytes,
            result.agreement,
            result.reward,
            result.fp32_reward,
            command,
        )
    return written
