"""The report's ActorQ section: time to the target return with fp32 and int8 actors per seed, from
the first env step with the start-up apart, each side's throughput over the same span, and the int8
speedup as a ratio of geometric means with its Welch interval on the logs, decomposed into the
throughput ratio times the steps-to-target ratio. Runs of one training started on different days
(another machine or lease) are shown apart, each day linked to its provenance note where one is
kept (`device_runs/<day>_<machine>.md` beside the report)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quarl.collate import actorq_timing, coverage
from quarl.collate.stats import Interval, geometric_mean, ratio_interval
from quarl.report.campaign import FIGURES, Campaign, Inputs
from quarl.report.text import fmt, markdown, note, per_seed, shown


def actorq_figures(campaign: Campaign, folder: Path, draw: bool) -> list[str]:
    """A return-vs-wall-time figure per ActorQ task, with the paper's return and a random policy's
    (RANDOM_RETURNS) drawn across it; the Markdown that shows them (the figures are written only
    when `draw`)."""
    if campaign.actorq is None:
        return []
    shown = []
    for (algo, env), _ in actorq_timing.runs(campaign.actorq).groupby(["algo", "env"]):
        name = f"actorq_{algo}_{env.replace('/', '_')}.png"
        if draw:
            fig = actorq_timing.convergence(campaign.actorq, campaign.curves, algo, env)
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
    """The rows of `frame` whose columns equal `setting`'s values (none where it lacks a column: no
    actor breakdown recorded)."""
    if not set(setting) <= set(frame.columns):
        return frame.iloc[0:0]
    return frame[(frame[list(setting)] == pd.Series(setting)).all(axis=1)]


def _rates(r: pd.Series) -> tuple[float, float]:
    """A row's env steps and learner updates per second from the first env step (wall time less
    start-up), the geometric mean over its seeds: the numbers its throughput ratio divides."""
    updates = r.get("seed_learner_updates_per_s")
    return geometric_mean(r["seed_env_steps_per_s"]), geometric_mean(updates if updates is not None else [])


#: Provenance notes of runs on lent machines, beside the report: `<day>_<machine>.md`.
DEVICE_RUNS = "device_runs"


def provenance(folder: Path) -> dict[str, str]:
    """The provenance note of each day's runs kept in `folder`/device_runs ({'2026-11-28':
    'device_runs/2026-11-28_h200.md'}), a link relative to the report."""
    notes = sorted((folder / DEVICE_RUNS).glob("*_*.md")) if (folder / DEVICE_RUNS).is_dir() else []
    return {note.name.split("_", 1)[0]: f"{DEVICE_RUNS}/{note.name}" for note in notes}


def section(inputs: Inputs) -> str:
    """The section with its heading and figures."""
    figures = actorq_figures(inputs.campaign, inputs.folder, inputs.figures)
    notes = provenance(inputs.folder)
    return "## ActorQ: fp32 vs int8 actors\n\n" + actorq_section(inputs.campaign, figures, notes)


def speedups(ttr: pd.DataFrame, r: pd.Series) -> tuple[Interval, Interval, Interval] | None:
    """(speedup, throughput ratio, steps-to-target ratio) of row `r` against the fp32 row of its
    setting, each a ratio of geometric means with its Welch interval on the logs; None for an fp32
    row or without one."""
    if r["precision"] == "fp32":
        return None
    fp32 = ttr[(ttr[actorq_timing.SETTING] == r[actorq_timing.SETTING]).all(axis=1) & (ttr["precision"] == "fp32")]
    if fp32.empty:
        return None
    base = fp32.iloc[0]
    none = Interval(np.nan, np.nan, np.nan, -1, 2)  # both precisions censored: no ratio to time (n_runs -1 marks it)
    timed = r["speedup_bound"] != ""
    return (
        ratio_interval(base["seed_times_s"], r["seed_times_s"]) if timed else none,
        ratio_interval(r["seed_env_steps_per_s"], base["seed_env_steps_per_s"]),
        ratio_interval(base["seed_env_steps"], r["seed_env_steps"]) if timed else none,
    )


def ratio_text(ci: Interval, bound: str = "") -> str:
    """'1.30 [1.10, 1.52]', or the ratio with 'n < 3: no interval'."""
    if ci.n_runs == -1:
        return "n/a: both precisions missed the target in some seed, so neither time is a time to target"
    if not ci.n_runs or np.isnan(ci.estimate):
        return "–"
    marks = {">=": "≥ ", "<=": "≤ "}
    if not ci.has_ci:
        return f"{marks.get(bound, '')}{fmt(ci.estimate)} (n < 3: no interval)"
    return marks.get(bound, "") + shown(ci)


def _day(day: str, notes: dict[str, str]) -> str:
    """The day a row's runs started, linked to its provenance note where one is kept."""
    return f"[{day}]({notes[day]})" if day in notes else day or "–"


