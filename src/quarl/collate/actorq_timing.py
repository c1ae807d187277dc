"""ActorQ outputs: convergence vs wall time per actor precision, time to reward with the speedup
over fp32 actors (beside the published one), and the actors' runtime breakdown.

Inputs: the `actorq` records of a `Results` (one per (algo, env, actor bits, seed, settings)), their
training curves (every actor episode's return, env step and wall time) and the `actors` table.
A run's return at time t is the mean return of the last `RETURN_WINDOW` episodes that ended by t (all
actors pooled): the curve a time-to-reward is read from. Intervals: the Student-t 95% interval of
the mean across seeds at each time point, mean ± t(0.975, n-1) · SE.

Time to reward is censored, not averaged over survivors: a seed that never reached the target
counts at its whole run time (a lower bound on its time to reward). Seeds are summarised by their
geometric mean (times and rates are skewed, and a ratio of geometric means is what
`quarl.collate.stats.ratio_interval` gives an interval for); the geometric mean of lower bounds is a
lower bound. A precision's time is then
exact only when every seed reached the target, and otherwise a bound ("≥ x"); a speedup over
fp32 is given as a number only when both precisions' times are exact, as a bound when one is
(fp32 censored: "≥", this precision censored: "≤"), and not at all when both are.
"""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from quarl.actorq.constants import PRECISIONS, RETURN_WINDOW
from quarl.collate import plots, tables, trainings
from quarl.collate.frame import Results
from quarl.collate.published import bare_name, packaged
from quarl.collate.stats import geometric_mean, t_quantile
from quarl.config.keys import slug
from quarl.store.sqlite import Store

GRID = 100  # wall-time points per convergence curve
ORDER = ["fp32", "fp16", "int8"]  # precisions in plots and tables (actors in a number format after them)
PARTS = ["inference_s", "env_s", "pull_s", "deserialize_s", "load_s", "send_s"]
PART_NAMES = {
    "inference_s": "inference",
    "env_s": "env",
    "pull_s": "pull",
    "deserialize_s": "deserialize",
    "load_s": "load",
    "send_s": "send",
}  # as the ActorQ log names them


def published() -> pd.DataFrame:
    """The paper's time-to-reward table (quarl/data/actorq_time_to_reward.csv) with a bare task key."""
    return packaged("actorq_time_to_reward.csv", "task")


NETWORK_COLUMNS = ("algo.hyperparams.policy_layers", "algo.hyperparams.policy_kwargs.net_arch")
#: Runs are pooled as seeds only within one setting; `training` (`quarl.collate.trainings`) keeps
#: runs of different trainings (budget, actors, ...) apart beyond the network and update period, and
#: `batch` runs of one training started on different days (another machine, another lease): shown apart.
SETTING = ["algo", "env", "network", "update_period", "training", "batch"]


def precision_order(precision: str) -> tuple[int, str]:
    """Where a precision sorts: fp32, fp16, int8, then the actors' number formats by name."""
    return (ORDER.index(precision), "") if precision in ORDER else (len(ORDER), precision)


def network(record: pd.Series) -> str:
    """The actors' layer widths ('2048x2048x2048'), or 'default' where the record leaves them to the algo."""
    for column in NETWORK_COLUMNS:
        value = record.get(column)
        if isinstance(value, str):
            value = json.loads(value)
        if isinstance(value, (list, tuple)) and value:
            return "x".join(str(int(width)) for width in value)
    return "default"


def runs(study: Results, formats: bool = False) -> pd.DataFrame:
    """The finished ActorQ records with `precision` (int8 / fp16 / fp32), `network`, `update_period`,
    `training` and `batch` (the UTC day the run started: a run of the same training on another day
    came from another machine or lease, and is never pooled with this day's as seeds).

    `formats`: also the runs whose actors are in a number format (`quant.actor_format`, run in fp32 on
    the format's values and recorded at actor_bits=32), their precision the format's name; without it
    only fp32, fp16 and int8 actors (the paper's question)."""
    done = study.done[study.done["quant"] == "actorq"].copy()
    done["precision"] = pd.to_numeric(done["quant.actor_bits"]).astype(int).map(PRECISIONS)
    named = done.get("quant.actor_format", pd.Series(None, index=done.index, dtype=object))
    named = named.notna() & (named.astype(str) != "None")
    if named.any():
        done.loc[named, "precision"] = done.loc[named, "quant.actor_format"].astype(str)
    done = done if formats else done[~named].copy()  # a frame of its own: the columns below are set on it
    done["update_period"] = pd.to_numeric(done["actorq.update_period"]).astype(int)
    done["network"] = [network(r) for _, r in done.iterrows()]
    done["training"] = trainings.trainings(done)[0]
    done["batch"] = [batch(r) for _, r in done.iterrows()]
    return done


