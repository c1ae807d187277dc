"""Figures from a `Results`: sweet spots (reward vs bits), the aggregate across tasks, the E heat map.

Figures are built on matplotlib's object API with the Agg canvas (no pyplot, no GUI backend, so
collation runs headless and inside notebooks alike) and styled with seaborn. Every figure states
how many runs stand behind its points; where a point has a single seed it has no interval and
the figure says so instead of drawing one.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterable, Iterator

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from quarl.collate import stats
from quarl.collate.frame import Results, is_float
from quarl.collate.trainings import title

FLOAT_MARKERS = {"fp16": "D", "bf16": "s"}
LINESTYLES = ["-", ":", "-.", (0, (5, 1, 1, 1, 1, 1))]  # "--" is kept for fp32
CI_TEXT = "95% Student-t CI across seeds"


@contextlib.contextmanager
def styled(style: str = "whitegrid") -> Iterator[None]:
    """A seaborn style (whitegrid by default) and a readable font size, for the figures made inside."""
    with (
        sns.axes_style(style),
        sns.plotting_context("notebook", font_scale=0.85),
        matplotlib.rc_context(
            {"savefig.dpi": 150, "figure.dpi": 100, "legend.fontsize": 8.5, "legend.title_fontsize": 9}
        ),
    ):
        yield


def new_figure(width: float, height: float, nrows: int = 1, ncols: int = 1, **kw: Any) -> tuple[Figure, np.ndarray]:
    """A figure on the Agg canvas with constrained layout, and its axes as a 2-D array."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


FIGURE_FORMATS = ("png", "pdf")  # every figure is saved in each, unless `formats` names fewer
_formats: ContextVar[tuple[str, ...]] = ContextVar("formats", default=FIGURE_FORMATS)


@contextlib.contextmanager
def formats(chosen: tuple[str, ...]) -> Iterator[None]:
    """Figures saved inside are written in the `chosen` formats only (of FIGURE_FORMATS)."""
    token = _formats.set(chosen)
    try:
        yield
    finally:
        _formats.reset(token)


def save(fig: Figure, stem: Path) -> list[Path]:
    """`stem`.png and `stem`.pdf (or the `formats` chosen around it); returns the paths. The layout is computed
    once, for the first."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(f".{f}") for f in _formats.get()]
    for path in paths:
        fig.savefig(path, bbox_inches="tight", pad_inches=0.1)  # nothing drawn past the edges is cut off
        fig.set_layout_engine("none")  # keeps the positions constrained layout just computed
    return paths


def bit_scale(bits: Iterable[int]) -> dict[int, float]:
    """x position of every bit width: evenly spaced in order (2, 3, ..., 8 side by side, then 16 and
    32 one step further), so neighbouring widths never crowd each other as on a log axis."""
    return {b: float(i) for i, b in enumerate(sorted({int(b) for b in bits}))}


def bits_axis(ax: Axes, scale: dict[int, float], has_float: dict[int, str]) -> None:
    """Ticks at `scale`'s positions labelled with the bit width; 16 and 32 say fp16 / fp32 when drawn."""
    ticks = sorted(scale)
    ax.set_xticks([scale[t] for t in ticks])
    ax.set_xticklabels([f"{t}\n({has_float[t]})" if t in has_float else str(t) for t in ticks])
    ax.minorticks_off()
    if ticks:
        ax.set_xlim(-0.5, len(ticks) - 0.5)
    ax.set_xlabel("weight bit width (bits; evenly spaced)")


def x_positions(scale: dict[int, float], bits: Iterable[int]) -> np.ndarray:
    """Where each width in `bits` sits on the x axis (`scale`: width -> position)."""
    return np.array([scale[int(b)] for b in bits], dtype=float)


def n_text(counts: pd.Series, how: str = "shaded") -> str:
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
        return f"n = {span} {unit} per point; {how}: {CI_TEXT} (none where n = 1)"
    return f"n = {span} {unit} per point; {how}: {CI_TEXT}"


def band(ax: Axes, x: np.ndarray, s: pd.DataFrame, color: object, alpha: float = 0.2) -> None:
    """Shade the interval of `s` (its low and high columns) around a line, where it has one."""
    if s["low"].notna().any():
        ax.fill_between(x, s["low"].to_numpy(float), s["high"].to_numpy(float), color=color, alpha=alpha, linewidth=0)


