"""The report's records: the campaign's archived JSONs read through a rebuilt store, split into
quarl's default trainings, the published agents' and the robust ones, and the small selections
every section makes of them (a series on an env, a column's values per seed, a weak baseline)."""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
import yaml

from quarl import collate
from quarl.collate import actorq_timing, trainings
from quarl.collate.bounds import return_range
from quarl.collate.frame import Results
from quarl.errors import QuarlError
from quarl.report import mechanisms
from quarl.report.text import TEMPLATES, UNBOUNDED
from quarl.rl.baseline import reward_threshold
from quarl.store.flags import FLAGS, flags
from quarl.store.query import as_run, effective_budget
from quarl.store.record_files import rebuild
from quarl.store.sqlite import Store

TABLE_ENVS = {"cartpole": "CartPole-v1", "mountaincar_continuous": "MountainCarContinuous-v0"}

CARTPOLE_ALGOS = ("dqn", "a2c", "ppo")  # the paper's sweet-spot and QAT algorithms on CartPole
#: The report folder's files: the report, the reasons for disagreements, wall times, figures.
REPORT, REASONS, WALL_TIMES, FIGURES = "README.md", "reasons.yaml", "wall_times.txt", "figures"


@dataclass
class Campaign:
    """The archived records: the done runs, and ActorQ's time to reward and actor breakdown
    (`quarl.collate.actorq_timing`, from the records' curves and actors)."""

    runs: pd.DataFrame  # the records of quarl's default trainings (the paper's sections)
    time_to_reward: pd.DataFrame
    breakdown: pd.DataFrame
    actorq: Optional[Results] = None  # the ActorQ records, where there are any
    curves: pd.DataFrame = field(default_factory=pd.DataFrame)  # every record's training curve
    published: pd.DataFrame = field(default_factory=pd.DataFrame)  # zoo=sb2: the published agents' trainings
    robust: pd.DataFrame = field(default_factory=pd.DataFrame)  # train.robust trainings
    every: pd.DataFrame = field(default_factory=pd.DataFrame)  # every record, done or not
    formats: pd.DataFrame = field(default_factory=pd.DataFrame)  # the default trainings' number-format cells


def _column(runs: pd.DataFrame, key: str, default: Any) -> pd.Series:
    """A config column, `default` where a record (written before the key existed) has none."""
    values = runs[key] if key in runs.columns else pd.Series(default, index=runs.index, dtype=object)
    return values.where(values.notna(), default)


@dataclass(frozen=True)
class Inputs:
    """What every section of the report reads: the campaign, the report's folder (reasons, wall
    times, figures), the named sweeps' folder, and whether figures are drawn."""

    campaign: Campaign
    folder: Path
    sweeps: Path
    reasons: dict[str, str]
    figures: bool
    files: int  # archived record files
    done: int  # of them, done cells

    @classmethod
    def read(cls, records: Path, folder: Path, sweeps: Path, figures: bool) -> "Inputs":
        """The inputs of a report of the records in `records`, written into `folder`."""
        campaign = load_campaign(records)
        reasons_file = folder / REASONS
        reasons = (yaml.safe_load(reasons_file.read_text()) or {}) if reasons_file.exists() else {}
        measured = {"q_gaps": mechanisms.q_gaps(folder)}  # what a reason may cite
        reasons = {key: TEMPLATES.from_string(str(text)).render(**measured) for key, text in reasons.items()}
        done = int((campaign.every["status"] == "done").sum()) if "status" in campaign.every.columns else 0
        files = sum(1 for _ in records.glob("*.record.json"))
        return cls(campaign, folder, sweeps, reasons, figures, files, done)

    @property
    def runs(self) -> pd.DataFrame:
        """The records of quarl's default trainings."""
        return self.campaign.runs

    @property
    def algos(self) -> list[str]:
        """The series of the paper's CartPole algorithms (one per training)."""
        return [series for algo in CARTPOLE_ALGOS for series in series_of(self.runs, algo, "cartpole")]

    @property
    def wall_times(self) -> str:
        """The campaign's wall times (`wall_times.txt`), or 'none yet'."""
        path = self.folder / WALL_TIMES
        return path.read_text().strip() if path.exists() else "none yet"