def batch(record: pd.Series) -> str:
    """The UTC day a record's run started ('2026-11-28'), '' where the record does not say."""
    started = record.get("started_at")
    return str(started)[:10] if isinstance(started, str) else ""


def regime(cells: pd.DataFrame) -> str:
    """Which side held a setting's runs back, read from their records: the learner's share of the
    wall time spent waiting for experience against the actors' mean share blocked sending it (the
    samples-per-insert limit holding them back). 'learner-bound (actors blocked 55%, learner waiting
    12%)'; n/a where the records lack the breakdown."""
    needed = ["learner_wait_s", "actor_send_s", "train_time_s", "actorq.actors"]
    if cells.empty or any(c not in cells.columns or cells[c].isna().all() for c in needed):
        return "n/a: the records hold no time breakdown"
    wall = pd.to_numeric(cells["train_time_s"])
    waiting = float((pd.to_numeric(cells["learner_wait_s"]) / wall).mean())
    blocked = float((pd.to_numeric(cells["actor_send_s"]) / (pd.to_numeric(cells["actorq.actors"]) * wall)).mean())
    side = "learner-bound" if blocked > waiting else "actor-bound"
    return f"{side} (actors blocked {blocked:.0%}, learner waiting {waiting:.0%})"


def smoothed(curves: pd.DataFrame, cell_key: str) -> pd.DataFrame:
    """One run's (wall_s, step, return) with the return averaged over the last RETURN_WINDOW episodes."""
    c = curves[curves["cell_key"] == cell_key].sort_values("wall_s")
    return pd.DataFrame(
        {
            "wall_s": c["wall_s"].to_numpy(),
            "step": c["step"].to_numpy(),
            "return": c["reward"].rolling(RETURN_WINDOW, min_periods=1).mean().to_numpy(),
        }
    )


def target(algo: str, env: str, per_run: dict[str, pd.DataFrame], rows: pd.DataFrame) -> tuple[float, str]:
    """The reward to reach: the paper's for this task, else the best return every precision reaches."""
    paper = published()
    hit = paper[(paper["algo"] == algo) & (paper["key"] == bare_name(env))]
    if len(hit):
        return float(hit.iloc[0]["reward_achieved"]), "paper"
    best = rows.groupby("precision")["cell_key"].apply(lambda keys: np.mean([per_run[k]["return"].max() for k in keys]))
    return float(best.min()), "lowest best return over precisions"


def _run_end(curve: pd.DataFrame, record: pd.Series) -> tuple[float, float]:
    """Wall seconds and env steps a run lasted (its training time, else its last curve point)."""
    wall = record.get("train_time_s")
    wall = float(wall) if pd.notna(wall) else float(curve["wall_s"].max() if len(curve) else np.nan)
    return wall, float(curve["step"].max() if len(curve) else np.nan)


def _bounded(value: float, censored: bool) -> str:
    """'123.4' or '≥ 123.4' for the Markdown table."""
    return "–" if pd.isna(value) else f"{'≥ ' if censored else ''}{value:.4g}"


def _startup(curve: pd.DataFrame, rate: float, record: pd.Series) -> float:
    """Seconds before the first env step: the record's `first_experience_s` (the learner's wait for
    its first chunk), else estimated as the first episode's end less its env steps at the run's mean
    rate (NaN without a curve)."""
    measured = pd.to_numeric(record.get("first_experience_s"), errors="coerce")
    if pd.notna(measured):
        return float(measured)
    if curve.empty or not rate or np.isnan(rate):
        return np.nan
    first = curve.iloc[0]
    return max(0.0, float(first["wall_s"]) - float(first["step"]) / rate)


