"""The report's PTQ table rows under the published conditions: each classic-control pair's int8 cell
with quarl's defaults (rl-zoo3's network, every weight int8), with the network the published agent
had (zoo=sb2), and with that network under TFLite's rule (weights under 1024 elements left in float,
quant.min_elements=1024), each against the published E_int8."""

from __future__ import annotations

import numpy as np
import pandas as pd

from quarl.collate import published
from quarl.collate.stats import seed_interval
from quarl.report.campaign import UNLEARNED_E, e_bounds, learned, reward_bounds, select, series_flag, values
from quarl.report.ptq_table import NO_REASON, int8_cells, published_verdict
from quarl.report.text import FRACTION, fmt, markdown, shown

PAIRS = (("dqn", "cartpole"), ("a2c", "cartpole"), ("ppo", "cartpole"), ("ddpg", "mountaincar_continuous"))
TFLITE_RULE = 1024  # kWeightsMinNumElementsDefault in TensorFlow Lite's weight quantization
CONDITIONS = (  # (name, which records, quant.min_elements)
    ("quarl's defaults: rl-zoo3's network, every weight int8", "defaults", 0),
    ("the published network (zoo=sb2), every weight int8", "published", 0),
    ("the published network under TFLite's rule: weights under 1024 elements in float", "published", TFLITE_RULE),
)


def _rule(frame: pd.DataFrame, min_elements: int) -> pd.DataFrame:
    """The records quantized with `min_elements` (a record written before the setting: 0)."""
    column = frame["quant.min_elements"] if "quant.min_elements" in frame.columns else pd.Series(0, index=frame.index)
    return frame[pd.to_numeric(column, errors="coerce").fillna(0) == min_elements]


