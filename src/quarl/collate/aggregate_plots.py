"""The plots over every cell at once: the aggregate of the normalised score 1 - E per method and
bits (IQM and mean, stratified bootstrap) and the heat map of E over algo x env x bits."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from quarl.collate import stats
from quarl.collate.frame import Results, bit_label, is_float
from quarl.collate.plots import (
    CHAR_IN,
    FLOAT_MARKERS,
    HEAT_LABEL_PT,
    LINE_IN,
    MAX_WIDTH_IN,
    band,
    bit_scale,
    bits_axis,
    legend_below,
    new_figure,
    styled,
    wrapped,
    x_positions,
    yerr,
)
from quarl.collate.trainings import title


def aggregate_table(study: Results, **kw: object) -> pd.DataFrame:
    """IQM and mean of the normalised score 1 - E across tasks (algo, env) per (method, bits), with
    stratified-bootstrap intervals over seeds. Columns: method, bits, statistic, estimate, low,
    high, n_runs, n_tasks, and weak_fp32: the marks and count of the tasks whose fp32 baseline is weak
    in some seed ('† ‡ in 2 tasks', `Results.flag`), '' where none is."""
    q = study.quantized().dropna(subset=["e"])
    rows = []
    for (method, bits), group in q.groupby(["method", "bits"], sort=True):
        tasks = group.groupby(["algo", "env"])
        strata = [1.0 - g["e"].to_numpy(float) for _, g in tasks]
        weak = [flag for flag in (study.flag(algo, env) for algo, env in tasks.groups) if flag]
        marks = " ".join(sorted({flag.split(" ", 1)[0] for flag in weak}))
        weak_fp32 = f"{marks} in {len(weak)} task{'s' * (len(weak) > 1)}" if weak else ""
        for name, fn in stats.STATISTICS.items():
            ci = stats.stratified_bootstrap(strata, fn, **kw)  # type: ignore[arg-type]
            rows.append(
                {
                    "method": method,
                    "bits": int(bits),
                    "statistic": name,
                    "estimate": ci.estimate,
                    "low": ci.low,
                    "high": ci.high,
                    "n_runs": ci.n_runs,
                    "n_tasks": ci.n_tasks,
                    "weak_fp32": weak_fp32,
                }
            )
    columns = ["method", "bits", "statistic", "estimate", "low", "high", "n_runs", "n_tasks", "weak_fp32"]
    return pd.DataFrame(rows, columns=columns)


def _counts(rows: pd.DataFrame) -> str:
    """'4 tasks, 8 runs' (or ranges) for the legend of the aggregate plot."""

    def span(col: str) -> str:
        lo, hi = int(rows[col].min()), int(rows[col].max())
        return str(lo) if lo == hi else f"{lo}-{hi}"

    tasks, runs = span("n_tasks"), span("n_runs")
    weak = sorted({w for w in rows.get("weak_fp32", pd.Series(dtype=str)) if isinstance(w, str) and w})
    fp32 = f"; weak fp32: {weak[-1]}" if weak else ""  # the widest count of any bit width
    return f"{tasks} task{'' if tasks == '1' else 's'}, {runs} run{'' if runs == '1' else 's'}{fp32}"


def aggregate(table: pd.DataFrame, quantizer: str = "") -> Figure:
    """Two panels (IQM, mean) of the normalised score vs bits, a line per method, fp16 as a marker;
    `quantizer` (scheme, granularity, bias of the methods shown) goes into the title."""
    methods = sorted(m for m in table["method"].unique() if not is_float(m))
    palette = sns.color_palette("colorblind", max(len(methods), 1) + 2)
    drawn = [m for m in FLOAT_MARKERS if m in set(table["method"])]
    floats = {16: drawn[-1]} if drawn else {}  # the tick names the last float drawn, as in sweet_spot
    floats[32] = "fp32"
    scale = bit_scale([*table["bits"], 32])
    with styled():
        fig, axes = new_figure(9.0, 4.9, 1, 2, sharey=True)
        for ax, statistic in zip(axes[0], stats.STATISTICS):
            t = table[table["statistic"] == statistic]
            for j, method in enumerate(methods):
                s = t[t["method"] == method].sort_values("bits").rename(columns={"estimate": "mean"})
                x = x_positions(scale, s["bits"])
                ax.plot(x, s["mean"], marker="o", color=palette[j], label=f"{method} ({_counts(s)})")
                band(ax, x, s, palette[j])
            for method, marker in FLOAT_MARKERS.items():
                s = t[t["method"] == method].rename(columns={"estimate": "mean"})
                if not s.empty:
                    ax.errorbar(
                        [scale[16]],
                        [s.iloc[0]["mean"]],
                        yerr=yerr(s.iloc[0]),
                        marker=marker,
                        color="0.25",
                        linestyle="none",
                        capsize=4,
                        markersize=7,
                        label=f"{method} ({_counts(s)})",
                    )
            ax.axhline(1.0, color="0.4", linestyle="--", linewidth=1, label="fp32 (= 1)")
            ax.set_title(statistic, fontsize=10)
            bits_axis(ax, scale, floats)
        axes[0, 0].set_ylabel("normalised score 1 − E (fp32 = 1)")
        has_ci = table["low"].notna().any()
        ci = "shaded: 95% stratified-bootstrap CI over seeds" if has_ci else "no confidence interval: one seed per task"
        legend_below(
            fig, axes[0, 1], "method (tasks, runs per point; † fp32 not learned, ‡ not solved); E n/a left out"
        )
        fig.suptitle(
            wrapped(
                f"Normalised score across tasks (algo × env) per bit width; {ci}"
                + (f"\n{quantizer}" if quantizer else ""),
                fig,
                10,
            ),
            fontsize=10,
        )
    return fig


def _wrap(label: str, width: int = 12) -> str:
    """A heat-map column label on short lines: 'ptq (scheme=quarl_code) 4' -> 'ptq\nscheme=quarl_code\n4 bits'."""
    import textwrap

    head, _, bits = label.rpartition(" ")
    if not head or not bits.isdigit():
        return label
    parts = head.replace(" (", "\n").rstrip(")").replace(", ", "\n").split("\n")
    lines = [line for p in parts for line in (p.replace("=", "=\n").split("\n") if len(p) > width else [p])]
    return "\n".join(
        [*(w for line in lines for w in textwrap.wrap(line, width, break_long_words=False) or [line]), f"{bits} bits"]
    )


def _column_labels(order: list[str]) -> tuple[list[str], int, float, float]:
    """Heat-map column labels that never overlap: wrapped on short lines and level, each column as
    wide as its longest line, while the figure stays within MAX_WIDTH_IN; else one line each, turned
    upright, in narrow columns. Returns the labels, their rotation, a column's width and the labels'
    height (inches)."""
    lines = [_wrap(c) for c in order]
    longest = max((len(part) for label in lines for part in label.split("\n")), default=1)
    column = max(0.8, CHAR_IN * longest + 0.15)
    if column * len(order) + 3.4 <= MAX_WIDTH_IN:
        return lines, 0, column, LINE_IN * max((label.count("\n") + 1 for label in lines), default=1)
    return list(order), 90, max(0.42, LINE_IN + 0.15), CHAR_IN * max((len(c) for c in order), default=1)


def heatmap(study: Results) -> Figure:
    """E (%) over (algo, env) rows and (method, bits) columns, mean over the seeds with an E,
    annotated; cells whose records have no E (n/a) say so, cells never run are grey."""
    q = study.quantized()
    marks = {(a, e): study.flag(a, e).split(" ", 1)[0] for a, e in set(zip(q["algo"], q["env"]))}
    q = q.assign(
        task=[f"{title(a)} / {e}{f' {marks[(a, e)]}' if marks[(a, e)] else ''}" for a, e in zip(q["algo"], q["env"])],
        column=[bit_label(m, b) for m, b in zip(q["method"], q["bits"])],
        float_last=q["method"].map(is_float).astype(int),
    )
    order = q.sort_values(["float_last", "method", "bits"])["column"].drop_duplicates().tolist()
    ran = q.pivot_table(index="task", columns="column", values="reward", aggfunc="size").reindex(columns=order)
    grid = (100 * q.pivot_table(index="task", columns="column", values="e", aggfunc="mean", dropna=False)).reindex(
        index=ran.index, columns=order
    )
    undefined = ran.notna() & grid.isna()
    counts = q.dropna(subset=["e"]).groupby("column")["seed"].nunique()
    labels, rotation, column_in, label_in = _column_labels(order)
    with styled("white"):
        width = 3.4 + column_in * max(len(order), 1)
        height = 2.4 + 0.42 * max(len(grid), 1) + label_in
        fig, axes = new_figure(max(width, 6.0), max(height, 3.0))
        ax = axes[0, 0]
        if grid.isna().all().all():
            ax.text(0.5, 0.5, "no quantized records with an E", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            return fig
        vmax = float(np.nanmax(np.abs(grid.to_numpy()))) if np.isfinite(grid.to_numpy()).any() else 1.0
        vmax = min(max(vmax, 1.0), 100.0)
        text = grid.map(lambda v: "" if pd.isna(v) else f"{v:.1f}").where(~undefined, "n/a")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PendingDeprecationWarning)  # seaborn 0.13 calls cmap.set_bad
            sns.heatmap(
                grid,
                ax=ax,
                cmap="vlag",
                center=0,
                vmin=-vmax,
                vmax=vmax,
                annot=text.to_numpy(),
                fmt="",
                annot_kws={"fontsize": 8},
                linewidths=0.5,
                linecolor="white",
                xticklabels=labels,
                cbar_kws={"label": "E (%): reward lost vs fp32" + (" (scale clipped at ±100)" if vmax >= 100 else "")},
            )
        for i, j in zip(*np.nonzero(undefined.to_numpy())):  # seaborn leaves NaN cells blank: say n/a there
            ax.text(j + 0.5, i + 0.5, "n/a", ha="center", va="center", fontsize=8, color="0.3")
        ax.set_facecolor("0.9")  # cells that were not run, or whose E is n/a
        ax.set_xlabel("method and weight bits")
        ax.set_ylabel("algorithm / environment")
        ax.tick_params(axis="x", rotation=rotation, labelsize=HEAT_LABEL_PT)
        ax.tick_params(axis="y", rotation=0)
        seeds = (
            "0"
            if counts.empty
            else f"{counts.min()}"
            if counts.min() == counts.max()
            else f"{counts.min()}-{counts.max()}"
        )
        gaps = "; grey: not run" if (grid.isna() & ~undefined).to_numpy().any() else ""
        gaps += "; † / ‡: fp32 not learned / not solved in some seed" if any(marks.values()) else ""
        gaps += "; n/a: E undefined (fp32 reward too close to 0)" if undefined.to_numpy().any() else ""
        ax.set_title(
            f"Relative error E (%) per algorithm, env and bit width\n{study.quantizers()}\n"
            f"(mean over {seeds} seeds{gaps})",
            fontsize=10,
        )
    return fig
