"""The report's "Beyond QuaRL: FP8, MX and NF4 policies" section (sweep ptq_formats): per series and
task, each number format's reward beside the integer quantizer at the nearest bits per weight,
format - integer paired by seed and read with Holm's correction over every comparison of the
section; a verdict count per format across the tasks; and a figure of reward against bits per
weight, one line per format family."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from quarl.collate import verdicts
from quarl.collate.bits_per_weight import family
from quarl.collate.frame import INTEGER
from quarl.collate.stats import Interval, seed_interval
from quarl.report import actorq_formats, facts
from quarl.report.campaign import (
    Inputs,
    by_seed,
    difference_bounds,
    of_series,
    reward_bounds,
    select,
    series_of,
    sweep_of,
    values,
)
from quarl.report.text import fmt, markdown, note, save_figure, shown

SWEEP = "ptq_formats"
FIGURES = "figures"
FIGURE = "formats_bits_per_weight.png"
PANELS_A_ROW = 4
#: the sweep's integer quantizer (its YAML): the cells the formats are compared with
QUANTIZER = {"quant__scheme": "quarl_code", "quant__granularity": "per_tensor", "quant__quantize_bias": False}


def options(sweeps: Path) -> tuple[list[int], list[str]]:
    """The sweep's integer widths (its `int<bits>` options) and its formats, in its order."""
    grid = facts.sweep(SWEEP, sweeps).grid["+format"]
    ints = [int(o.removeprefix(INTEGER)) for o in grid if o.startswith(INTEGER)]
    return ints, [o for o in grid if not o.startswith(INTEGER) and o != "fp32"]


def _formats(cells: pd.DataFrame) -> pd.Series:
    """Each record's quant.format (`int` for records written before formats existed)."""
    if "quant.format" not in cells.columns:
        return pd.Series(INTEGER, index=cells.index)
    return cells["quant.format"].where(cells["quant.format"].notna(), INTEGER).astype(str)


def records(inputs: Inputs) -> pd.DataFrame:
    """The default trainings' integer and fp32 records beside their number-format records (which the
    paper's sections never see: `quarl.report.campaign.split`)."""
    return pd.concat([inputs.runs, inputs.campaign.formats], ignore_index=True)


def pairs(runs: pd.DataFrame) -> list[tuple[str, str]]:
    """The (algo, env) pairs with records from the formats sweep, in order."""
    if "run_dir" not in runs.columns:
        return []
    ran = runs[runs["run_dir"].map(sweep_of) == SWEEP]
    return sorted({(str(a), str(e)) for a, e in zip(ran["algo"], ran["env"])})


@dataclass
class Row:
    """One weights setting of a series on a task: its cells, bits per weight and comparison."""

    label: str  # 'fp32', 'int4', a format's name
    family: str
    bits_per_weight: float
    reward: Interval
    seeds: pd.Series  # reward per seed
    compared: str = ""  # the integer width it is compared with ('int4'), '' for fp32 and integers
    diff: Interval | None = None
    diffs: np.ndarray = field(default_factory=lambda: np.empty(0))
    verdict: str = ""
    kind: str = ""  # the verdict's kind (`quarl.collate.verdicts.Verdict`): 'higher' is the format's


def table(runs: pd.DataFrame, series: str, env: str, ints: list[int], names: list[str]) -> list[Row]:
    """fp32, the integer widths and every format of one series on `env` that has records."""
    base = of_series(runs, series, env, quant="ptq")
    cells = base[_formats(base) != INTEGER]
    integer = select(base[_formats(base) == INTEGER], **QUANTIZER)
    rows = []
    for bits, label in [(32, "fp32"), *[(b, f"{INTEGER}{b}") for b in ints]]:
        found = select(integer, quant__bits=bits) if bits != 32 else select(base, quant__bits=32)
        if not found.empty:
            per_seed = by_seed(found, "reward_mean")
            rows.append(Row(label, "fp32" if bits == 32 else "integer", bits, seed_interval(per_seed), per_seed))
    by_width = {r.bits_per_weight: r for r in rows if r.family == "integer"}
    for name in names:
        found = cells[_formats(cells) == name]
        if found.empty:
            continue
        per_seed = by_seed(found, "reward_mean")
        bpw = float(np.mean(values(found, "bits_per_weight")))
        row = Row(name, family(name), bpw, seed_interval(per_seed), per_seed)
        if by_width:
            nearest = by_width[min(by_width, key=lambda b: (abs(b - bpw), -b))]  # a tie: the wider integer
            paired = pd.concat([per_seed, nearest.seeds], axis=1, join="inner")
            row.compared, row.diffs = nearest.label, (paired.iloc[:, 0] - paired.iloc[:, 1]).to_numpy(float)
            row.diff = seed_interval(row.diffs)
        rows.append(row)
    return rows


def _margin(runs: pd.DataFrame, env: str) -> float:
    scales = values(select(runs, env=env), "env.return_scale")
    return verdicts.SCALE_MARGIN * float(scales[0]) if scales.size else float("nan")


