"""Figures from a `Study`: sweet spots (reward vs bits), the aggregate across tasks, the E heat map.

Figures are built on matplotlib's object API with the Agg canvas (no pyplot, no GUI backend, so
collation runs headless and inside notebooks alike) and styled with seaborn. Every figure states
how many runs stand behind its points; where a point has a single seed it has no interval and
the figure says so instead of drawing one.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Iterator

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from quarl.collate import stats
from quarl.collate.frame import FLOAT_BITS, Study, bit_label

FLOAT_MARKERS = {"fp16": "D", "bf16": "s"}
LINESTYLES = ["-", ":", "-.", (0, (5, 1, 1, 1, 1, 1))]  # "--" is kept for fp32
CI_TEXT = "shaded: 95% bootstrap CI across seeds"


@contextlib.contextmanager
def styled(style: str = "whitegrid") -> Iterator[None]:
    """A seaborn style (whitegrid by default) and a readable font size, for the figures made inside."""
    with sns.axes_style(style), sns.plotting_context("notebook", font_scale=0.85), matplotlib.rc_context(
        {"savefig.dpi": 150, "figure.dpi": 100, "legend.fontsize": 8.5, "legend.title_fontsize": 9}
    ):
        yield


def new_figure(width: float, height: float, nrows: int = 1, ncols: int = 1, **kw: object) -> tuple[Figure, np.ndarray]:
    """A figure on the Agg canvas with constrained layout, and its axes as a 2-D array."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def save(fig: Figure, stem: Path) -> list[Path]:
    """`stem`.png and `stem`.pdf; returns the paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".pdf")]
    for path in paths:
        fig.savefig(path)
    return paths


def bits_axis(ax: Axes, positions: list[int], has_float: dict[int, str]) -> None:
    """A log2 bit axis with a tick per bit width present; 16 and 32 say fp16 / fp32 when drawn."""
    ax.set_xscale("log", base=2)
    ticks = sorted(set(positions))
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t}\n({has_float[t]})" if t in has_float else str(t) for t in ticks])
    ax.minorticks_off()
    if ticks:
        ax.set_xlim(min(ticks) / 1.25, max(ticks) * 1.25)
    ax.set_xlabel("weight bit width (bits)")


def n_text(counts: pd.Series) -> str:
    """'n = 3 seeds per point', 'n = 1-3 seeds per point', with what that means for the intervals."""
    counts = counts.dropna().astype(int)
    if counts.empty:
        return "no runs"
    lo, hi = int(counts.min()), int(counts.max())
    span = f"{lo}" if lo == hi else f"{lo}-{hi}"
    unit = "seed" if hi == 1 else "seeds"
    if hi == 1:
        return "n = 1 seed per point: no confidence interval"
    if lo == 1:
        return f"n = {span} {unit} per point; {CI_TEXT} (none where n = 1)"
    return f"n = {span} {unit} per point; {CI_TEXT}"


def _band(ax: Axes, x: np.ndarray, s: pd.DataFrame, color: object) -> None:
    if s["low"].notna().any():
        ax.fill_between(x, s["low"].to_numpy(float), s["high"].to_numpy(float), color=color, alpha=0.2, linewidth=0)


def _yerr(s: pd.Series) -> np.ndarray | None:
    if pd.isna(s["low"]):
        return None
    return np.array([[s["mean"] - s["low"]], [s["high"] - s["mean"]]])


def sweet_spot(study: Study, env: str, algos: list[str] | None = None) -> Figure:
    """Mean reward vs bits for one env: a line per method (and per algorithm when several), fp16
    as a marker at 16 bits, fp32 as a dashed line (with its band) and a star at 32 bits."""
    algos = algos or sorted(study.seeds.loc[study.seeds["env"] == env, "algo"].unique())
    seeds = study.seeds[(study.seeds["env"] == env) & study.seeds["algo"].isin(algos)]
    base = study.baselines[(study.baselines["env"] == env) & study.baselines["algo"].isin(algos)]
    cells = stats.summarise(seeds[seeds["method"] != "fp32"], ["algo", "method", "bits"], "reward")
    fp32 = stats.summarise(base, ["algo"], "fp32")
    methods = sorted(m for m in cells["method"].unique() if m not in FLOAT_BITS)
    several = len(algos) > 1
    palette = sns.color_palette("colorblind", max(len(algos) if several else len(methods), 1) + 2)
    env_id = study.env_ids().get(env, env)
    with styled():
        fig, axes = new_figure(7.6, 4.4)
        ax = axes[0, 0]
        positions: list[int] = []
        floats: dict[int, str] = {}
        for i, algo in enumerate(algos):
            algo_color = palette[i] if several else "0.25"
            for j, method in enumerate(methods):
                s = cells[(cells["algo"] == algo) & (cells["method"] == method)].sort_values("bits")
                if s.empty:
                    continue
                color = palette[i] if several else palette[j]
                style = LINESTYLES[j % len(LINESTYLES)] if several else "-"
                x = s["bits"].to_numpy(float)
                label = f"{algo.upper()} {method}" if several else method
                ax.plot(x, s["mean"], marker="o", color=color, linestyle=style, label=label)
                _band(ax, x, s, color)
                positions += [int(b) for b in s["bits"]]
            for method, marker in FLOAT_MARKERS.items():
                s = cells[(cells["algo"] == algo) & (cells["method"] == method)]
                if s.empty:
                    continue
                row = s.iloc[0]
                ax.errorbar([16], [row["mean"]], yerr=_yerr(row), marker=marker, markersize=7, color=algo_color,
                            linestyle="none", capsize=4, label=f"{algo.upper()} {method}" if several else method)
                positions.append(16)
                floats[16] = method
            f = fp32[fp32["algo"] == algo]
            if not f.empty:
                row = f.iloc[0]
                ax.axhline(row["mean"], color=algo_color, linestyle="--", linewidth=1.2,
                           label=f"{algo.upper()} fp32" if several else "fp32 (baseline)")
                if pd.notna(row["low"]):
                    ax.axhspan(row["low"], row["high"], color=algo_color, alpha=0.08, linewidth=0,
                               label=f"{algo.upper()} fp32 95% CI" if several else "fp32 95% CI")
                ax.plot([32], [row["mean"]], marker="*", markersize=11, color=algo_color, linestyle="none")
                positions.append(32)
                floats[32] = "fp32"
        bits_axis(ax, positions or [32], floats)
        ax.set_ylabel("mean episode reward (over seeds)")
        who = " vs ".join(a.upper() for a in algos) if several else algos[0].upper() if algos else ""
        counts = pd.concat([cells["n"], fp32["n"]])
        lacking = [a.upper() for a in algos if a not in set(fp32["algo"])]
        missing = f"\nno fp32 baseline in the selection for {', '.join(lacking)}" if lacking else ""
        ax.set_title(f"{who} on {env_id}: reward vs weight bit width\n{n_text(counts)}{missing}", fontsize=10)
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                      title="method" if not several else "algorithm, method")
    return fig


def aggregate_table(study: Study, **kw: object) -> pd.DataFrame:
    """IQM and mean of the normalised score 1 - E across tasks (algo, env) per (method, bits), with
    stratified-bootstrap intervals over seeds. Columns: method, bits, statistic, estimate, low,
    high, n_runs, n_tasks."""
    q = study.quantized().dropna(subset=["e"])
    rows = []
    for (method, bits), group in q.groupby(["method", "bits"], sort=True):
        strata = [1.0 - g["e"].to_numpy(float) for _, g in group.groupby(["algo", "env"])]
        for name, fn in stats.STATISTICS.items():
            ci = stats.stratified_bootstrap(strata, fn, **kw)  # type: ignore[arg-type]
            rows.append({"method": method, "bits": int(bits), "statistic": name, "estimate": ci.estimate,
                         "low": ci.low, "high": ci.high, "n_runs": ci.n_runs, "n_tasks": ci.n_tasks})
    return pd.DataFrame(rows, columns=["method", "bits", "statistic", "estimate", "low", "high", "n_runs", "n_tasks"])


def _counts(rows: pd.DataFrame) -> str:
    """'4 tasks, 8 runs' (or ranges) for the legend of the aggregate plot."""
    def span(col: str) -> str:
        lo, hi = int(rows[col].min()), int(rows[col].max())
        return str(lo) if lo == hi else f"{lo}-{hi}"
    tasks, runs = span("n_tasks"), span("n_runs")
    return f"{tasks} task{'' if tasks == '1' else 's'}, {runs} run{'' if runs == '1' else 's'}"


def aggregate(table: pd.DataFrame) -> Figure:
    """Two panels (IQM, mean) of the normalised score vs bits, a line per method, fp16 as a marker."""
    methods = sorted(m for m in table["method"].unique() if m not in FLOAT_BITS)
    palette = sns.color_palette("colorblind", max(len(methods), 1) + 2)
    with styled():
        fig, axes = new_figure(9.0, 4.2, 1, 2, sharey=True)
        positions: list[int] = []
        floats: dict[int, str] = {}
        for ax, statistic in zip(axes[0], stats.STATISTICS):
            t = table[table["statistic"] == statistic]
            for j, method in enumerate(methods):
                s = t[t["method"] == method].sort_values("bits").rename(columns={"estimate": "mean"})
                x = s["bits"].to_numpy(float)
                ax.plot(x, s["mean"], marker="o", color=palette[j], label=f"{method} ({_counts(s)})")
                _band(ax, x, s, palette[j])
                positions += [int(b) for b in s["bits"]]
            for method, marker in FLOAT_MARKERS.items():
                s = t[t["method"] == method].rename(columns={"estimate": "mean"})
                if not s.empty:
                    ax.errorbar([16], [s.iloc[0]["mean"]], yerr=_yerr(s.iloc[0]), marker=marker, color="0.25",
                                linestyle="none", capsize=4, markersize=7, label=f"{method} ({_counts(s)})")
                    positions.append(16)
                    floats[16] = method
            ax.axhline(1.0, color="0.4", linestyle="--", linewidth=1, label="fp32 (= 1)")
            ax.set_title(statistic, fontsize=10)
        positions.append(32)
        floats[32] = "fp32"
        for ax in axes[0]:
            bits_axis(ax, positions, floats)
        axes[0, 0].set_ylabel("normalised score 1 − E (fp32 = 1)")
        has_ci = table["low"].notna().any()
        ci = "shaded: 95% stratified-bootstrap CI over seeds" if has_ci else "no confidence interval: one seed per task"
        fig.suptitle(f"Normalised score across tasks (algo × env) per bit width; {ci}", fontsize=10)
        handles, labels = axes[0, 1].get_legend_handles_labels()
        if handles:
            axes[0, 1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                              title="method (per point)")
    return fig


def heatmap(study: Study) -> Figure:
    """E (%) over (algo, env) rows and (method, bits) columns, mean over seeds, annotated."""
    q = study.quantized().dropna(subset=["e"])
    q = q.assign(task=q["algo"].str.upper() + " / " + q["env"], column=[bit_label(m, b) for m, b in zip(q["method"], q["bits"])],
                 float_last=q["method"].isin(list(FLOAT_BITS)).astype(int))
    order = q.sort_values(["float_last", "method", "bits"])["column"].drop_duplicates().tolist()
    grid = (100 * q.pivot_table(index="task", columns="column", values="e", aggfunc="mean")).reindex(columns=order)
    counts = q.groupby("column")["seed"].nunique()
    with styled("white"):
        width = 2.8 + 0.75 * max(len(order), 1)
        height = 1.6 + 0.42 * max(len(grid), 1)
        fig, axes = new_figure(max(width, 6.0), max(height, 3.0))
        ax = axes[0, 0]
        if grid.empty:
            ax.text(0.5, 0.5, "no quantized records with an E", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            return fig
        vmax = float(np.nanmax(np.abs(grid.to_numpy()))) if np.isfinite(grid.to_numpy()).any() else 1.0
        vmax = min(max(vmax, 1.0), 100.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PendingDeprecationWarning)  # seaborn 0.13 calls cmap.set_bad
            sns.heatmap(grid, ax=ax, cmap="vlag", center=0, vmin=-vmax, vmax=vmax, annot=True, fmt=".1f",
                        annot_kws={"fontsize": 8}, linewidths=0.5, linecolor="white",
                        cbar_kws={"label": "E (%): reward lost vs fp32" + (" (scale clipped at ±100)" if vmax >= 100 else "")})
        ax.set_facecolor("0.9")  # cells that were not run
        ax.set_xlabel("method and weight bits")
        ax.set_ylabel("algorithm / environment")
        ax.tick_params(axis="x", rotation=0)
        ax.tick_params(axis="y", rotation=0)
        seeds = f"{counts.min()}" if counts.min() == counts.max() else f"{counts.min()}-{counts.max()}"
        gaps = "; grey: not run" if grid.isna().to_numpy().any() else ""
        ax.set_title(f"Relative error E (%) per algorithm, env and bit width\n(mean over {seeds} seeds{gaps})",
                     fontsize=10)
    return fig


def message_figure(text: str, title: str) -> Figure:
    """A figure that says why there is nothing to draw (instead of an empty plot)."""
    with styled():
        fig, axes = new_figure(6.0, 2.5)
        ax = axes[0, 0]
        ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes)
        ax.set_title(title, fontsize=10)
        ax.set_axis_off()
    return fig