def yerr(s: pd.Series) -> np.ndarray | None:
    """The error bar of one row (mean, low, high) for `errorbar`, None without an interval."""
    if pd.isna(s["low"]):
        return None
    return np.array([[s["mean"] - s["low"]], [s["high"] - s["mean"]]])


def _series(
    ax: Axes,
    cells: pd.DataFrame,
    base: pd.DataFrame,
    algos: list[str],
    methods: list[str],
    scale: dict[int, float],
    ylabel: str,
    several: bool,
    flags: dict[str, str] | None = None,
) -> None:
    """One panel of a value vs bits: a line per (algo, method) with its interval, fp16/bf16 as
    markers at 16 and the fp32 value as a dashed line with its interval as an error bar at 32.
    One algorithm: intervals are shaded bands. Several: capped error bars, each series nudged
    sideways, since overlapping bands hide each other's lines. An algo in `flags` (its weak fp32
    baseline, `Results.flag`) is drawn with hollow markers and its label carries the flag's marker."""
    flags = flags or {}
    palette = sns.color_palette("colorblind", max(len(algos) if several else len(methods), 1) + 2)
    floats: dict[int, str] = {}
    series = len(algos) * max(len(methods), 1)
    nudge = (lambda k: 0.28 * (k / max(series - 1, 1) - 0.5)) if several and series > 1 else (lambda k: 0.0)
    for i, algo in enumerate(algos):
        algo_color = palette[i] if several else "0.25"
        offset = nudge(i * max(len(methods), 1) + (max(len(methods), 1) - 1) / 2)
        flag = flags.get(algo, "")
        face: dict[str, Any] = {"markerfacecolor": "none"} if flag else {}  # hollow: the fp32 baseline is weak
        mark = f" {flag.split(' ', 1)[0]}" if flag else ""
        for j, method in enumerate(methods):
            s = cells[(cells["algo"] == algo) & (cells["method"] == method)].sort_values("bits")
            if s.empty:
                continue
            color = palette[i] if several else palette[j]
            style = LINESTYLES[j % len(LINESTYLES)] if several else "-"
            x = x_positions(scale, s["bits"])
            label = (f"{title(algo)} {method}" if len(methods) > 1 else title(algo)) if several else method
            label += mark
            if several:
                x = x + nudge(i * len(methods) + j)
                ax.errorbar(
                    x,
                    s["mean"],
                    yerr=_yerrs(s),
                    marker="o",
                    markersize=4.5,
                    color=color,
                    linestyle=style,
                    capsize=2.5,
                    elinewidth=0.9,
                    label=label,
                    **face,
                )
            else:
                ax.plot(x, s["mean"], marker="o", color=color, linestyle=style, label=label, **face)
                band(ax, x, s, color)
        for method, marker in FLOAT_MARKERS.items():
            s = cells[(cells["algo"] == algo) & (cells["method"] == method)]
            if s.empty:
                continue
            row = s.iloc[0]
            ax.errorbar(
                [scale[16] + offset],
                [row["mean"]],
                yerr=yerr(row),
                marker=marker,
                markersize=7,
                color=algo_color,
                linestyle="none",
                capsize=4,
                label=(f"{title(algo)} {method}" if several else method) + mark,
                **face,
            )
            floats[16] = method
        f = base[base["algo"] == algo]
        if not f.empty and 32 in scale:
            row = f.iloc[0]
            ax.axhline(
                row["mean"],
                color=algo_color,
                linestyle="--",
                linewidth=1.0,
                label=f"{title(algo)} fp32" if several else "fp32 (baseline)",
            )
            ax.errorbar(
                [scale[32] + offset],
                [row["mean"]],
                yerr=yerr(row),
                marker="*",
                markersize=11,
                color=algo_color,
                linestyle="none",
                capsize=4,
                **face,
            )
            floats[32] = "fp32"
    bits_axis(ax, scale, floats)
    ax.set_ylabel(ylabel)