def decide(tables: list[tuple[str, str, list[Row]]], runs: pd.DataFrame) -> None:
    """Every comparison's paired verdict, with Holm's correction over all of them: one family."""
    open_rows = [(env, r) for _, env, rows in tables for r in rows if r.diffs.size]
    keep = verdicts.holm([verdicts.t_test_p(r.diffs) for _, r in open_rows])
    for (env, r), significant in zip(open_rows, keep):
        bounds = reward_bounds(select(runs, env=env))
        margin = _margin(runs, env)
        if not np.isfinite(margin):
            r.verdict = "n/a: the env has no return scale to set a margin by"
            continue
        names = (r.label, r.compared)
        verdict = verdicts.paired(r.diffs, margin, names, significant, largest=difference_bounds(bounds)[1])
        r.verdict, r.kind = f"{verdict.text} (family of {len(open_rows)})", verdict.kind


def _table_text(rows: list[Row], bounds: tuple[float, float]) -> str:
    header = ["weights", "family", "bits per weight", "reward [95% CI]", "n", "vs", "difference, paired [95% CI]"]
    return markdown(
        [*header, "verdict"],
        [
            [
                f"`{r.label}`",
                r.family,
                f"{r.bits_per_weight:g} (nominal)" if r.family in ("integer", "fp32") else fmt(r.bits_per_weight, 2),
                shown(r.reward, bounds=bounds),
                str(r.reward.n_runs),
                f"`{r.compared}`" if r.compared else "",
                shown(r.diff, bounds=difference_bounds(bounds)) if r.diff is not None else "",
                r.verdict,
            ]
            for r in rows
        ],
    )


def tally(tables: list[tuple[str, str, list[Row]]], names: list[str]) -> str:
    """Per format, how its comparisons read across the series and tasks."""
    kinds = {"higher": "higher than its integer", "equivalent": "equivalent", "lower": "lower"}
    kinds["underpowered"] = "underpowered"
    counts = {name: dict.fromkeys(kinds, 0) for name in names}
    for _, _, rows in tables:
        for r in rows:
            if r.label in counts and r.kind in kinds:
                counts[r.label][r.kind] += 1
    found = [[f"`{n}`", *(str(c[k]) for k in kinds)] for n, c in counts.items() if any(c.values())]
    return markdown(["format", *kinds.values()], found)


def figure(tables: list[tuple[str, str, list[Row]]], out: Path, bounds: dict[str, tuple[float, float]]) -> Path:
    """Reward against bits per weight for each series and task: one line per format family (the
    mean over seeds with its 95% interval, clipped to the env's return range `bounds[env]`), fp32 dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = min(len(tables), PANELS_A_ROW)
    nrows = -(-len(tables) // ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.6 * nrows), squeeze=False)
    axes = grid.ravel()
    for ax in axes[len(tables) :]:
        ax.set_visible(False)
    for ax, (series, env, rows) in zip(axes, tables):
        families = sorted({r.family for r in rows} - {"fp32"})
        for name in families:
            points = sorted((r for r in rows if r.family == name), key=lambda r: r.bits_per_weight)
            x = [r.bits_per_weight for r in points]
            y = [r.reward.estimate for r in points]
            low, high = bounds.get(env, (-np.inf, np.inf))
            err = np.array(
                [
                    [r.reward.estimate - max(r.reward.low, low), min(r.reward.high, high) - r.reward.estimate]
                    for r in points
                ]
            ).T
            ax.errorbar(x, y, yerr=np.nan_to_num(err), marker="o", capsize=3, label=name)
        for r in rows:
            if r.family == "fp32":
                ax.axhline(r.reward.estimate, color="grey", linestyle="--", label=f"fp32 (n={r.reward.n_runs})")
        ax.set_xlabel("bits per weight (scales counted; integers nominal)")
        ax.set_title(f"{series} on {env}", fontsize=9)
    for row in grid:
        row[0].set_ylabel("reward (mean over seeds, 95% t-interval)")
    axes[0].legend(fontsize=7)
    return save_figure(fig, out, FIGURE, dpi=100)


def section(inputs: Inputs) -> str:
    """Each series and task of the formats sweep, the verdict count per format, and the figure."""
    runs = records(inputs)
    ints, names = options(inputs.sweeps)
    tables = [
        (series, env, rows)
        for algo, env in pairs(runs)
        for series in series_of(runs, algo, env)
        if (rows := table(runs, series, env, ints, names))
    ]
    decide(tables, runs)
    blocks = [
        f"**{series}** on {env}:\n\n" + _table_text(rows, reward_bounds(select(runs, env=env)))
        for series, env, rows in tables
    ]
    if tables:
        blocks.append("Read across the tasks, each format against its integer:\n\n" + tally(tables, names))
        if inputs.figures:
            figure(tables, inputs.folder / FIGURES, {env: reward_bounds(select(runs, env=env)) for _, env, _ in tables})
        blocks.append(f"![formats]({FIGURES}/{FIGURE})")
    body = "\n\n".join(blocks) if blocks else "Not run yet."
    heading = "## Beyond QuaRL: FP8, MX and NF4 policies\n\n" + note("formats", ints=facts.widths(ints))
    return heading + "\n\n" + body + "\n\n" + actorq_formats.section(inputs)
