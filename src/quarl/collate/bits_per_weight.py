"""Reward against bits per weight, for stores that hold number-format cells (`quant.format`, issue 57):
a panel per algorithm on each env, a line per integer setting (at its nominal bits) and per format
family (FP8, MX float, MX integer, NVFP4, NF4: each format at its recorded bits per weight, block
scales counted), the mean over seeds with its 95% t-interval clipped to the env's return range, and
fp32 as a dashed line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from quarl.collate import plots, stats
from quarl.collate.frame import INTEGER, Results, is_float
from quarl.collate.trainings import title
from quarl.config.keys import slug

PANELS_A_ROW = 3


def family(number_format: str) -> str:
    """A format's family, a line of the figure: integer, FP8, MX float, MX integer, NVFP4 or NF4."""
    if number_format == INTEGER:
        return "integer"
    if number_format.startswith("fp8_"):
        return "FP8"
    if number_format.startswith("mxint"):
        return "MX integer"
    if number_format.startswith("mx"):
        return "MX float"
    return number_format.upper()


def points(study: Results, env: str) -> pd.DataFrame:
    """Per (algo, method, bits) on `env`: the reward's mean, interval and n over seeds, its x (bits per
    weight, or the nominal bits of an integer cell) and its line ('ptq integer', 'ptq MX float')."""
    seeds = study.seeds[(study.seeds["env"] == env) & ~study.seeds["method"].map(is_float)]
    cell = ["algo", "method", "bits"]
    out = stats.summarise(seeds, cell, "reward")
    first = seeds.groupby(cell, dropna=False).agg(
        x=("bits_per_weight", "mean"), number_format=("number_format", "first")
    )
    out = out.merge(first.reset_index(), on=cell)
    out["x"] = out["x"].fillna(out["bits"].astype(float))
    kinds = out["method"].str.split(" ").str[0]
    out["line"] = [
        method if fmt == INTEGER else f"{kind} {family(fmt)}"
        for method, kind, fmt in zip(out["method"], kinds, out["number_format"])
    ]
    bounds = plots.value_range(study, env, "reward")
    return stats.clip(out, *bounds) if bounds is not None else out


def has_formats(study: Results) -> bool:
    """Whether the study holds a number-format cell."""
    return bool((study.seeds.get("number_format", pd.Series(dtype=str)) != INTEGER).any())


def figure(study: Results, env: str) -> Figure:
    """The panels of one env (module docstring)."""
    cells = points(study, env)
    algos = sorted(cells["algo"].unique())
    base = stats.summarise(study.baselines[study.baselines["env"] == env], ["algo"], "fp32")
    ncols = min(len(algos), PANELS_A_ROW)
    nrows = -(-len(algos) // ncols)
    with plots.styled():
        fig, grid = plots.new_figure(4.4 * ncols, 3.8 * nrows + 0.6, nrows, ncols)
        axes = grid.ravel()
        for ax in axes[len(algos) :]:
            ax.set_visible(False)
        for ax, algo in zip(axes, algos):
            mine = cells[cells["algo"] == algo]
            for line, s in mine.groupby("line", sort=True):
                s = s.sort_values("x")
                err = np.nan_to_num(np.vstack([s["mean"] - s["low"], s["high"] - s["mean"]]).astype(float))
                ax.errorbar(s["x"], s["mean"], yerr=err, marker="o", capsize=3, label=line)
            fp32 = base[base["algo"] == algo]
            if len(fp32):
                n = int(fp32["n"].iloc[0])
                ax.axhline(float(fp32["mean"].iloc[0]), color="0.4", linestyle="--", label=f"fp32 (n={n})")
            ax.set_title(title(algo), fontsize=9)
            ax.set_xlabel("bits per weight (scales counted; integers nominal)")
            ax.legend(fontsize=7)
        for row in grid:
            row[0].set_ylabel("reward (mean over seeds, 95% t-interval)")
        counts = plots.n_text(cells["n"], "bars")
        env_id = study.env_ids().get(env, env)
        fig.suptitle(f"{env_id}: reward vs bits per weight\n{counts}{plots.clip_text(study, env)}", fontsize=9.5)
    return fig


def write(study: Results, out: Path) -> list[Path]:
    """A figure per env that holds format cells, and the plotted points (`bits_per_weight/points.csv`)."""
    folder = out / "bits_per_weight"
    envs = sorted(study.seeds.loc[study.seeds["number_format"] != INTEGER, "env"].unique())
    written: list[Path] = []
    for env in envs:
        fig = figure(study, env)
        try:
            written += plots.save(fig, folder / slug(env))
        finally:
            fig.clear()
    table = pd.concat([points(study, env).assign(env=env) for env in envs], ignore_index=True)
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / "points.csv", index=False)
    return written + [folder / "points.csv"]
