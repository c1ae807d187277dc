"""ActorQ outputs: convergence vs wall time per actor precision, time to reward with the speedup
over fp32 actors (beside the published one), and the actors' runtime breakdown.

Inputs: the `actorq` records of a `Study` (one per (algo, env, actor bits, seed, settings)), their
training curves (every actor episode's return, env step and wall time) and the `actors` table.
A run's return at time t is the mean return of the last `RETURN_WINDOW` episodes that ended by t (all
actors pooled): the curve a time-to-reward is read from. Intervals: mean ± 1.96 standard errors
across seeds (normal approximation: a bootstrap per time point is not worth its cost here).
"""

from __future__ import annotations

import warnings
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from quarl.actorq.execution import PRECISIONS
from quarl.actorq.settings import RETURN_WINDOW
from quarl.collate import plots, tables
from quarl.collate.frame import Study
from quarl.collate.published import bare_name
from quarl.store import Store

GRID = 100  # wall-time points per convergence curve
ORDER = ["fp32", "fp16", "int8"]  # precisions in plots and tables
PARTS = ["inference_s", "env_s", "pull_s", "deserialize_s", "load_s"]
PART_NAMES = {"inference_s": "step (inference)", "env_s": "env", "pull_s": "pull", "deserialize_s": "deserialize",
              "load_s": "load_state_dict"}


def published() -> pd.DataFrame:
    """The paper's time-to-reward table (quarl/data/actorq_time_to_reward.csv) with a bare task key."""
    with resources.files("quarl").joinpath("data/actorq_time_to_reward.csv").open() as f:
        df = pd.read_csv(f)
    df["key"] = df["task"].map(bare_name)
    return df


def runs(study: Study) -> pd.DataFrame:
    """The finished ActorQ records with `precision` (int8 / fp16 / fp32) and `update_period`."""
    done = study.done[study.done["quant"] == "actorq"].copy()
    done["precision"] = pd.to_numeric(done["quant.actor_bits"]).astype(int).map(PRECISIONS)
    done["update_period"] = pd.to_numeric(done["actorq.update_period"]).astype(int)
    return done


def smoothed(curves: pd.DataFrame, cell_key: str) -> pd.DataFrame:
    """One run's (wall_s, step, return) with the return averaged over the last RETURN_WINDOW episodes."""
    c = curves[curves["cell_key"] == cell_key].sort_values("wall_s")
    return pd.DataFrame({"wall_s": c["wall_s"].to_numpy(), "step": c["step"].to_numpy(),
                         "return": c["reward"].rolling(RETURN_WINDOW, min_periods=1).mean().to_numpy()})


def target(algo: str, env: str, per_run: dict[str, pd.DataFrame], rows: pd.DataFrame) -> tuple[float, str]:
    """The reward to reach: the paper's for this task, else the best return every precision reaches."""
    paper = published()
    hit = paper[(paper["algo"] == algo) & (paper["key"] == bare_name(env))]
    if len(hit):
        return float(hit.iloc[0]["reward_achieved"]), "paper"
    best = rows.groupby("precision")["cell_key"].apply(lambda keys: np.mean([per_run[k]["return"].max() for k in keys]))
    return float(best.min()), "lowest best return over precisions"


def time_to_reward(study: Study, curves: pd.DataFrame) -> pd.DataFrame:
    """Per (algo, env, update period, precision): wall seconds and env steps until the target return,
    mean over the seeds that reached it, and the speedup of each precision over fp32 actors."""
    done = runs(study)
    paper = published()
    out = []
    for (algo, env, period), rows in done.groupby(["algo", "env", "update_period"]):
        per_run = {k: smoothed(curves, k) for k in rows["cell_key"]}
        goal, source = target(algo, env, per_run, rows)
        for precision, group in rows.groupby("precision"):
            times, steps = [], []
            for key in group["cell_key"]:
                reached = per_run[key][per_run[key]["return"] >= goal]
                if len(reached):
                    times.append(reached["wall_s"].iloc[0])
                    steps.append(reached["step"].iloc[0])
            out.append({"algo": algo, "env": env, "update_period": period, "precision": precision, "target": goal,
                        "target_from": source, "time_s": np.mean(times) if times else np.nan,
                        "env_steps": np.mean(steps) if steps else np.nan,
                        "reached": f"{len(times)}/{len(group)}", "seeds": len(group)})
    table = pd.DataFrame(out)
    if table.empty:
        return table
    fp32 = table[table["precision"] == "fp32"].set_index(["algo", "env", "update_period"])["time_s"]
    table["speedup_vs_fp32"] = [fp32.get((r.algo, r.env, r.update_period), np.nan) / r.time_s for r in table.itertuples()]
    keys = paper.set_index(["algo", "key"])
    table["speedup (paper)"] = [
        keys["int8_speedup"].get((r.algo, bare_name(r.env)), np.nan) if r.precision == "int8" else np.nan
        for r in table.itertuples()
    ]
    return table


