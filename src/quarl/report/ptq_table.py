"""DOC"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
import yaml

from quarl.collate import published, trainings
from quarl.collate.stats import Interval, seed_interval
from quarl.report.records import REASONS, TABLE_ENVS, _not_learned, _of, _values, select, series_of
from quarl.report.text import FRACTION, _markdown, fmt, inside, note, shown

NO_REASON = "no reason established yet"

PUBLISHED_COLUMN = {ours: theirs for theirs, ours in published.COLUMNS.items()}  # "E_int8 (%)" -> "e_int8_pct"


@dataclass
class Row:
    algo: str
    env: str
    quantity: str
    published: float
    ours: Interval
    agreement: Optional[Interval]
    verdict: str


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
            rows += _ptq_rows(_of(base, series, env), series, env, pub, reasons)
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
    measured = {
        "fp32": (fp32, "reward_mean", 1.0, None),
        "fp16": (fp16, "reward_mean", 1.0, fp16),
        "E_fp16 (%)": (fp16, "rel_error", 100.0, None),
        "int8": (int8, "reward_mean", 1.0, int8),
        "E_int8 (%)": (int8, "rel_error", 100.0, None),
    }
    rows = []
    for quantity, (frame, column, scale, agreeing) in measured.items():
        value = float(pub[PUBLISHED_COLUMN[quantity]])
        ours = seed_interval(_values(frame, column, scale)) if not frame.empty else seed_interval([])
        agreement = seed_interval(_values(agreeing, "action_agreement")) if agreeing is not None else None
        verdict = _verdict(algo, env, quantity, value, ours, fp32, frame, reasons)
        rows.append(Row(series, env, quantity, value, ours, agreement, verdict))
    return rows


def _verdict(
    algo: str,
    env: str,
    quantity: str,
    value: float,
    ours: Interval,
    fp32: pd.DataFrame,
    frame: pd.DataFrame,
    reasons: dict[str, str],
) -> str:
    if ours.n_runs == 0:
        if quantity.startswith("E_") and not frame.empty:
            return "n/a: every fp32 reward too close to 0 for E"
        return "not run yet"
    why = [r for r in (_not_learned(fp32, env), reasons.get(f"{algo}/{env}/{quantity}")) if r]
    if not ours.has_ci:
        return "inconclusive: one seed, no interval to judge by" + (f" ({'; '.join(why)})" if why else "")
    if not inside(value, ours):
        return "disagrees: " + ("; ".join(why) if why else NO_REASON)
    half, allowed = (ours.high - ours.low) / 2, _resolution(quantity, frame, value)
    if half <= allowed:
        return "agrees (published value inside the interval)"
    return f"inconclusive: the published value is inside an interval of ±{half:.3g}, wider than {allowed:.3g}" + (
        f" ({'; '.join(why)})" if why else "; more seeds would decide"
    )


RESOLUTION = 0.05  # an interval decides only when its half-width is within 5% of the scale that matters


def _resolution(quantity: str, frame: pd.DataFrame, published_value: float) -> float:
    """The widest half-width at which an interval can confirm a published value: 5 points for E
    (in %), else 5% of the env's return scale (of the published value where no scale is recorded)."""
    if quantity.startswith("E_"):
        return 100 * RESOLUTION
    scales = _values(frame, "env.return_scale") if "env.return_scale" in frame.columns else np.empty(0)
    scale = float(scales[0]) if scales.size else abs(published_value)
    return RESOLUTION * scale


def _ptq_section(runs: pd.DataFrame, folder: Path) -> str:
    """The PTQ table against the published rows (reasons from `folder`/reasons.yaml), then the fp32 policies."""
    reasons_file = folder / REASONS
    reasons = yaml.safe_load(reasons_file.read_text()) or {} if reasons_file.exists() else {}
    table = ptq_table(runs, reasons)
    section = (
        "## PTQ table, classic-control rows\n\n"
        + note("table")
        + "\n\n"
        + _markdown(
            ["algo", "env", "quantity", "published", "quarl mean [95% CI]", "n", "action agreement", "verdict"],
            [
                [
                    r.algo,
                    r.env,
                    r.quantity,
                    fmt(r.published),
                    shown(r.ours),
                    str(r.ours.n_runs),
                    shown(r.agreement, 3, FRACTION) if r.agreement is not None else "",
                    r.verdict,
                ]
                for r in table
            ],
        )
    )
    kept = _kept(runs)
    return section + ("\n\n### The fp32 policies\n\n" + note("kept") + "\n\n" + kept if kept else "")


def _kept(runs: pd.DataFrame) -> str:
    fp32 = select(runs, quant="fp32", train__keep_best=True)
    if fp32.empty or "kept_step" not in fp32.columns:
        return ""
    rows = []
    for (algo, env), group in fp32.groupby(["series" if "series" in fp32.columns else "algo", "env"], sort=True):
        group = group.sort_values("seed")
        steps = ", ".join(f"{int(s)}" if not pd.isna(s) else "?" for s in group["kept_step"])
        rewards = ", ".join(fmt(r, 1) for r in group["reward_mean"])
        rows.append([algo, env, str(len(group)), steps, rewards, _not_learned(group, env) or "none"])
    return _markdown(
        ["algo", "env", "seeds", "kept step per seed", "study fp32 reward per seed", "flagged: fp32 did not learn"],
        rows,
    )