def actorq_section(campaign: Campaign, figures: list[str], notes: dict[str, str] | None = None) -> str:
    """Time to the paper's reward with fp32 and int8 actors, the speedup beside the published one,
    and the actors' inference time per step; a row per training, precision and day (`notes`: the
    provenance note of a day's runs)."""
    ttr, parts, notes = campaign.time_to_reward, campaign.breakdown, notes or {}
    if ttr.empty:
        return "Not run yet."
    assert campaign.actorq is not None  # time to reward is read from it
    done = actorq_timing.runs(campaign.actorq)
    rows = []
    for (_, r), (_, view) in zip(ttr.iterrows(), actorq_timing.ttr_display(ttr).iterrows()):
        setting = {k: r[k] for k in (*actorq_timing.SETTING, "precision")}
        cells, part = _setting(done, setting), _setting(parts, setting)
        ratios = speedups(ttr, r)
        startup = float(np.nanmean(r["seed_startup_s"])) if len(r["seed_startup_s"]) else np.nan
        env_rate, update_rate = _rates(r)
        rows.append(
            [
                r["algo"],
                r["env"],
                r["network"] if r["training"] == r["algo"] else f"{r['network']}, {r['training']}",
                r["precision"],
                actorq_timing.learner_device(cells),
                _day(r["batch"], notes),
                str(r["seeds"]),
                fmt(pd.to_numeric(cells["env_steps"]).mean(), 0),
                fmt(pd.to_numeric(cells["train_time_s"]).mean(), 0),
                fmt(env_rate, 0),
                fmt(update_rate, 1),
                actorq_timing.regime(cells),
                fmt(part["inference (ms/step)"].mean()) if len(part) else "–",
                f"{fmt(r['target'])} ({r['target_from']}; {r['reached']} seeds reached it)",
                fmt(startup, 1),
                _time_text(r, view),
                ratio_text(ratios[0], r["speedup_bound"]) if ratios else "",
                ratio_text(ratios[1]) if ratios else "",
                ratio_text(ratios[2], r["speedup_bound"]) if ratios else "",
                fmt(r["speedup (paper)"]) if pd.notna(r["speedup (paper)"]) else "",
                fmt(pd.to_numeric(cells["reward_mean"]).mean(), 1),
                "/".join(sorted({str(int(n)) for n in pd.to_numeric(cells["n_episodes"]).dropna()})),
            ]
        )
    reading = actorq_reading(ttr, done)
    gpu = any(row[4] == "cuda" for row in rows)
    runs = runs_text(ttr, done, notes)
    prose = note("actorq", gpu=gpu, coverage=coverage.ratio_note(), runs=runs, repeated=repeated_text(ttr))
    return prose + "\n\n" + markdown(HEADER, rows) + reading + "".join(f"\n\n{f}" for f in figures)


HEADER = [
    "algo",
    "env",
    "policy",
    "actors",
    "learner",
    "started (UTC day)",
    "seeds",
    "env steps",
    "wall s (whole run)",
    "env steps/s (from the first env step; geometric mean)",
    "learner updates/s (from the first env step; geometric mean)",
    "regime (share of wall time)",
    "actor inference ms/step",
    "target return",
    "start-up s",
    "time to target s (from the first env step; geometric mean), per seed",
    "speedup vs fp32 [95% CI]",
    "throughput ratio (env steps/s, int8 / fp32)",
    "steps-to-target ratio (fp32 / int8)",
    "published speedup",
    "final eval reward",
    "eval episodes",
]