def convergence(study: Study, curves: pd.DataFrame, algo: str, env: str):
    """Return vs wall time for one task: a line per actor precision (mean over seeds, band ± 1.96 SE)."""
    done = runs(study)
    rows = done[(done["algo"] == algo) & (done["env"] == env)]
    with plots.styled():
        fig, axes = plots.new_figure(7.2, 4.2)
        ax = axes[0, 0]
        end = max(smoothed(curves, k)["wall_s"].max() for k in rows["cell_key"])
        grid = np.linspace(0, end, GRID)
        counts = []
        for precision, group in sorted(rows.groupby("precision"), key=lambda g: ORDER.index(g[0])):
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
            line, = ax.plot(grid, mean, label=f"{precision} actors (n = {len(lines)})")
            if len(lines) > 1:
                ax.fill_between(grid, mean - 1.96 * se, mean + 1.96 * se, color=line.get_color(), alpha=0.2, linewidth=0)
            counts.append(len(lines))
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel(f"training return (mean of last {RETURN_WINDOW} episodes)")
        ax.set_title(f"ActorQ {algo.upper()} on {env}")
        ax.legend(title="shaded: ±1.96 SE across seeds" if max(counts, default=1) > 1 else "one seed: no interval")
    return fig


def breakdown(study: Study, actors: pd.DataFrame) -> pd.DataFrame:
    """Per (algo, env, update period, precision): ms per actor step in each part, mean over actors and seeds."""
    done = runs(study)[["cell_key", "algo", "env", "update_period", "precision"]]
    df = actors.merge(done, on="cell_key")
    if df.empty:
        return pd.DataFrame()
    for part in PARTS:
        df[part] = 1e3 * df[part] / df["steps"].clip(lower=1)
    out = df.groupby(["algo", "env", "update_period", "precision"])[PARTS + ["steps_per_s"]].mean().reset_index()
    return out.rename(columns={p: f"{PART_NAMES[p]} (ms/step)" for p in PARTS})


def breakdown_figure(table: pd.DataFrame, algo: str, env: str):
    """Stacked bars of ms per actor step by part: a bar per precision, a panel per update period."""
    rows = table[(table["algo"] == algo) & (table["env"] == env)]
    periods = sorted(rows["update_period"].unique())
    columns = [f"{PART_NAMES[p]} (ms/step)" for p in PARTS]
    with plots.styled():
        fig, axes = plots.new_figure(3.6 * len(periods) + 1.5, 4.0, ncols=len(periods), sharey=True)
        for ax, period in zip(axes[0], periods):
            r = rows[rows["update_period"] == period].set_index("precision").reindex(ORDER).dropna(how="all")
            bottom = np.zeros(len(r))
            for column in columns:
                ax.bar(r.index, r[column], bottom=bottom, label=column.split(" (")[0])
                bottom += r[column].to_numpy()
            ax.set_title(f"pull every {period} steps")
            ax.set_xlabel("actor precision")
        axes[0, 0].set_ylabel("ms per actor step")
        axes[0, -1].legend(fontsize=8)
        fig.suptitle(f"ActorQ {algo.upper()} on {env}: where an actor's time goes")
    return fig


def write_actorq(study: Study, out: Path) -> list[Path]:
    """Curves, time-to-reward and breakdown outputs under `out`/actorq."""
    folder = out / "actorq"
    store = Store(study.store)
    curves, actors = store.curves(), store.actors()
    done = runs(study)
    written: list[Path] = []
    for (algo, env), _ in done.groupby(["algo", "env"]):
        name = tables.slug(f"{algo}_{env}")
        fig = convergence(study, curves, algo, env)
        written += plots.save(fig, folder / f"convergence_{name}")
    ttr = time_to_reward(study, curves)
    if len(ttr):
        written += tables.write(ttr, folder / "time_to_reward", "ActorQ: time to reward",
                                f"time_s / env_steps: until the mean return of the last {RETURN_WINDOW} training episodes "
                                "reaches the target (mean over the seeds that reached it; reached: seeds). "
                                "speedup_vs_fp32: fp32 actors' time / this precision's. "
                                "speedup (paper): QuaRL's int8 speedup (arXiv 1910.01055).")
    bd = breakdown(study, actors)
    if len(bd):
        written += tables.write(bd, folder / "breakdown", "ActorQ: actor runtime breakdown",
                                "ms per actor env step in each part, mean over actors and seeds; steps_per_s per actor.")
        for (algo, env), _ in bd.groupby(["algo", "env"]):
            written += plots.save(breakdown_figure(bd, algo, env), folder / tables.slug(f"breakdown_{algo}_{env}"))
    return written
