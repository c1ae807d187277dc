"""DOC"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import gymnasium as gym
import numpy as np
import pandas as pd

from quarl import collate
from quarl.collate import actorq, trainings
from quarl.collate.frame import Study
from quarl.errors import QuarlError
from quarl.store.query import as_run
from quarl.store.sqlite import Store, rebuild

TABLE_ENVS = {"cartpole": "CartPole-v1", "mountaincar_continuous": "MountainCarContinuous-v0"}

CARTPOLE_ALGOS = ("dqn", "a2c", "ppo")  # the paper's sweet-spot and QAT algorithms on CartPole
#: The report folder's files: the report, the reasons for disagreements, wall times, figures.
REPORT, REASONS, WALL_TIMES, FIGURES = "README.md", "reasons.yaml", "wall_times.txt", "figures"


@dataclass
class Campaign:
    """The archived records: the done runs, and ActorQ's time to reward and actor breakdown
    (`quarl.collate.actorq`, from the records' curves and actors)."""

    runs: pd.DataFrame  # the records of quarl's default trainings (the paper's sections)
    time_to_reward: pd.DataFrame
    breakdown: pd.DataFrame
    actorq: Optional[Study] = None  # the ActorQ records, where there are any
    curves: pd.DataFrame = field(default_factory=pd.DataFrame)  # every record's training curve
    published: pd.DataFrame = field(default_factory=pd.DataFrame)  # zoo=sb2: the published agents' trainings
    robust: pd.DataFrame = field(default_factory=pd.DataFrame)  # train.robust trainings
    every: pd.DataFrame = field(default_factory=pd.DataFrame)  # every record, done or not


def _column(runs: pd.DataFrame, key: str, default: Any) -> pd.Series:
    """A config column, `default` where a record (written before the key existed) has none."""
    values = runs[key] if key in runs.columns else pd.Series(default, index=runs.index, dtype=object)
    return values.where(values.notna(), default)


def split(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(quarl's defaults, the published agents' trainings (zoo=sb2), robust trainings) of `runs`:
    the paper's sections read the first, each of the others its own section."""
    zoo, robust = _column(runs, "zoo", "rl_zoo3"), _column(runs, "train.robust", None)
    rule = pd.to_numeric(_column(runs, "quant.min_elements", 0), errors="coerce").fillna(0)
    defaults = (zoo == "rl_zoo3") & robust.isna() & (rule == 0)
    return runs[defaults], runs[(zoo != "rl_zoo3") & robust.isna()], runs[(zoo == "rl_zoo3") & robust.notna()]


def load_campaign(records: Path) -> Campaign:
    """The records under `records` (JSON files), through a store rebuilt from them."""
    if not records.is_dir():
        raise QuarlError(f"{records} is not a folder of records: give the campaign's docs/reproduction/records.")
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "report.sqlite")
        rebuild(records, store)
        every = as_run(store.runs())
        defaults, published_runs, robust = (with_series(part) for part in split(every))
        study = collate.load(store.path, {"quant": "actorq"})
        curves = store.curves()
        if study.empty:
            return Campaign(defaults, pd.DataFrame(), pd.DataFrame(), None, curves, published_runs, robust, every)
        ttr, parts = actorq.time_to_reward(study, curves), actorq.breakdown(study, store.actors())
    return Campaign(defaults, ttr, parts, study, curves, published_runs, robust, every)


def with_series(runs: pd.DataFrame) -> pd.DataFrame:
    """The done records, each with `series`: its algo, or where an (algo, env) holds several trainings
    the label of its training (`quarl.collate.trainings`, 'ppo (train.steps=8192)'), so that no table
    of the report pools two trainings as seeds. ActorQ records keep their algo (their own settings)."""
    done = runs[runs["status"] == "done"].reset_index(drop=True)
    done["series"] = done["algo"]
    policies = done["quant"] != "actorq"
    labels, _ = trainings.trainings(done[policies])
    done.loc[policies, "series"] = labels
    return done


def series_of(runs: pd.DataFrame, algo: str, env: str) -> list[str]:
    """The series of `algo` on `env` in `runs` (one per training; just `algo` where there is one or none)."""
    if "series" not in runs.columns:
        return [algo]
    found = sorted(set(runs.loc[(runs["algo"] == algo) & (runs["env"] == env), "series"]))
    return found or [algo]


def _of(runs: pd.DataFrame, series: str, env: str, **where: Any) -> pd.DataFrame:
    """The records of one series (a training's label, or the algo where `runs` has no `series`) on `env`."""
    column = "series" if "series" in runs.columns else "algo"
    return select(runs[runs[column].astype(str) == series], env=env, **where)


def _is(column: pd.Series, value: Any) -> pd.Series:
    """Column equals `value`, whatever type SQLite gave it (True/1, 8/8.0, 'affine')."""
    if isinstance(value, bool):
        return column.map(lambda v: v is not None and not pd.isna(v) and bool(v) == value)
    if isinstance(value, (int, float)):
        return pd.to_numeric(column, errors="coerce") == value
    return column.astype(str) == str(value)


def select(runs: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """Rows whose columns (`quant__bits` for `quant.bits`) equal the values; missing column: none."""
    mask = pd.Series(True, index=runs.index)
    for key, value in where.items():
        column = key.replace("__", ".")
        if column not in runs.columns:
            return runs.iloc[0:0]
        mask &= _is(runs[column], value)
    return runs[mask]


def threshold(env: str, env_id: Optional[str] = None) -> Optional[float]:
    """Gymnasium's reward threshold for the env (the return that counts as solved), if it has one."""
    env_id = env_id or TABLE_ENVS.get(env)
    try:
        return gym.spec(env_id).reward_threshold if env_id else None
    except gym.error.Error:
        return None


def _values(rows: pd.DataFrame, column: str, scale: float = 1.0) -> np.ndarray:
    return pd.to_numeric(rows[column], errors="coerce").dropna().to_numpy(dtype=float) * scale


def _not_learned(fp32: pd.DataFrame, env: str) -> str:
    """How many fp32 policies are below the env's reward threshold (the records' env id names it)."""
    env_id = str(fp32["env.id"].iloc[0]) if "env.id" in fp32.columns and not fp32.empty else None
    limit = threshold(env, env_id)
    if limit is None or fp32.empty:
        return ""
    below = int((pd.to_numeric(fp32["reward_mean"], errors="coerce") < limit).sum())
    return f"{below} of {len(fp32)} fp32 policies below the env's reward threshold {limit:g}" if below else ""


def _by_seed(cells: pd.DataFrame, column: str) -> pd.Series:
    """`column` per seed (the mean where a seed has several records)."""
    values = pd.to_numeric(cells[column], errors="coerce")
    return values.groupby(cells["seed"]).mean().dropna()


def sweep_of(run_dir: str) -> Optional[str]:
    """The named sweep a record's run dir belongs to (its job folder is named `+sweep=NAME,...`)."""
    found = re.search(r"\+sweep=([\w-]+)", str(run_dir))
    return found.group(1) if found else None
