"""The formats section's ActorQ part (sweep actorq_formats): a DQN learner fed by actors whose weights
are in a number format, beside the same training fed by fp32 (and int8 or fp16, where run) actors.
Per precision: the seeds that
reached the target return, the env steps to it, the fp32 actors' env steps over these (a ratio of
geometric means with its Welch interval on the logs), the learner's final reward, the actors' own
policy's reward and its action agreement with the learner's. As in the ActorQ section, only runs of
one day (one machine) are compared: the sweep's fp32 actors run again beside its formats."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from quarl.actorq.constants import PRECISIONS
from quarl.collate import actorq_timing, verdicts
from quarl.collate.stats import Interval, ratio_interval, seed_interval
from quarl.report.campaign import Inputs, reward_bounds
from quarl.report.text import FRACTION, fmt, markdown, note, per_seed, shown
from quarl.report.time_to_reward import ratio_text

MARGIN = round(math.log(1.25), 3)  # ln of env steps within a quarter more (a fifth fewer) of fp32 actors': equivalent
HEADER = [
    "algo",
    "env",
    "policy",
    "started (UTC day)",
    "actors",
    "seeds",
    "reached the target",
    "env steps to target (geometric mean; per seed)",
    "fp32 actors' env steps / these [95% CI]",
    "verdict on ln(these env steps / fp32's), paired by seed",
    "final learner reward [95% CI]",
    "actors' policy reward [95% CI]",
    "action agreement, actors vs learner [95% CI]",
]


def table(inputs: Inputs) -> pd.DataFrame:
    """Time to reward of the trainings (and days) that hold format actors, every precision."""
    campaign = inputs.campaign
    if campaign.actorq is None:
        return pd.DataFrame()
    ttr = actorq_timing.time_to_reward(campaign.actorq, campaign.curves, formats=True)
    if ttr.empty:
        return ttr
    formats = ~ttr["precision"].isin(PRECISIONS.values())
    keep = ttr[formats][actorq_timing.SETTING].drop_duplicates()
    return ttr.merge(keep, on=actorq_timing.SETTING)


def _steps_ratio(ttr: pd.DataFrame, r: pd.Series) -> str:
    """fp32's env steps to the target over this row's, or why there is none."""
    if r["precision"] == "fp32":
        return ""
    same = (ttr[actorq_timing.SETTING] == r[actorq_timing.SETTING]).all(axis=1) & (ttr["precision"] == "fp32")
    if not same.any():
        return "n/a: no fp32 actors in this training"
    base = ttr[same].iloc[0]
    if base["censored"] and r["censored"]:
        return ratio_text(Interval(np.nan, np.nan, np.nan, -1, 2))  # neither is a time to target
    bound = ">=" if base["censored"] else "<=" if r["censored"] else ""
    return ratio_text(ratio_interval(base["seed_env_steps"], r["seed_env_steps"]), bound)


def _per_seed_steps(ttr_row: pd.Series, cells: pd.DataFrame) -> pd.Series:
    """A row's env steps to the target by seed (`time_to_reward` lists them in its cells' order)."""
    return pd.Series(list(ttr_row["seed_env_steps"]), index=pd.to_numeric(cells["seed"]).astype(int).tolist())


def _verdicts(ttr: pd.DataFrame, cells: dict[int, pd.DataFrame]) -> dict[int, str]:
    """Per format or int8 row: ln(its env steps / fp32's) paired by seed, read within ±ln 1.25 with
    Holm's correction over the rows compared; 'n/a' with the reason where it cannot be read."""
    diffs: dict[int, np.ndarray] = {}
    why: dict[int, str] = {}
    for i, r in ttr.iterrows():
        if r["precision"] == "fp32":
            continue
        same = (ttr[actorq_timing.SETTING] == r[actorq_timing.SETTING]).all(axis=1) & (ttr["precision"] == "fp32")
        if not same.any():
            why[i] = "n/a: no fp32 actors that day"
        elif r["censored"] or ttr[same].iloc[0]["censored"]:
            why[i] = "n/a: a seed missed the target, so its env steps are a bound"
        else:
            j = ttr[same].index[0]
            both = pd.concat([_per_seed_steps(r, cells[i]), _per_seed_steps(ttr.loc[j], cells[j])], axis=1).dropna()
            diffs[i] = np.log(both.iloc[:, 0].to_numpy(float)) - np.log(both.iloc[:, 1].to_numpy(float))
    keys = list(diffs)
    kept = verdicts.holm([verdicts.t_test_p(diffs[k]) for k in keys])
    for k, significant in zip(keys, kept):
        names = (f"{ttr.loc[k, 'precision']}'s env steps", "fp32's")
        why[k] = verdicts.paired(diffs[k], MARGIN, names, significant=significant).text + f" (family of {len(keys)})"
    return why


def section(inputs: Inputs) -> str:
    """The part's prose and table, or that it has not run."""
    ttr = table(inputs)
    if ttr.empty:
        return "### ActorQ actors in a number format\n\nNot run yet."
    done = actorq_timing.runs(inputs.campaign.actorq, formats=True)  # type: ignore[arg-type]
    ttr = ttr.sort_values(by="precision", key=lambda s: s.map(actorq_timing.precision_order)).reset_index(drop=True)
    setting = [*actorq_timing.SETTING, "precision"]
    cells = {i: done[(done[setting] == r[setting]).all(axis=1)] for i, r in ttr.iterrows()}
    read = _verdicts(ttr, cells)
    rows = []
    for i, r in ttr.iterrows():
        steps = f"{'≥ ' if r['censored'] else ''}{fmt(r['env_steps'], 0)} ({per_seed(r['seed_env_steps'], 0)})"
        agreement = pd.to_numeric(cells[i].get("actor_action_agreement", pd.Series(dtype=float)))
        bounds = reward_bounds(cells[i])  # the env's return range: intervals clipped to it
        rows.append(
            [
                r["algo"],
                r["env"],
                r["network"] if r["training"] == r["algo"] else f"{r['network']}, {r['training']}",
                r["batch"],
                r["precision"],
                str(r["seeds"]),
                r["reached"],
                steps,
                _steps_ratio(ttr, r),
                read.get(i, ""),
                shown(seed_interval(pd.to_numeric(cells[i]["reward_mean"])), 1, bounds),
                shown(seed_interval(pd.to_numeric(cells[i]["actor_reward"])), 1, bounds),
                shown(seed_interval(agreement), 3, FRACTION)
                if r["precision"] != "fp32"
                else "1 (the learner's own policy)",
            ]
        )
    target = ", ".join(sorted({f"{fmt(t)} ({s})" for t, s in zip(ttr["target"], ttr["target_from"])}))
    prose = note("actorq_formats", target=target, margin=fmt(MARGIN, 3))
    return "### ActorQ actors in a number format\n\n" + prose + "\n\n" + markdown(HEADER, rows)