def _speedup(fp32: float, fp32_censored: bool, this: float, this_censored: bool) -> tuple[float, str]:
    """fp32 time / this precision's time and its kind: '=' exact, '>=' / '<=' a bound, '' none (also
    where a time is 0: the target was reached in the first training episodes, before learning)."""
    if pd.isna(fp32) or pd.isna(this) or (fp32_censored and this_censored) or min(fp32, this) <= 0:
        return np.nan, ""
    kind = ">=" if fp32_censored else "<=" if this_censored else "="
    return fp32 / this, kind


def time_to_reward(study: Results, curves: pd.DataFrame, formats: bool = False) -> pd.DataFrame:
    """Per (algo, env, network, update period, training, precision): wall seconds from the first env
    step (start-up apart, `seed_startup_s`) and env steps until the target return, the geometric mean
    over every seed (a seed that missed it counts at its run time: then the value is a lower
    bound, `censored`), each seed's env steps and learner updates per second from its first env
    step, and the speedup over fp32 actors with its kind (`speedup_bound`: '=' exact, '>=' / '<=' a
    bound, '' none when both are censored). `formats`: as `runs` takes it."""
    done = runs(study, formats)
    paper = published()
    out = []
    for (algo, env, net, period, training, day), rows in done.groupby(SETTING):
        per_run = {k: smoothed(curves, k) for k in rows["cell_key"]}
        goal, source = target(algo, env, per_run, rows)
        for precision, group in rows.groupby("precision"):
            times, steps, startups, rates, updates, reached = [], [], [], [], [], 0
            for _, record in group.iterrows():
                curve = per_run[record["cell_key"]]
                hit = curve[curve["return"] >= goal]
                wall, step = _run_end(curve, record)
                ran = pd.to_numeric(record.get("env_steps"), errors="coerce")
                rates.append((ran if pd.notna(ran) else step) / wall if wall > 0 else np.nan)
                startups.append(_startup(curve, rates[-1], record))
                begun = 0.0 if np.isnan(startups[-1]) else startups[-1]  # times count from the first env step
                rates[-1] = (ran if pd.notna(ran) else step) / (wall - begun) if wall > begun else np.nan
                learned = pd.to_numeric(record.get("learner_steps"), errors="coerce")
                updates.append(learned / (wall - begun) if wall > begun else np.nan)
                if len(hit):
                    reached += 1
                    times.append(hit["wall_s"].iloc[0] - begun)
                    steps.append(hit["step"].iloc[0])
                else:
                    times.append(wall - begun)
                    steps.append(step)
            agreement = pd.to_numeric(group.get("actor_action_agreement"), errors="coerce")
            out.append(
                {
                    "algo": algo,
                    "env": env,
                    "network": net,
                    "update_period": period,
                    "training": training,
                    "batch": day,
                    "precision": precision,
                    "target": goal,
                    "target_from": source,
                    "time_s": geometric_mean(times),
                    "env_steps": geometric_mean(steps),
                    "censored": reached < len(group),
                    "reached": f"{reached}/{len(group)}",
                    "seeds": len(group),
                    "actor_agreement": agreement.mean() if agreement is not None else np.nan,
                    "seed_times_s": times,  # per seed: to the target, or the whole run where censored
                    "seed_env_steps": steps,
                    "seed_startup_s": startups,
                    "seed_env_steps_per_s": rates,  # from the first env step: wall time less start-up
                    "seed_learner_updates_per_s": updates,
                }
            )
    table = pd.DataFrame(out)
    if table.empty:
        return table
    fp32 = table[table["precision"] == "fp32"].set_index(SETTING)
    speed = [
        _speedup(
            fp32["time_s"].get(tuple(getattr(r, k) for k in SETTING), np.nan),
            bool(fp32["censored"].get(tuple(getattr(r, k) for k in SETTING), False)),
            r.time_s,
            r.censored,
        )
        for r in table.itertuples()
    ]
    table["speedup_vs_fp32"] = [v for v, _ in speed]
    table["speedup_bound"] = [k for _, k in speed]
    keys = paper.set_index(["algo", "key"])
    table["speedup (paper)"] = [
        keys["int8_speedup"].get((r.algo, bare_name(r.env)), np.nan) if r.precision == "int8" else np.nan
        for r in table.itertuples()
    ]
    if table["actor_agreement"].isna().all():
        table = table.drop(columns="actor_agreement")
    return table