def runs_text(ttr: pd.DataFrame, done: pd.DataFrame, notes: dict[str, str]) -> str:
    """One line per day of runs with the learner on a GPU: its records, settings, and its provenance
    note where one is kept."""
    gpu = done[done.get("training_device", pd.Series("cpu", index=done.index)).fillna("cpu") != "cpu"]
    lines = []
    for day, runs in gpu.groupby("batch"):
        where = f" ([{notes[day]}]({notes[day]}))" if day in notes else ""
        settings = runs.groupby(actorq_timing.SETTING).ngroups
        lines.append(f"- {day or 'a day not recorded'}{where}: {len(runs)} runs in {settings} settings.")
    return "\n".join(lines)


def repeated_text(ttr: pd.DataFrame) -> str:
    """How many trainings ran on more than one day, and each one's int8 speedup (else throughput
    ratio) day by day, side by side ('' where none did)."""
    training = [k for k in actorq_timing.SETTING if k != "batch"]
    days = ttr.groupby(training)["batch"].nunique()
    again = days[days > 1]
    if again.empty:
        return ""
    lines = []
    for key in again.index:
        rows = ttr[(ttr[training] == pd.Series(dict(zip(training, key)))).all(axis=1) & (ttr["precision"] == "int8")]
        per_day = []
        for _, r in rows.iterrows():
            ratios = speedups(ttr, r)
            if ratios is not None:
                timed = ratios[0].n_runs != -1 and not np.isnan(ratios[0].estimate)
                what = ratio_text(ratios[0], r["speedup_bound"]) if timed else f"throughput {ratio_text(ratios[1])}"
                per_day.append(f"{what} ({r['batch']})")
        if per_day:
            lines.append(f"{_short(key[-1])} {key[2]} on {key[1]}: " + ", ".join(per_day))
    how = "int8 speedup by day (the throughput ratio where no time is one to the target)"
    listed = f": {how}, {'; '.join(lines)}" if lines else ""
    return f" Here {len(again)} of {len(days)} trainings ran on more than one day{listed}."


def _time_text(r: pd.Series, view: pd.Series) -> str:
    """The mean time (a bound '≥' where a seed missed the target), with each seed's time up to five
    seeds; a seed's time is its whole run where it missed."""
    seeds = per_seed(r["seed_times_s"], 1)
    return str(view["time_s"]) + (f" ({seeds})" if seeds and len(r["seed_times_s"]) > 1 else "")


