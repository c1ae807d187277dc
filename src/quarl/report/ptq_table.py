"""The report's PTQ table: the paper's classic-control rows (fp32, fp16, E_fp16, int8, E_int8) beside
quarl's mean over seeds, its Student-t interval clipped to what the quantity can take (and marked
where clipped), the per-seed values, and a verdict with its power (`quarl.collate.verdicts`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd

from quarl.collate import published, trainings, verdicts
from quarl.collate.bounds import return_range
from quarl.collate.stats import Interval, seed_interval
from quarl.report.campaign import (
    TABLE_ENVS,
    UNLEARNED_E,
    Inputs,
    below_threshold,
    e_bounds,
    learned,
    of_series,
    reward_bounds,
    select,
    series_flag,
    series_of,
    values,
)
from quarl.report.text import FRACTION, UNBOUNDED, fmt, markdown, note, per_seed, shown

NO_REASON = "no reason established yet"

PUBLISHED_COLUMN = {ours: theirs for theirs, ours in published.COLUMNS.items()}  # "E_int8 (%)" -> "e_int8_pct"


@dataclass
class Row:
    """One published quantity of one series and env, against quarl's seeds."""

    algo: str
    env: str
    quantity: str
    published: float
    ours: Interval
    agreement: Optional[Interval]
    verdict: str
    bounds: tuple[float, float] = UNBOUNDED  # what the quantity can take: its interval is clipped to it
    seeds: str = ""  # the per-seed values, up to MAX_SHOWN seeds
    flag: str = ""  # the series' weak fp32 baseline ('† fp32 not learned in 1 of 5 seeds')


def ptq_table(runs: pd.DataFrame, reasons: dict[str, str]) -> list[Row]:
    """The published classic-control rows of the PTQ table against the campaign's records."""
    base = select(runs, train__keep_best=True)
    rows: list[Row] = []
    for _, pub in published.table().iterrows():
        env = next((e for e in TABLE_ENVS if published.bare_name(e) == pub["key"]), None)
        if env is None:
            continue
        algo = str(pub["algo"])
        for series in series_of(base, algo, env):
            rows += _ptq_rows(of_series(base, series, env), series, env, pub, reasons)
    return rows


def int8_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """The PTQ table's int8 records: symmetric per-tensor 8-bit weights, biases in fp32."""
    return select(
        cells,
        quant="ptq",
        quant__bits=8,
        quant__scheme="symmetric",
        quant__granularity="per_tensor",
        quant__quantize_bias=False,
    )


def _ptq_rows(cells: pd.DataFrame, series: str, env: str, pub: pd.Series, reasons: dict[str, str]) -> list[Row]:
    """The published quantities of one series (a training of an algo; its label in the table's algo
    column) on `env` against its records; `reasons` are looked up by the plain algo name."""
    algo = trainings.base_algo(series)
    fp32 = select(cells, quant="fp32")
    fp16 = select(cells, quant="fp16")
    int8 = int8_cells(cells)
    reward = reward_bounds(cells) if "env.id" in cells.columns else _table_range(env)
    measured = {
        "fp32": (fp32, "reward_mean", 1.0, None, reward),
        "fp16": (fp16, "reward_mean", 1.0, fp16, reward),
        "E_fp16 (%)": (fp16, "rel_error", 100.0, None, e_bounds(fp16, reward)),
        "int8": (int8, "reward_mean", 1.0, int8, reward),
        "E_int8 (%)": (int8, "rel_error", 100.0, None, e_bounds(int8, reward)),
    }
    flag = series_flag(fp32)
    rows = []
    for quantity, (frame, column, scale, agreeing, bounds) in measured.items():
        value = float(pub[PUBLISHED_COLUMN[quantity]])
        frame, unlearned = learned(frame) if quantity.startswith("E_") else (frame, 0)
        seeds = values(frame, column, scale) if not frame.empty else np.empty(0)
        ours = seed_interval(seeds)
        agreement = seed_interval(values(agreeing, "action_agreement")) if agreeing is not None else None
        verdict = published_verdict(algo, env, quantity, value, seeds, fp32, frame, reasons)
        if unlearned:
            verdict += f" ({unlearned} seed{'s' * (unlearned > 1)} left out: {UNLEARNED_E})"
        rows.append(Row(series, env, quantity, value, ours, agreement, verdict, bounds, per_seed(seeds), flag))
    return rows