TTR_CAPTION = (
    f"time_s / env_steps: until the mean return of the last {RETURN_WINDOW} training episodes reaches the target, "
    "from the first env step (start-up apart), the geometric mean over every seed; reached: seeds that reached it. "
    "Censored: where a seed did not reach the target it counts "
    "at its whole run time, so the value is a lower bound (≥; CSV: censored = True), never a mean over the seeds "
    "that happened to reach it. speedup_vs_fp32: fp32 actors' time / this precision's, a number only when every "
    "seed of both reached the target (a ratio of geometric means); ≥ x when fp32's time is a bound, ≤ x when "
    "this precision's is, – when both "
    "are or a time is 0 (the target reached in the first training episodes: no ratio) (CSV: speedup_bound). "
    "actor_agreement: the actors' quantized policy's action agreement with the fp32 "
    "learner's (where measured). speedup (paper): QuaRL's int8 speedup (arXiv 1910.01055)."
)


#: Per-seed lists in the time-to-reward table (the report reads them; the written tables leave them out).
SEED_COLUMNS = [
    "seed_times_s",
    "seed_env_steps",
    "seed_startup_s",
    "seed_env_steps_per_s",
    "seed_learner_updates_per_s",
]


def ttr_display(table: pd.DataFrame) -> pd.DataFrame:
    """The time-to-reward table as the Markdown shows it: censored times as '≥ x', speedups with
    their bound ('≥ 1.2', '≤ 0.8'), '–' where both precisions are censored."""
    shown = table.drop(columns=["censored", "speedup_bound", *SEED_COLUMNS], errors="ignore").astype(object)
    shown["time_s"] = [_bounded(v, c) for v, c in zip(table["time_s"], table["censored"])]
    shown["env_steps"] = [_bounded(v, c) for v, c in zip(table["env_steps"], table["censored"])]
    marks = {"=": "", ">=": "≥ ", "<=": "≤ "}
    shown["speedup_vs_fp32"] = [
        "–" if not k else f"{marks[k]}{v:.3g}" for v, k in zip(table["speedup_vs_fp32"], table["speedup_bound"])
    ]
    return shown


def convergence(study: Results, curves: pd.DataFrame, algo: str, env: str):
    """Return vs wall time for one task: a line per actor precision (mean over seeds, band ± 1.96 SE)."""
    done = runs(study)
    rows = done[(done["algo"] == algo) & (done["env"] == env)]
    with plots.styled():
        fig, axes = plots.new_figure(7.2, 4.2)
        ax = axes[0, 0]
        end = max(smoothed(curves, k)["wall_s"].max() for k in rows["cell_key"])
        grid = np.linspace(0, end, GRID)
        counts = []
        several = rows["network"].nunique() > 1
        trainings_per_net = rows.groupby("network")["training"].nunique()
        days = rows["batch"].nunique() > 1
        for (net, _, day, precision), group in sorted(  # one line per training and day: never pooled
            rows.groupby(["network", "training", "batch", "precision"]),
            key=lambda g: (g[0][0], g[0][1], g[0][2], precision_order(g[0][3])),
        ):
            lines = []
            for key in group["cell_key"]:
                s = smoothed(curves, key)
                if len(s):
                    lines.append(np.interp(grid, s["wall_s"], s["return"], left=np.nan, right=np.nan))
            if not lines:
                continue
            y = np.vstack(lines)
            n = np.sum(~np.isnan(y), axis=0)
            with warnings.catch_warnings():  # grid points past a run's end are NaN: no mean there
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(y, axis=0)
                se = np.nanstd(y, axis=0, ddof=1) / np.sqrt(n)
            where = f", learner on {learner_device(group)}" if trainings_per_net[net] > 1 else ""
            started = f", started {day}" if days else ""
            label = f"{precision} actors{f', {net} policy' if several else ''}{where}{started} (n = {len(lines)})"
            (line,) = ax.plot(grid, mean, label=label)
            if len(lines) > 1:
                half = np.array([t_quantile(0.95, k - 1) if k > 1 else np.nan for k in n]) * se
                ax.fill_between(grid, mean - half, mean + half, color=line.get_color(), alpha=0.2, linewidth=0)
            counts.append(len(lines))
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel(f"training return (mean of last {RETURN_WINDOW} episodes)")
        ax.set_title(f"ActorQ {algo.upper()} on {env}")
        ax.legend(
            title="shaded: 95% Student-t CI across seeds" if max(counts, default=1) > 1 else "one seed: no interval"
        )
    return fig