def actorq_reading(ttr: pd.DataFrame, done: pd.DataFrame) -> str:
    """One line per task and policy, from the table's numbers: whether the run can speak to time to
    reward at all (a precision none of whose seeds reached the target cannot), and how int8 actors
    moved each side's throughput."""
    lines = []
    for key, rows in ttr.groupby(actorq_timing.SETTING, sort=True):  # one training at a time: never pooled
        setting = dict(zip(actorq_timing.SETTING, key))
        by = {r["precision"]: r for _, r in rows.iterrows()}
        if "fp32" not in by or "int8" not in by:
            continue
        rate, devices = {p: _rates(by[p]) for p in ("fp32", "int8")}, set()
        for precision in ("fp32", "int8"):
            devices.add(actorq_timing.learner_device(_setting(done, {**setting, "precision": precision})))
        pace = (
            f"int8 actors moved the run from {fmt(rate['fp32'][0], 0)} to {fmt(rate['int8'][0], 0)} env steps/s "
            f"and the learner from {fmt(rate['fp32'][1], 1)} to {fmt(rate['int8'][1], 1)} updates/s"
            + publishing(done, setting)
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
            final = {p: pd.to_numeric(_setting(done, {**setting, "precision": p})["reward_mean"]).mean() for p in by}
            if not rows["censored"].any() and all(final[p] < by[p]["target"] for p in ("fp32", "int8")):
                verdict = (
                    f"the training average crossed {fmt(by['fp32']['target'])} (at {times[0]} vs {times[1]}), but the "
                    f"learner's final policies score {fmt(final['fp32'], 1)} and {fmt(final['int8'], 1)}, below it: "
                    "a passing average, not a time to a solved task"
                )
        agreement = by["int8"].get("actor_agreement", np.nan)
        acts = (
            f"; the int8 actors' policy acts as the learner's final one on {fmt(agreement)} of its states"
            if pd.notna(agreement)
            else ""
        )
        learner = "/".join(sorted(devices))
        trained = "" if setting["training"] == setting["algo"] else f" {setting['training']},"
        where = (
            f"{setting['algo']} on {setting['env']}, {setting['network']} policy,{trained} learner on {learner}, "
            f"started {setting['batch'] or 'on a day not recorded'}"
        )
        lines.append(f"- {where}: {verdict}; {pace}{acts}.")
    return "\n\nReading the table:\n\n" + "\n".join(lines) if lines else ""


def publishing(done: pd.DataFrame, setting: dict[str, Any]) -> str:
    """'; publishing took 12-58% of the wall time (fp32) and 9-20% (int8)': each precision's range
    over its runs of publishes x publish time / wall time, from the records ('' where they lack it)."""
    parts = []
    for precision in ("fp32", "int8"):
        cells = _setting(done, {**setting, "precision": precision})
        if not {"publishes", "publish_ms"} <= set(cells.columns):
            return ""
        wall = pd.to_numeric(cells["train_time_s"], errors="coerce")
        share = pd.to_numeric(cells["publishes"], errors="coerce") * pd.to_numeric(cells["publish_ms"]) / 1e3 / wall
        share = share.dropna()
        if share.empty:
            return ""
        low, high = share.min(), share.max()
        span = f"{low:.0%}" if f"{low:.0%}" == f"{high:.0%}" else f"{low:.0%}-{high:.0%}"
        parts.append(f"{span} ({precision}, {len(share)} run{'s' if len(share) > 1 else ''})")
    return f"; publishing took {' and '.join(parts)} of the wall time"


def summary_line(campaign: Campaign) -> str:
    """The summary's line: each setting whose int8 speedup has an interval (every seed of both
    precisions timed, three or more a side), named by its learner, training and day, with the
    published speedup and a passing average's caveat; how many settings give less."""
    ttr = campaign.time_to_reward
    if ttr.empty:
        return "not run yet."
    assert campaign.actorq is not None  # time to reward is read from it
    done = actorq_timing.runs(campaign.actorq)
    listed, rest = [], 0
    for _, r in ttr[ttr["precision"] == "int8"].iterrows():
        ratios = speedups(ttr, r)
        if not ratios or not ratios[0].has_ci or r["speedup_bound"] != "=":
            rest += ratios is not None
            continue
        setting = {k: r[k] for k in actorq_timing.SETTING}
        final = pd.to_numeric(_setting(done, setting)["reward_mean"]).mean()
        caveat = "; a passing average: the final policies score below the target" if final < r["target"] else ""
        paper = f", paper {fmt(r['speedup (paper)'])}" if pd.notna(r["speedup (paper)"]) else ""
        learner = actorq_timing.learner_device(_setting(done, setting))
        listed.append(
            f"{_short(r['training'])} {r['network']} on {r['env']}, learner on {learner}, started {r['batch']}: "
            f"{shown(ratios[0])} (n = {r['seeds']}{paper}{caveat})"
        )
    text = "; ".join(listed) if listed else "none with an interval yet"
    return (
        "int8 actors' speedup to the target, the ratio of fp32's and int8's geometric-mean times with its "
        f"95% interval, where every seed of both timed it: {text}; {rest} more settings give a bound, one or two "
        "seeds, or no time (the section's table)."
    )


def _short(training: str) -> str:
    """A training's label without the network's own keys (its network is named beside it):
    'dqn (actorq.actors=14, actorq.time_limit_s=30)'."""
    short = re.sub(r"algo\.hyperparams\.[\w.]+=\[[^\]]*\](, )?", "", training)
    return short.replace(" ()", "")