#: a record's number formats (weights, activations, input): `int` or absent everywhere for integer and float cells
FORMAT_KEYS = ("quant.format", "quant.act_format", "quant.input_format")


def in_a_format(runs: pd.DataFrame) -> pd.Series:
    """Whether each record has weights, activations or its input in a number format (`quant.format`...)."""
    found = pd.Series(False, index=runs.index)
    for key in FORMAT_KEYS:
        found |= _column(runs, key, "int").astype(str) != "int"
    return found


def split(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(quarl's defaults, the published agents' trainings (zoo=sb2), robust trainings, the default
    trainings' number-format cells) of `runs`: the paper's sections read the first, each of the
    others its own section (a format cell never pools with an integer one at its bits)."""
    zoo, robust = _column(runs, "zoo", "rl_zoo3"), _column(runs, "train.robust", None)
    rule = pd.to_numeric(_column(runs, "quant.min_elements", 0), errors="coerce").fillna(0)
    plain = (zoo == "rl_zoo3") & robust.isna() & (rule == 0)
    formats = in_a_format(runs)
    return (
        runs[plain & ~formats],
        runs[(zoo != "rl_zoo3") & robust.isna()],
        runs[(zoo == "rl_zoo3") & robust.notna()],
        runs[plain & formats],
    )


def load_campaign(records: Path) -> Campaign:
    """The records under `records` (JSON files), through a store rebuilt from them."""
    if not records.is_dir():
        raise QuarlError(f"{records} is not a folder of records: give the campaign's docs/reproduction/records.")
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "report.sqlite")
        if not rebuild(records, store, keep=lambda record: record["run"].get("quant") == "actorq"):
            raise QuarlError(
                f"{records} holds no quarl record (*record.json): give the campaign's docs/reproduction/records, "
                "or fill it first with --archive OUTPUTS."
            )
        every = effective_budget(as_run(store.runs()))
        plain, published_runs, robust, in_formats = split(every)
        defaults, published_runs, robust = (with_series(part) for part in (plain, published_runs, robust))
        both = with_series(pd.concat([plain, in_formats]))  # series named as the integer cells of their trainings
        formats = both[in_a_format(both)].reset_index(drop=True)
        study = collate.load(store.path, {"quant": "actorq"})
        curves = store.curves()
        if study.empty:
            return Campaign(
                defaults, pd.DataFrame(), pd.DataFrame(), None, curves, published_runs, robust, every, formats
            )
        ttr, parts = actorq_timing.time_to_reward(study, curves), actorq_timing.breakdown(study, store.actors())
    return Campaign(defaults, ttr, parts, study, curves, published_runs, robust, every, formats)


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


def of_series(runs: pd.DataFrame, series: str, env: str, **where: Any) -> pd.DataFrame:
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
    return reward_threshold(env_id or TABLE_ENVS.get(env))


def values(rows: pd.DataFrame, column: str, scale: float = 1.0) -> np.ndarray:
    """`column` of `rows` as numbers (missing ones left out, none where no record has the column), times `scale`."""
    if column not in rows.columns:
        return np.empty(0)
    return pd.to_numeric(rows[column], errors="coerce").dropna().to_numpy(dtype=float) * scale


def below_threshold(fp32: pd.DataFrame, env: str) -> str:
    """How many fp32 policies are below the env's reward threshold (the records' env id names it)."""
    env_id = str(fp32["env.id"].iloc[0]) if "env.id" in fp32.columns and not fp32.empty else None
    limit = threshold(env, env_id)
    if limit is None or fp32.empty:
        return ""
    below = int((pd.to_numeric(fp32["reward_mean"], errors="coerce") < limit).sum())
    return f"{below} of {len(fp32)} fp32 policies below the env's reward threshold {limit:g}" if below else ""


def reward_bounds(cells: pd.DataFrame) -> tuple[float, float]:
    """The return range of the env of `cells` (`quarl.collate.bounds`, from its records' env id and
    step limit), unbounded where the env's definition gives none: reward intervals are clipped to it."""
    if cells.empty or "env.id" not in cells.columns:
        return UNBOUNDED
    column = "env.kwargs.max_episode_steps"
    limit = pd.to_numeric(cells[column], errors="coerce").dropna() if column in cells.columns else pd.Series()
    found = return_range(str(cells["env.id"].iloc[0]), int(limit.iloc[0]) if len(limit) else None)
    return (found.low, found.high) if found is not None else UNBOUNDED


def e_bounds(frame: pd.DataFrame, reward: tuple[float, float]) -> tuple[float, float]:
    """What a mean of E (in %) over these records' seeds can be: each seed's E = (f - q) / |f| lies
    between (f - high) / |f| and (f - low) / |f| for its fp32 reward f and any quantized return q in
    the env's range `reward`; the mean's bounds are the means of those (unbounded where a range or f
    is missing)."""
    if frame.empty or "fp32_reward" not in frame.columns or not all(np.isfinite(reward)):
        return UNBOUNDED
    f = pd.to_numeric(frame["fp32_reward"], errors="coerce").to_numpy(float)
    f = f[np.isfinite(f) & (f != 0)]
    if not f.size:
        return UNBOUNDED
    return float(np.mean((f - reward[1]) / np.abs(f))) * 100, float(np.mean((f - reward[0]) / np.abs(f))) * 100


def difference_bounds(bounds: tuple[float, float]) -> tuple[float, float]:
    """What a difference of two rewards in `bounds` can be."""
    return bounds[0] - bounds[1], bounds[1] - bounds[0]


def unless_both_fail(verdict: str, means: Sequence[float], random: float | None, margin: float) -> str:
    """An 'equivalent' `verdict` of two sides whose `means` are both no better than a random policy's
    reward (within `margin`) said to be what it is: two failures agreeing says nothing."""
    if not verdict.startswith("equivalent") or random is None or any(m > random + margin for m in means):
        return verdict
    return f"both fail: {verdict}, but both stay at a random policy's reward ({random:g}): says nothing"


UNLEARNED_E = "its fp32 policy did not learn (†), and E between two unlearned policies says nothing"


def learned(cells: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """`cells` without the seeds whose fp32 policy did not learn (`quarl.store.flags`), and how many
    seeds that left out: their E compares two unlearned policies."""
    if cells.empty:
        return cells, 0
    unlearned = flags(cells) == "not learned"
    seeds = cells["seed"] if "seed" in cells.columns else pd.Series(0, index=cells.index)
    return cells[~unlearned], int(seeds[unlearned].nunique())


def series_flag(cells: pd.DataFrame) -> str:
    """'† fp32 not learned in 1 of 5 seeds' (or '‡ ... not solved ...') for the seeds of `cells`
    (any records of one series: each carries its fp32 reward), from `quarl.store.flags.flags`,
    the weakest kind first; '' where every seed's fp32 policy is sound."""
    if cells.empty:
        return ""
    kinds = flags(cells)
    seeds = cells["seed"] if "seed" in cells.columns else pd.Series(0, index=cells.index)
    per_seed = {seed: set(kinds[seeds == seed].dropna()) for seed in seeds.unique()}
    for kind, mark in FLAGS.items():
        count = sum(kind in found for found in per_seed.values())
        if count:
            return f"{mark} fp32 {kind} in {count} of {len(per_seed)} seeds"
    return ""


def by_seed(cells: pd.DataFrame, column: str) -> pd.Series:
    """`column` per seed (the mean where a seed has several records)."""
    values = pd.to_numeric(cells[column], errors="coerce")
    return values.groupby(cells["seed"]).mean().dropna()


def sweep_of(run_dir: str) -> Optional[str]:
    """The named sweep a record's run dir belongs to (its job folder is named `+sweep=NAME,...`)."""
    found = re.search(r"\+sweep=([\w-]+)", str(run_dir))
    return found.group(1) if found else None