def _yerrs(s: pd.DataFrame) -> np.ndarray | None:
    """Error-bar lengths (2 x n) from `low`/`high`, zero where a point has no interval."""
    if s["low"].isna().all():
        return None
    low = (s["mean"] - s["low"]).fillna(0).to_numpy(float)
    high = (s["high"] - s["mean"]).fillna(0).to_numpy(float)
    return np.vstack([low, high])


MAX_WIDTH_IN = 14.0  # a figure grows up to this width for its legend, then the legend takes more rows


def legend_below(fig: Figure, ax: Axes, title: str) -> None:
    """The legend in columns under the plot (never beside it, where it took 40% of the width), as
    wide as the figure allows: up to three columns, fewer where long labels would not fit; the
    figure widens (up to MAX_WIDTH_IN) or grows taller so that no label is cut off."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for ncols in range(min(3, max(1, -(-len(labels) // 3))), 0, -1):
        legend = fig.legend(handles, labels, loc="outside lower center", ncols=ncols, frameon=False, title=title)
        box = legend.get_window_extent(renderer)
        needed = box.width / fig.dpi + 0.3
        if needed <= max(fig.get_figwidth(), MAX_WIDTH_IN) or ncols == 1:
            break
        legend.remove()
    fig.set_figwidth(max(fig.get_figwidth(), needed))
    tall = box.height / fig.dpi
    fig.set_figheight(fig.get_figheight() + max(0.0, tall - 0.6))  # the plot keeps its height above a long legend


def wrapped(text: str, fig: Figure, fontsize: float) -> str:
    """`text` with each line wrapped to the figure's width (a title must not run past its edges)."""
    import textwrap

    chars = max(30, int(fig.get_figwidth() * 72 / (0.55 * fontsize)))
    return "\n".join(w for line in text.split("\n") for w in (textwrap.wrap(line, chars) or [""]))


AGREEMENT_RANGE = (0.0, 1.0)  # action agreement is a fraction: its intervals are clipped to it


def _sweet_spot_data(study: Results, env: str, algos: list[str], value: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mean, interval and n of `value` per (algo, method, bits) on `env`, and of the fp32 reward per
    algo; intervals clipped to what the value can be (`value_range`)."""
    seeds = study.seeds[(study.seeds["env"] == env) & study.seeds["algo"].isin(algos)]
    base = study.baselines[(study.baselines["env"] == env) & study.baselines["algo"].isin(algos)]
    cells = stats.summarise(seeds[seeds["method"] != "fp32"], ["algo", "method", "bits"], value)
    cells, fp32 = cells[cells["n"] > 0], stats.summarise(base, ["algo"], "fp32")
    bounds = value_range(study, env, value)
    if bounds is not None:
        cells = stats.clip(cells, *bounds)
    reward = value_range(study, env, "reward")
    return cells, stats.clip(fp32, *reward) if reward is not None else fp32


def value_range(study: Results, env: str, value: str) -> tuple[float, float] | None:
    """What `value` can be on `env`: the env's return range for a reward (where its definition
    bounds it, `quarl.collate.bounds`), [0, 1] for action agreement, else None."""
    if value in ("reward", "fp32"):
        found = study.return_ranges().get(env)
        return (found.low, found.high) if found is not None else None
    return AGREEMENT_RANGE if value == "action_agreement" else None


def clip_by_env(
    summary: pd.DataFrame, study: Results, value: str, columns: tuple[str, str] = ("low", "high")
) -> pd.DataFrame:
    """`summary`'s interval `columns` (one row per env and more) clipped to what `value` can be on each
    row's env (`value_range`)."""
    out = summary.copy()
    for env in out["env"].unique():
        bounds = value_range(study, env, value)
        if bounds is not None:
            rows = out["env"] == env
            out.loc[rows, list(columns)] = out.loc[rows, list(columns)].astype(float).clip(*bounds)
    return out


def clip_text(study: Results, env: str) -> str:
    """A title's line 'reward intervals clipped to the env's return range [0, 500]' (with its line break)
    where the env has one, else ''."""
    found = study.return_ranges().get(env)
    return f"\nreward intervals clipped to the env's return range {found.text()}" if found is not None else ""