def _int8(runs: pd.DataFrame, algo: str, env: str, min_elements: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(fp32 records, int8 records) of a pair: the PTQ table's int8 (symmetric, per tensor, fp32 biases)."""
    cells = select(runs, algo=algo, env=env, train__keep_best=True)
    fp32 = select(cells, quant="fp32")
    int8 = int8_cells(cells)
    return fp32, _rule(int8, min_elements)


NA_E = "E is n/a there, its fp32 reward too close to 0 (the fp32 column is over the same seeds)"


def _seeds_with_e(fp32: pd.DataFrame, int8: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`fp32` and `int8` restricted to the seeds whose int8 record has an E (E is n/a where the fp32
    reward is too close to 0), so that every column of a row stands on the same seeds."""
    if int8.empty or "rel_error" not in int8.columns:
        return fp32, int8
    seeds = set(int8.loc[pd.to_numeric(int8["rel_error"], errors="coerce").notna(), "seed"])
    return fp32[fp32["seed"].isin(seeds)], int8[int8["seed"].isin(seeds)]


def _quantized_share(int8: pd.DataFrame) -> str:
    """The int8 policy's bytes as a share of fp32's: 1.00 means no weight was quantized."""
    if int8.empty:
        return ""
    ratio = pd.to_numeric(int8["policy_bytes"], errors="coerce") / pd.to_numeric(int8["fp32_bytes"], errors="coerce")
    return fmt(float(ratio.mean()))


def rows(defaults: pd.DataFrame, published_runs: pd.DataFrame, reasons: dict[str, str] | None = None) -> list[dict]:
    """One row per pair and condition: fp32 and int8 reward, E_int8, agreement, bytes, verdict (quarl's
    defaults with the reasons of `reasons.yaml`; the published network's with what its rows measure)."""
    out: list[dict] = []
    for algo, env in PAIRS:
        paper = published.lookup(algo, env)
        if paper is None:
            continue
        pair: list[dict] = []
        for name, which, min_elements in CONDITIONS:
            fp32, int8 = _int8(defaults if which == "defaults" else published_runs, algo, env, min_elements)
            flag = series_flag(fp32)  # of every seed: one left out below is still marked
            seeds = set(int8["seed"]) if not int8.empty else set()
            fp32, int8 = _seeds_with_e(fp32, int8)  # one n per row: every column over the seeds E is over
            na = len(seeds) - (int8["seed"].nunique() if not int8.empty else 0)
            int8, unlearned = learned(int8)
            fp32 = fp32[fp32["seed"].isin(set(int8["seed"]))] if unlearned else fp32
            errors = values(int8, "rel_error", 100.0) if not int8.empty else np.empty(0)
            error = seed_interval(errors)
            value = float(paper["e_int8_pct"])
            pair.append(
                {
                    "algo": algo,
                    "env": env,
                    "condition": name,
                    "fp32": seed_interval(values(fp32, "reward_mean")) if not fp32.empty else seed_interval([]),
                    "int8": seed_interval(values(int8, "reward_mean")) if not int8.empty else seed_interval([]),
                    "E": error,
                    "published": value,
                    "agreement": seed_interval(values(int8, "action_agreement")) if not int8.empty else None,
                    "bytes": _quantized_share(int8),
                    "bounds": reward_bounds(int8),
                    "e_bounds": e_bounds(int8, reward_bounds(int8)),
                    "flag": flag,
                    "verdict": published_verdict(
                        algo,
                        env,
                        "E_int8 (%)",
                        value,
                        errors,
                        fp32,
                        int8,
                        (reasons or {}) if which == "defaults" else {},
                    )
                    + (f" ({unlearned} seed{'s' * (unlearned > 1)} left out: {UNLEARNED_E})" if unlearned else "")
                    + (f" ({na} seed{'s' * (na > 1)} left out: {NA_E})" if na else ""),
                }
            )
        out += _explained(pair)
    return out


UNQUANTIZED = "1.00"  # an int8 policy with fp32's bytes: no weight was quantized


def _explained(pair: list[dict]) -> list[dict]:
    """The published network's full-int8 disagreement read from the rule's row: where TFLite's rule
    quantizes none of its weights, the published int8 column was the fp32 policy."""
    full, rule = pair[1], pair[2]
    if rule["bytes"] == UNQUANTIZED and full["verdict"].startswith("disagrees: " + NO_REASON):
        full["verdict"] = (
            "disagrees: every weight is int8 here, while TFLite's rule, which made the published column, "
            "quantizes none of this network's weights (the next row)"
        )
    return pair


def finding(table: list[dict]) -> str:
    """What the measurement says, pair by pair, from the rows: where the published conditions
    reproduce the published E_int8 and quarl's defaults do not, and where no weight was quantized."""
    lines = []
    for algo, env in PAIRS:
        mine = [r for r in table if r["algo"] == algo and r["env"] == env]
        if not mine or all(r["E"].n_runs == 0 for r in mine):
            continue
        parts = [
            f"{r['condition'].split(':')[0]}: E_int8 {fmt(r['E'].estimate)}% (n = {r['E'].n_runs})"
            for r in mine
            if r["E"].n_runs
        ]
        text = f"**{algo} on {env}** (published {fmt(mine[0]['published'])}%): " + "; ".join(parts) + "."
        rule = mine[-1]
        if rule["bytes"] == UNQUANTIZED:
            text += (
                " Under TFLite's rule no weight of this network is quantized (its int8 policy has fp32's "
                "bytes), so its published int8 column is the fp32 policy itself."
            )
        agreeing = [r["condition"].split(":")[0] for r in mine if r["verdict"].startswith("agrees")]
        if agreeing:
            text += f" The published value agrees with: {', '.join(agreeing)}."
        lines.append(text)
    return "\n\n".join(lines)


def section(defaults: pd.DataFrame, published_runs: pd.DataFrame, reasons: dict[str, str] | None = None) -> str:
    """The Markdown of the section (its table and finding)."""
    table = rows(defaults, published_runs, reasons)
    body = markdown(
        [
            "algo",
            "env",
            "condition",
            "fp32 reward [95% CI]",
            "int8 reward [95% CI]",
            "E_int8 % [95% CI]",
            "n",
            "published E_int8 %",
            "action agreement",
            "int8 bytes / fp32 bytes",
            "verdict",
        ],
        [
            [
                r["algo"] + (f" {r['flag'].split(' ', 1)[0]}" if r["flag"] else ""),
                r["env"],
                r["condition"],
                shown(r["fp32"], bounds=r["bounds"]),
                shown(r["int8"], bounds=r["bounds"]),
                shown(r["E"], bounds=r["e_bounds"]),
                str(r["E"].n_runs),
                fmt(r["published"]),
                shown(r["agreement"], 3, FRACTION) if r["agreement"] is not None else "",
                r["bytes"],
                r["verdict"],
            ]
            for r in table
        ],
    )
    found = finding(table)
    flagged = dict.fromkeys(
        f"{r['algo']} on {r['env']}, {r['condition'].split(':')[0]}: {r['flag']}" for r in table if r["flag"]
    )
    legend = "\n\n" + "\n".join(f"- {line}" for line in flagged) if flagged else ""
    return body + legend + ("\n\n" + found if found else "")
