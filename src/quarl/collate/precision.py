"""Which precision matters for a policy: PTQ reward and action agreement over (weight bits x
activation bits) and over input bits, per (algo, env), from records of `quant.act_bits` /
`quant.input_bits` sweeps (`precision/`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from quarl.collate import plots, stats, tables
from quarl.collate.frame import Results
from quarl.collate.ptq_keys import effective_quant_columns
from quarl.collate.trainings import stem, title

CAPTION = (
    "PTQ with static activation and input ranges (quarl.quantize.calibration). Each cell: mean over seeds of "
    "the reward "
    "and, in brackets, of the action agreement with the fp32 policy; 32 = not quantized. Weights x activations: "
    "records with fp32 inputs; inputs: every activation width, weights at each width shown."
)
KEYS = ["algo", "env", "seed", "weight_bits", "act_bits", "input_bits"]


def precision_records(study: Results) -> pd.DataFrame:
    """One row per finished uniform PTQ record (no `quant.layer_bits`) with its weight, activation
    and input bits; records written before PTQ quantized activations (no `quant.input_bits`) count as
    32/32. Empty unless some record quantizes activations or inputs."""
    done = study.done[study.done["quant"] == "ptq"]
    if done.empty or "quant.input_bits" not in done.columns:
        return pd.DataFrame(columns=[*KEYS, "reward", "agreement", "e"])
    done = effective_quant_columns(done)
    act = pd.to_numeric(done["quant.act_bits"], errors="coerce")
    inp = pd.to_numeric(done["quant.input_bits"], errors="coerce")
    uniform = (
        done["quant.layer_bits"].isna() if "quant.layer_bits" in done.columns else pd.Series(True, index=done.index)
    )
    rows = pd.DataFrame(
        {
            "algo": done["algo"],
            "env": done["env"],
            "seed": done["seed"],
            "weight_bits": done["bits"].astype(int),
            "act_bits": act.astype(int),
            "input_bits": inp.astype(int),
            "reward": done["reward_mean"],
            "agreement": done["action_agreement"],
            "e": done["e"],
        }
    )[uniform]
    if ((rows["act_bits"] == 32) & (rows["input_bits"] == 32)).all():
        return rows.iloc[0:0]
    return rows


def _cell(reward: float, agreement: float) -> str:
    if np.isnan(reward):
        return ""
    return f"{reward:.1f}" + ("" if np.isnan(agreement) else f" ({agreement:.3f})")


def _grid(per: pd.DataFrame, rows: str, columns: str) -> pd.DataFrame:
    """`rows` x `columns` table of 'reward (agreement)' cells."""
    table = per.pivot_table(  # dropna=False: records without action agreement still give their rewards
        index=rows, columns=columns, values=["reward", "agreement"], aggfunc="mean", dropna=False
    )
    out = pd.DataFrame(
        {
            f"{columns}={c}": [_cell(table["reward"].loc[r, c], table["agreement"].loc[r, c]) for r in table.index]
            for c in table["reward"].columns
        }
    )
    out.insert(0, rows, table.index)
    return out


def summary(rows: pd.DataFrame, study: Results | None = None) -> pd.DataFrame:
    """Mean, Student-t interval and n over seeds of reward, agreement and E per (algo, env, bits...);
    with `study`, reward intervals clipped to each env's return range (`plots.value_range`)."""
    by = [k for k in KEYS if k != "seed"]
    reward = stats.summarise(rows, by, "reward")
    out = (plots.clip_by_env(reward, study, "reward") if study is not None else reward).rename(
        columns={"mean": "reward", "low": "reward_low", "high": "reward_high", "n": "seeds"}
    )
    for value in ("agreement", "e"):
        part = stats.summarise(rows, by, value)[[*by, "mean"]].rename(columns={"mean": value})
        out = out.merge(part, on=by)
    return out


def _figure(per: pd.DataFrame, title: str) -> Figure:
    """Action agreement heat maps: weight x activation bits (fp32 inputs) and input x activation bits."""
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    panels = [("weight_bits", per[per["input_bits"] == 32]), ("input_bits", per)]
    for ax, (rows, part) in zip(fig.subplots(1, 2), panels):
        grid = part.pivot_table(index=rows, columns="act_bits", values="agreement", aggfunc="mean")
        if grid.empty:
            ax.set_axis_off()
            continue
        image = ax.imshow(grid.to_numpy(dtype=float), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
        ax.set_yticks(range(grid.shape[0]), [str(r) for r in grid.index])
        ax.set_xlabel("activation bits")
        ax.set_ylabel(rows.replace("_", " "))
        for (i, j), value in np.ndenumerate(grid.to_numpy(dtype=float)):
            if not np.isnan(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", color="white" if value < 0.6 else "black")
        fig.colorbar(image, ax=ax, label="action agreement")
    fig.suptitle(title)
    return fig


def write_precision(study: Results, out: Path) -> list[Path]:
    """`precision/<algo>_<env>.md|csv|tex` (reward and agreement grids) and `.png|pdf` (agreement
    heat maps), and `precision/summary.csv` (every setting with its interval); [] without records
    that quantize activations or inputs."""
    rows = precision_records(study)
    if rows.empty:
        return []
    folder = out / "precision"
    folder.mkdir(parents=True, exist_ok=True)
    table = summary(rows, study)
    table.to_csv(folder / "summary.csv", index=False)
    written = [folder / "summary.csv"]
    for (algo, env), per in rows.groupby(["algo", "env"]):
        per = per.groupby(KEYS, as_index=False)[["reward", "agreement", "e"]].mean()  # one value per seed
        sections = [
            (
                "weight bits x activation bits (inputs fp32)",
                _grid(per[per["input_bits"] == 32], "weight_bits", "act_bits"),
            )
        ]
        for bits in sorted(per["weight_bits"].unique()):
            part = per[per["weight_bits"] == bits]
            if part["input_bits"].nunique() > 1:
                sections.append(
                    (f"input bits x activation bits (weights {bits} bits)", _grid(part, "input_bits", "act_bits"))
                )
        path = folder / stem(algo, env)
        heading = f"{title(algo)} on {env}: which precision matters (reward (action agreement))"
        written += tables.write_sections(sections, path, heading, CAPTION, column="grid")
        fig = _figure(per, f"{algo} on {env}: action agreement with the fp32 policy")
        try:
            written += plots.save(fig, path)
        finally:
            fig.clear()
    return written