def flag_text(flags: dict[str, str]) -> str:
    """A title's line naming each weak fp32 baseline drawn with hollow markers ('' where none)."""
    if not flags:
        return ""
    return "\nhollow markers: " + "; ".join(f"{title(a)} {f}" for a, f in flags.items())


def sweet_spot(study: Results, env: str, algos: list[str] | None = None, methods: list[str] | None = None) -> Figure:
    """Mean reward vs bits for one env: a line per method (of `methods`, default all) and per
    algorithm when several, fp16 as a marker at 16 bits, fp32 as a dashed line with its interval at
    32 bits. The title names the quantizer (scheme, granularity, bias) and how many seeds stand
    behind each point."""
    algos = algos or sorted(study.seeds.loc[study.seeds["env"] == env, "algo"].unique())
    cells, fp32 = _sweet_spot_data(study, env, algos, "reward")
    methods = methods or sorted(m for m in cells["method"].unique() if not is_float(m))
    several = len(algos) > 1
    env_id = study.env_ids().get(env, env)
    with styled():
        fig, axes = new_figure(8.0 if several else 6.4, 5.8 if several else 4.8)
        ax = axes[0, 0]
        scale = bit_scale([*cells["bits"], *([32] if len(fp32) else [])] or [32])
        flags = {a: f for a in algos if (f := study.flag(a, env))}
        _series(ax, cells, fp32, algos, methods, scale, "mean episode reward (over seeds)", several, flags)
        who = " vs ".join(title(a) for a in algos) if several else title(algos[0]) if algos else ""
        counts = pd.concat([cells["n"], fp32["n"]])
        lacking = [title(a) for a in algos if a not in set(fp32["algo"])]
        missing = f"\nno fp32 baseline in the selection for {', '.join(lacking)}" if lacking else ""
        legend_below(fig, ax, "algorithm, method" if several else "method")
        ax.set_title(
            wrapped(
                f"{who} on {env_id}: reward vs weight bit width\n{study.quantizers(methods, algos)}\n"
                f"{n_text(counts, 'bars' if several else 'shaded')}{clip_text(study, env)}{missing}"
                f"{flag_text(flags)}",
                fig,
                9.5,
            ),
            fontsize=9.5,
        )
    return fig


def agreement(study: Results, env: str, algo: str) -> Figure:
    """Reward vs bits (left) beside action agreement with the fp32 policy vs bits (right) for one
    algorithm and env, each with its Student-t interval across seeds."""
    rewards, fp32 = _sweet_spot_data(study, env, [algo], "reward")
    agree, _ = _sweet_spot_data(study, env, [algo], "action_agreement")
    methods = sorted(m for m in rewards["method"].unique() if not is_float(m))
    env_id = study.env_ids().get(env, env)
    with styled():
        fig, axes = new_figure(10.0, 4.6, 1, 2)
        scale = bit_scale([*rewards["bits"], *agree["bits"], 32])
        flags = {algo: flag} if (flag := study.flag(algo, env)) else {}
        _series(axes[0, 0], rewards, fp32, [algo], methods, scale, "mean episode reward (over seeds)", False, flags)
        ones = pd.DataFrame({"algo": [algo], "mean": [1.0], "low": [np.nan], "high": [np.nan], "n": [0]})
        _series(
            axes[0, 1], agree, ones, [algo], methods, scale, "agreement with fp32\n(fraction of states)", False, flags
        )
        axes[0, 0].set_title("reward", fontsize=10)
        axes[0, 1].set_title("actions: same as fp32 on the states fp32 visits", fontsize=10)
        axes[0, 1].set_ylim(top=1.02)
        legend_below(fig, axes[0, 0], "method")
        fig.suptitle(
            wrapped(
                f"{title(algo)} on {env_id}: reward and action agreement vs weight bit width\n"
                f"{study.quantizers(methods, [algo])}; {n_text(pd.concat([rewards['n'], agree['n']]))}"
                f"{clip_text(study, env)}{flag_text(flags)}",
                fig,
                10,
            ),
            fontsize=10,
        )
    return fig


HEAT_LABEL_PT = 8  # font size of the heat map's column labels
CHAR_IN = 0.6 * HEAT_LABEL_PT / 72  # width of one character of those labels, in inches
LINE_IN = 1.25 * HEAT_LABEL_PT / 72  # height of one line of them
