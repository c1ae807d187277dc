"""The formats section's ActorQ part (sweep actorq_formats): a DQN learner fed by actors whose weights
are in a number format, beside the same training fed by fp32 (and int8 or fp16, where run) actors.
Per precision: the seeds that
reached the target return, the env steps to it, the fp32 actors' env steps over these (a ratio of
geometric means with its Welch interval on the logs), the learner's final reward, the actors' own
policy's reward and its action agreement with the learner's. As in the ActorQ section, only runs of
one day (one machine) are compared: the sweep's fp32 actors run again beside its formats."""

from __future__ import annotations

import numpy as np
import pandas as pd

from quarl.actorq.constants import PRECISIONS
from quarl.collate import actorq_timing
from quarl.collate.stats import Interval, ratio_interval, seed_interval
from quarl.report.campaign import Inputs
from quarl.report.text import FRACTION, fmt, markdown, note, per_seed, shown
from quarl.report.time_to_reward import ratio_text

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


def section(inputs: Inputs) -> str:
    """The part's prose and table, or that it has not run."""
    ttr = table(inputs)
    if ttr.empty:
        return "### ActorQ actors in a number format\n\nNot run yet."
    done = actorq_timing.runs(inputs.campaign.actorq, formats=True)  # type: ignore[arg-type]
    order = {p: i for i, p in enumerate(actorq_timing.ORDER)}
    rows = []
    for _, r in ttr.sort_values(by="precision", key=lambda s: s.map(order)).iterrows():
        cells = done[
            (done[[*actorq_timing.SETTING, "precision"]] == r[[*actorq_timing.SETTING, "precision"]]).all(axis=1)
        ]
        steps = f"{'≥ ' if r['censored'] else ''}{fmt(r['env_steps'], 0)} ({per_seed(r['seed_env_steps'], 0)})"
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
                shown(seed_interval(pd.to_numeric(cells["reward_mean"])), 1),
                shown(seed_interval(pd.to_numeric(cells["actor_reward"])), 1),
                shown(
                    seed_interval(pd.to_numeric(cells.get("actor_action_agreement", pd.Series(dtype=float)))),
                    3,
                    FRACTION,
                )
                if r["precision"] != "fp32"
                else "1 (the learner's own policy)",
            ]
        )
    target = ", ".join(sorted({f"{fmt(t)} ({s})" for t, s in zip(ttr["target"], ttr["target_from"])}))
    return (
        "### ActorQ actors in a number format\n\n"
        + note("actorq_formats", target=target)
        + "\n\n"
        + markdown(HEADER, rows)
    )