def learner_device(runs: pd.DataFrame) -> str:
    """The device the runs' learner ran on (records from before quarl recorded it ran on the CPU)."""
    devices = runs["training_device"].fillna("cpu") if "training_device" in runs else pd.Series(["cpu"])
    return "/".join(sorted(set(map(str, devices))))


def breakdown(study: Results, actors: pd.DataFrame) -> pd.DataFrame:
    """Per (algo, env, network, update period, training, precision): ms per actor step in each part, mean over actors
    and seeds."""
    done = runs(study)[["cell_key", *SETTING, "precision"]]
    df = actors.merge(done, on="cell_key")
    if df.empty:
        return pd.DataFrame()
    for part in PARTS:  # a part an older record did not measure (send) is NaN
        df[part] = 1e3 * pd.to_numeric(df[part], errors="coerce") / df["steps"].clip(lower=1)
    out = df.groupby([*SETTING, "precision"])[PARTS + ["steps_per_s"]].mean().reset_index()
    return out.rename(columns={p: f"{PART_NAMES[p]} (ms/step)" for p in PARTS})


def breakdown_figure(table: pd.DataFrame, algo: str, env: str):
    """Stacked bars of ms per actor step by part: a bar per precision, a panel per network and update period."""
    rows = table[(table["algo"] == algo) & (table["env"] == env)]
    rows = rows.assign(batch=rows["batch"] if "batch" in rows.columns else "")  # a table from before days
    panels = sorted(set(zip(rows["network"], rows["update_period"], rows["training"], rows["batch"])))
    columns = [f"{PART_NAMES[p]} (ms/step)" for p in PARTS]
    with plots.styled():
        fig, axes = plots.new_figure(3.6 * len(panels) + 0.6, 4.6, ncols=len(panels), sharey=True)
        for ax, (net, period, training, day) in zip(axes[0], panels):  # one bar per precision: never pooled
            key = {"network": net, "update_period": period, "training": training, "batch": day}
            panel = rows[(rows[list(key)] == pd.Series(key)).all(axis=1)]
            r = panel.set_index("precision").reindex(ORDER).dropna(how="all")
            bottom = np.zeros(len(r))
            for column in columns:
                heights = r[column].fillna(0.0).to_numpy()  # send: not measured before quarl recorded it
                ax.bar(r.index, heights, bottom=bottom, label=column.split(" (")[0])
                bottom += heights
            setting = f"{net} policy, pull every {period} steps" if len(panels) > 1 else f"pull every {period} steps"
            which = f"\n{textwrap.fill(training, 40)}" if rows["training"].nunique() > 1 else ""
            which += f"\nstarted {day}" if rows["batch"].nunique() > 1 else ""
            ax.set_title(setting + which, fontsize="small")
            ax.set_xlabel("actor precision")
        axes[0, 0].set_ylabel("ms per actor step")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles[::-1], labels[::-1], loc="outside right upper", frameon=False, title="part (as in the log)")
        fig.suptitle(f"ActorQ {algo.upper()} on {env}: where an actor's time goes")
    return fig


def write_actorq(study: Results, out: Path) -> list[Path]:
    """Curves, time-to-reward and breakdown outputs under `out`/actorq."""
    folder = out / "actorq"
    assert study.store is not None  # collate writes them for a study read from a store only
    store = Store(study.store, read_only=True)
    curves, actors = store.curves(), store.actors()
    done = runs(study)
    written: list[Path] = []
    for (algo, env), _ in done.groupby(["algo", "env"]):
        name = slug(f"{algo}_{env}")
        fig = convergence(study, curves, algo, env)
        written += plots.save(fig, folder / f"convergence_{name}")
    ttr = time_to_reward(study, curves)
    if len(ttr):
        plain = ttr.drop(columns=SEED_COLUMNS)
        written += tables.write(
            plain, folder / "time_to_reward", "ActorQ: time to reward", TTR_CAPTION, shown=ttr_display(ttr)
        )
    bd = breakdown(study, actors)
    if len(bd):
        written += tables.write(
            bd,
            folder / "breakdown",
            "ActorQ: actor runtime breakdown",
            "ms per actor env step in each part, mean over actors and seeds; steps_per_s per actor.",
        )
        for (algo, env), _ in bd.groupby(["algo", "env"]):
            written += plots.save(breakdown_figure(bd, algo, env), folder / slug(f"breakdown_{algo}_{env}"))
    return written