def _table_range(env: str) -> tuple[float, float]:
    """The return range of a PTQ-table env named by quarl's name (records without an env id)."""
    found = return_range(TABLE_ENVS.get(env))
    return (found.low, found.high) if found is not None else UNBOUNDED


def published_verdict(
    algo: str,
    env: str,
    quantity: str,
    value: float,
    seeds: np.ndarray,
    fp32: pd.DataFrame,
    frame: pd.DataFrame,
    reasons: dict[str, str],
) -> str:
    """`quarl.collate.verdicts.compare` of the seeds against the published value within the
    resolution, with the reasons the records or reasons.yaml give where it does not agree."""
    if seeds.size == 0:
        if quantity.startswith("E_") and not frame.empty:
            return "n/a: every fp32 reward too close to 0 for E"
        return "not run yet"
    unit = " points" if quantity.startswith("E_") else ""
    verdict = verdicts.compare(seeds, value, _resolution(quantity, frame, value), unit)
    if verdict.kind == "agrees":
        return verdict.text
    why = [r for r in (below_threshold(fp32, env), reasons.get(f"{algo}/{env}/{quantity}")) if r]
    if verdict.kind == "disagrees":
        return verdict.text + ": " + ("; ".join(why) if why else NO_REASON)
    return verdict.text + (f" ({'; '.join(why)})" if why else "")


RESOLUTION = verdicts.SCALE_MARGIN  # the margin: 5 points of E, else 5% of the env's return scale


def _resolution(quantity: str, frame: pd.DataFrame, published_value: float) -> float:
    """The widest half-width at which an interval can confirm a published value: 5 points for E
    (in %), else 5% of the env's return scale (of the published value where no scale is recorded)."""
    if quantity.startswith("E_"):
        return verdicts.E_MARGIN
    scales = values(frame, "env.return_scale") if "env.return_scale" in frame.columns else np.empty(0)
    scale = float(scales[0]) if scales.size else abs(published_value)
    return RESOLUTION * scale


def section(inputs: Inputs) -> str:
    """The PTQ table against the published rows (reasons from reasons.yaml), then the fp32 policies."""
    runs = inputs.runs
    table = ptq_table(runs, inputs.reasons)
    section = (
        "## PTQ table, classic-control rows\n\n"
        + note("table")
        + "\n\n"
        + markdown(
            [
                "algo",
                "env",
                "quantity",
                "published",
                "quarl mean [95% CI]",
                "n",
                "per seed",
                "action agreement",
                "verdict",
            ],
            [
                [
                    r.algo + (f" {r.flag.split(' ', 1)[0]}" if r.flag else ""),
                    r.env,
                    r.quantity,
                    fmt(r.published),
                    shown(r.ours, bounds=r.bounds),
                    str(r.ours.n_runs),
                    r.seeds,
                    shown(r.agreement, 3, FRACTION) if r.agreement is not None else "",
                    r.verdict,
                ]
                for r in table
            ],
        )
        + _flag_legend(table)
    )
    kept = _kept(runs)
    return section + ("\n\n### The fp32 policies\n\n" + note("kept") + "\n\n" + kept if kept else "")


def _flag_legend(table: list[Row]) -> str:
    """The legend of the markers after an algo: which series' fp32 baselines are weak."""
    flagged = dict.fromkeys(f"{r.algo} on {r.env}: {r.flag}" for r in table if r.flag)
    return "\n\n" + "\n".join(f"- {line}" for line in flagged) if flagged else ""


def _kept(runs: pd.DataFrame) -> str:
    fp32 = select(runs, quant="fp32", train__keep_best=True)
    if fp32.empty or "kept_step" not in fp32.columns:
        return ""
    rows = []
    for (algo, env), group in fp32.groupby(["series" if "series" in fp32.columns else "algo", "env"], sort=True):
        group = group.sort_values("seed")
        steps = ", ".join(f"{int(s)}" if not pd.isna(s) else "?" for s in group["kept_step"])
        rewards = ", ".join(fmt(r, 1) for r in group["reward_mean"])
        rows.append([algo, env, str(len(group)), steps, rewards, below_threshold(group, env) or "none"])
    return markdown(
        ["algo", "env", "seeds", "kept step per seed", "study fp32 reward per seed", "flagged: fp32 did not learn"],
        rows,
    )
