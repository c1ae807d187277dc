"""DOC"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quarl.collate import actorq
from quarl.report.records import FIGURES, Campaign
from quarl.report.text import _markdown, fmt, note


def actorq_figures(campaign: Campaign, folder: Path, draw: bool) -> list[str]:
    """A return-vs-wall-time figure per ActorQ task, with the paper's return and a random policy's
    (RANDOM_RETURNS) drawn across it; the Markdown that shows them (the figures are written only
    when `draw`)."""
    if campaign.actorq is None:
        return []
    shown = []
    for (algo, env), _ in actorq.runs(campaign.actorq).groupby(["algo", "env"]):
        name = f"actorq_{algo}_{env.replace('/', '_')}.png"
        if draw:
            fig = actorq.convergence(campaign.actorq, campaign.curves, algo, env)
            ax = fig.axes[0]
            goal = campaign.time_to_reward.query("algo == @algo and env == @env")["target"]
            if len(goal):
                ax.axhline(float(goal.iloc[0]), color="0.2", linestyle="--", linewidth=1, label="target return")
            if env in RANDOM_RETURNS:
                mean, sd, n = RANDOM_RETURNS[env]
                ax.axhspan(mean - sd, mean + sd, color="0.6", alpha=0.25, label=f"random policy, mean ± sd (n = {n})")
            ax.legend(fontsize=8)
            (folder / FIGURES).mkdir(parents=True, exist_ok=True)
            fig.savefig(folder / FIGURES / name)
        shown.append(f"![ActorQ {algo} on {env}]({FIGURES}/{name})")
    return shown


# Returns of a uniformly random policy, (mean, sd, episodes), measured on this machine with
# `env.action_space.sample()` from reset seeds 1000..1019: the level a curve must rise above to show learning.
RANDOM_RETURNS = {"dmc/cartpole_balance": (332.1, 59.1, 20)}


def _setting(frame: pd.DataFrame, setting: dict[str, Any]) -> pd.DataFrame:
    """The rows of `frame` whose columns equal `setting`'s values."""
    return frame[(frame[list(setting)] == pd.Series(setting)).all(axis=1)]


def _rate(cells: pd.DataFrame, column: str) -> float:
    """`column` per second of training, mean over the seeds' runs."""
    return float((pd.to_numeric(cells[column]) / pd.to_numeric(cells["train_time_s"])).mean())


def actorq_section(campaign: Campaign, figures: list[str]) -> str:
    """Time to the paper's reward with fp32 and int8 actors, the speedup beside the published one,
    and the actors' inference time per step."""
    ttr, parts = campaign.time_to_reward, campaign.breakdown
    if ttr.empty:
        return "Not run yet."
    assert campaign.actorq is not None  # time to reward is read from it
    done = actorq.runs(campaign.actorq)
    rows = []
    for (_, r), (_, view) in zip(ttr.iterrows(), actorq.ttr_display(ttr).iterrows()):
        setting = {k: r[k] for k in (*actorq.SETTING, "precision")}
        cells, part = _setting(done, setting), _setting(parts, setting)
        rows.append(
            [
                r["algo"],
                r["env"],
                r["network"],
                r["precision"],
                actorq.learner_device(cells),
                str(r["seeds"]),
                fmt(pd.to_numeric(cells["env_steps"]).mean(), 0),
                fmt(pd.to_numeric(cells["train_time_s"]).mean(), 0),
                fmt(_rate(cells, "env_steps"), 0),
                fmt(_rate(cells, "learner_steps"), 1),
                fmt(part["inference (ms/step)"].mean()) if len(part) else "–",
                f"{fmt(r['target'])} ({r['target_from']}; {r['reached']} seeds reached it)",
                str(view["time_s"]),
                str(view["speedup_vs_fp32"]) if r["precision"] != "fp32" else "",
                fmt(r["speedup (paper)"]) if pd.notna(r["speedup (paper)"]) else "",
                fmt(pd.to_numeric(cells["reward_mean"]).mean(), 1),
            ]
        )
    header = [
        "algo",
        "env",
        "policy",
        "actors",
        "learner",
        "seeds",
        "env steps",
        "wall s",
        "env steps/s",
        "learner updates/s",
        "actor inference ms/step",
        "target return",
        "time to target s",
        "speedup vs fp32",
        "published speedup",
        "final eval reward",
    ]
    reading = actorq_reading(ttr, done)
    gpu = any(row[4] == "cuda" for row in rows)
    return note("actorq", gpu=gpu) + "\n\n" + _markdown(header, rows) + reading + "".join(f"\n\n{f}" for f in figures)


def actorq_reading(ttr: pd.DataFrame, done: pd.DataFrame) -> str:
    """One line per task and policy, from the table's numbers: whether the run can speak to time to
    reward at all (a precision none of whose seeds reached the target cannot), and how int8 actors
    moved each side's throughput."""
    lines = []
    for key, rows in ttr.groupby(actorq.SETTING, sort=True):  # one training at a time: never pooled
        setting = dict(zip(actorq.SETTING, key))
        by = {r["precision"]: r for _, r in rows.iterrows()}
        if "fp32" not in by or "int8" not in by:
            continue
        rate, devices = {}, set()
        for precision in ("fp32", "int8"):
            cells = _setting(done, {**setting, "precision": precision})
            rate[precision] = (_rate(cells, "env_steps"), _rate(cells, "learner_steps"))
            devices.add(actorq.learner_device(cells))
        pace = (
            f"int8 actors moved the run from {fmt(rate['fp32'][0], 0)} to {fmt(rate['int8'][0], 0)} env steps/s "
            f"and the learner from {fmt(rate['fp32'][1], 1)} to {fmt(rate['int8'][1], 1)} updates/s"
        )
        unreached = [p for p in ("fp32", "int8") if by[p]["reached"].startswith("0/")]
        if unreached:
            verdict = (
                f"{' and '.join(unreached)} actors reached {fmt(by['fp32']['target'])} in no seed, so the run "
                "cannot time the reward: with those actors the learner did not solve the task within its budget"
            )
        else:
            times = [
                f"{'≥ ' if by[p]['censored'] else ''}{by[p]['time_s']:.4g} s ({p}, {by[p]['reached']} seeds reached it)"
                for p in ("fp32", "int8")
            ]
            bound = "; ≥: a seed that missed the target counts at its whole run" if rows["censored"].any() else ""
            verdict = f"time to target {times[0]} vs {times[1]}{bound}"
        agreement = by["int8"].get("actor_agreement", np.nan)
        acts = (
            f"; the int8 actors' policy acts as the learner's final one on {fmt(agreement)} of its states"
            if pd.notna(agreement)
            else ""
        )
        learner = "/".join(sorted(devices))
        where = f"{setting['algo']} on {setting['env']}, {setting['network']} policy, learner on {learner}"
        lines.append(f"- {where}: {verdict}; {pace}{acts}.")
    return "\n\nReading the table:\n\n" + "\n".join(lines) if lines else ""
