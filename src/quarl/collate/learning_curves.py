"""Training curves of a study's policies: return against env steps, one line per seed.

The store keeps the curve of every training quarl ran with the record that first used the policy
(the fp32 baseline; a QAT record for its own policy): one row per training episode in `curves`.
One panel per (algo, env), fp32 and each QAT bit width in its own colour, so a user sees whether a
DQN collapsed at the end of its budget or how QAT's curve compares with fp32's. ActorQ's curves
(return against wall time) are in the ActorQ outputs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns

from quarl.collate import plots
from quarl.collate.frame import Results
from quarl.collate.trainings import stem
from quarl.store.sqlite import Store

SMOOTH = 20  # episodes in the moving average drawn over each curve


def training_curves(study: Results) -> pd.DataFrame:
    """Curve points of the study's fp32 and QAT trainings, with algo, env, seed and a label."""
    if study.store is None:
        return pd.DataFrame()
    records = study.done[study.done["quant"].isin(["fp32", "qat"])]
    if records.empty:
        return pd.DataFrame()
    curves = Store(study.store, read_only=True).curves()
    columns = ["cell_key", "algo", "env", "seed", "quant", "quant.bits"]
    keyed = records[[c for c in columns if c in records.columns]].copy()
    bits = pd.to_numeric(keyed.get("quant.bits", pd.Series(np.nan, index=keyed.index)), errors="coerce")
    keyed["label"] = [f"QAT {b:.0f}-bit" if q == "qat" else "fp32" for q, b in zip(keyed["quant"], bits)]
    return curves.merge(keyed, on="cell_key")


def curves_figure(points: pd.DataFrame, algo: str, env: str):
    """Return vs env steps for one (algo, env): thin lines per seed, a moving average on top."""
    fig, axes = plots.new_figure(7.0, 3.6)
    ax = axes.flat[0]
    labels = sorted(points["label"].unique(), key=lambda s: (s != "fp32", s))
    for colour, label in zip(sns.color_palette(n_colors=len(labels)), labels):
        group = points[points["label"] == label]
        seeds = sorted(group["seed"].unique())
        for i, seed in enumerate(seeds):
            run = group[group["seed"] == seed].sort_values("step")
            smooth = run["reward"].rolling(SMOOTH, min_periods=1).mean()
            ax.plot(run["step"], run["reward"], color=colour, alpha=0.15, linewidth=0.6)
            ax.plot(
                run["step"],
                smooth,
                color=colour,
                linewidth=1.4,
                label=f"{label} ({len(seeds)} seeds)" if i == 0 else None,
            )
    ax.set_xlabel("env steps")
    ax.set_ylabel(f"training episode return ({SMOOTH}-episode mean)")
    ax.set_title(f"{algo} on {env}: training curves, one line per seed")
    ax.legend(fontsize=8, loc="best")
    return fig


def write_training_curves(study: Results, out: Path) -> list[Path]:
    """`curves/<algo>_<env>.png|pdf` for every (algo, env) with stored training curves."""
    points = training_curves(study)
    written: list[Path] = []
    if points.empty:
        return written
    for (algo, env), group in points.groupby(["algo", "env"], sort=True):
        fig = curves_figure(group, str(algo), str(env))
        try:
            written += plots.save(fig, out / "curves" / stem(str(algo), str(env)))
        finally:
            fig.clear()
    return written
