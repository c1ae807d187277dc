"""The reproduction report: QuaRL's published numbers beside quarl's, regenerated from records.

The campaign (`docs/reproduction/campaign.sh`) archives every record it lands as JSON under
`docs/reproduction/records/`. `quarl report` rebuilds a results store from those files in a
temporary folder and writes `docs/reproduction/README.md`: for every published cell the published
value, quarl's mean with its Student-t 95% interval and n, action agreement where it applies, and a
verdict; then the sweet spots, the noise of E against action agreement, QAT vs PTQ, and the
experiments not run here with their commands and costs. Reasons for disagreements that the records
cannot show by themselves (a different quantizer, an env version) live in `reasons.yaml` beside the
report; a disagreement with no reason says so. `quarl report --check` fails when the committed
report differs from what the records give.
"""

from __future__ import annotations

import json
import logging
import math
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import gymnasium as gym
import numpy as np
import pandas as pd
import yaml

from quarl import collate
from quarl.collate import actorq, published, trainings
from quarl.collate.frame import Study
from quarl.collate.stats import Interval, seed_interval
from quarl.collate.steps import Steps
from quarl.config import methods
from quarl.errors import QuarlError
from quarl.evaluate.fidelity import AGREEMENT_TOLERANCE
from quarl.rl import matrix as compat
from quarl.store.query import as_run
from quarl.store.sqlite import Store, find_records, rebuild

log = logging.getLogger(__name__)

REPORT, REASONS, WALL_TIMES, FIGURES = "README.md", "reasons.yaml", "wall_times.txt", "figures"
SWEET_FIGURE = "sweet_spot_cartpole.png"
TABLE_ENVS = {"cartpole": "CartPole-v1", "mountaincar_continuous": "MountainCarContinuous-v0"}
SWEET_BITS = (2, 3, 4, 5, 6, 7, 8, 32)
NO_REASON = "no reason established yet"
PUBLISHED_COLUMN = {ours: theirs for theirs, ours in published.COLUMNS.items()}  # "E_int8 (%)" -> "e_int8_pct"


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


def fmt(x: float, digits: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def shown(ci: Interval, digits: int = 2, bounds: tuple[float, float] = (-math.inf, math.inf)) -> str:
    """`mean [low, high]` (clipped to the quantity's `bounds`), or the mean with why there is no interval."""
    if ci.n_runs == 0:
        return "not run yet"
    if not ci.has_ci:
        return f"{fmt(ci.estimate, digits)} (one seed: no interval)"
    low, high = max(ci.low, bounds[0]), min(ci.high, bounds[1])
    return f"{fmt(ci.estimate, digits)} [{fmt(low, digits)}, {fmt(high, digits)}]"


FRACTION = (0.0, 1.0)  # action agreement: intervals clipped to what a fraction can be


def inside(value: float, ci: Interval, tolerance: float = 1e-6) -> bool:
    """The published value lies in the interval (a zero-width interval: equals the mean)."""
    if not ci.has_ci:
        return False
    return ci.low - tolerance <= value <= ci.high + tolerance


@dataclass
class Row:
    algo: str
    env: str
    quantity: str
    published: float
    ours: Interval
    agreement: Optional[Interval]
    verdict: str


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


def _ptq_rows(cells: pd.DataFrame, series: str, env: str, pub: pd.Series, reasons: dict[str, str]) -> list[Row]:
    """The published quantities of one series (a training of an algo; its label in the table's algo
    column) on `env` against its records; `reasons` are looked up by the plain algo name."""
    algo = trainings.base_algo(series)
    fp32 = select(cells, quant="fp32")
    fp16 = select(cells, quant="fp16")
    int8 = select(
        cells,
        quant="ptq",
        quant__bits=8,
        quant__scheme="symmetric",
        quant__granularity="per_tensor",
        quant__quantize_bias=False,
    )
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


def sweet_spot(runs: pd.DataFrame, algo: str, env: str = "cartpole") -> pd.DataFrame:
    """Reward and action agreement per bit width (the released code's formula) and fp16, across the
    seeds of one series (`algo`: the algo, or a training's label where `runs` has several)."""
    base = _of(runs, algo, env, train__keep_best=True)
    out = []
    for bits in SWEET_BITS:
        cells = select(base, quant="ptq", quant__bits=bits, quant__scheme="quarl_code")
        out.append(_summary(str(bits), cells))
    out.append(_summary("fp16", select(base, quant="fp16")))
    return pd.DataFrame(out)


def _summary(label: str, cells: pd.DataFrame) -> dict[str, Any]:
    reward = seed_interval(_values(cells, "reward_mean")) if not cells.empty else seed_interval([])
    agreement = seed_interval(_values(cells, "action_agreement")) if not cells.empty else seed_interval([])
    mad = _values(cells, "action_mad") if not cells.empty and "action_mad" in cells.columns else np.empty(0)
    errors = _values(cells, "rel_error") if not cells.empty else np.empty(0)
    agree = _values(cells, "action_agreement") if not cells.empty else np.empty(0)
    return {
        "bits": label,
        "reward": reward,
        "agreement": agreement,
        "n": reward.n_runs,
        "mad": seed_interval(mad),  # continuous actions: mean |a_q - a_fp32| as a fraction of the range
        "sd_E": float(np.std(errors, ddof=1)) if errors.size > 1 else float("nan"),
        "sd_agreement": float(np.std(agree, ddof=1)) if agree.size > 1 else float("nan"),
    }


def _by_seed(cells: pd.DataFrame, column: str) -> pd.Series:
    """`column` per seed (the mean where a seed has several records)."""
    values = pd.to_numeric(cells[column], errors="coerce")
    return values.groupby(cells["seed"]).mean().dropna()


def keeps_fp32(reward: float, fp32: float, env: str) -> bool:
    """Whether `reward` keeps the fp32 reward: within 5% of the env's reward threshold below it."""
    limit = threshold(env)
    return reward >= fp32 - (0.05 * abs(limit) if limit else 0.0)


def qat_vs_ptq(runs: pd.DataFrame, algo: str, env: str = "cartpole") -> pd.DataFrame:
    """QAT against PTQ of the fp32 policy at equal bits (affine, per tensor), across seeds.

    Besides each method's interval: the fp32 reward of the seeds' fp32 policies (what PTQ
    quantized), and QAT minus PTQ paired by seed (both start from the same seed's training, so the
    pairing removes the seed's luck) with its interval and the seeds where QAT was ahead. The verdict
    reads "nothing for QAT to recover" where PTQ already keeps the fp32 reward (within the resolution
    of the report's verdicts, 5% of the env's reward threshold)."""
    base = _of(runs, algo, env, train__keep_best=True, quant__scheme="affine", quant__granularity="per_tensor")
    rows = []
    for bits in range(2, 9):
        qat = select(base, quant="qat", quant__bits=bits)
        ptq = select(base, quant="ptq", quant__bits=bits)
        if qat.empty and ptq.empty:
            continue
        q = seed_interval(_values(qat, "reward_mean")) if not qat.empty else seed_interval([])
        p = seed_interval(_values(ptq, "reward_mean")) if not ptq.empty else seed_interval([])
        fp32 = seed_interval(_values(ptq, "fp32_reward")) if not ptq.empty else seed_interval([])
        paired = pd.concat([_by_seed(qat, "reward_mean"), _by_seed(ptq, "reward_mean")], axis=1, join="inner")
        diff = paired.iloc[:, 0] - paired.iloc[:, 1] if not paired.empty else pd.Series(dtype=float)
        d = seed_interval(diff.to_numpy())
        if not (q.has_ci and p.has_ci):
            verdict = "too few seeds to tell"
        elif keeps_fp32(p.estimate, fp32.estimate, env):
            verdict = "nothing for QAT to recover: PTQ keeps the fp32 reward"
        elif d.has_ci and d.low > 0:
            verdict = "QAT higher (paired interval above 0)"
        elif d.has_ci and d.high < 0:
            verdict = "PTQ higher (paired interval below 0)"
        else:
            ahead = f"{int((diff > 0).sum())} of {len(diff)}"
            verdict = f"no difference shown (paired interval includes 0); QAT ahead in {ahead} seeds"
        rows.append({"bits": bits, "qat": q, "ptq": p, "fp32": fp32, "diff": d, "verdict": verdict})
    return pd.DataFrame(rows)


def qat_finding(table: pd.DataFrame, algo: str, env: str = "cartpole") -> str:
    """One sentence per algorithm on the paper's QAT finding: the fewest bits at which each method
    keeps the fp32 reward (`keeps_fp32`), from the table's rows."""

    def fewest(column: str) -> str:
        kept = None  # the last width, going down from the widest, before the first that loses reward
        for _, r in table.sort_values("bits", ascending=False).iterrows():
            if not keeps_fp32(r[column].estimate, r["fp32"].estimate, env):
                break
            kept = int(r["bits"])
        return f"{kept} bits" if kept is not None else "none of the widths run"

    return f"{algo}: QAT keeps the fp32 reward down to {fewest('qat')}, PTQ down to {fewest('ptq')}."


EXTENSIONS = "ptq_extensions"
KEEP_FRACTION = 0.05  # an extension's width keeps fp32's reward within this fraction of the env's return scale


def extension_pairs(runs: pd.DataFrame) -> list[tuple[str, str]]:
    """The (algo, env) pairs with records from the extensions sweep, in order."""
    if "run_dir" not in runs.columns:
        return []
    ext = runs[runs["run_dir"].map(sweep_of) == EXTENSIONS]
    return sorted({(str(a), str(e)) for a, e in zip(ext["algo"], ext["env"])})


def extension_finding(table: pd.DataFrame, scale: float) -> str:
    """Which of 2..8 bits keep the fp32 (32-bit) mean reward, to within KEEP_FRACTION of the env's
    return scale, and whether they are every width down to the fewest (a sweet spot) or not."""
    fp32 = table.loc[table["bits"] == "32", "reward"]
    if fp32.empty or fp32.iloc[0].n_runs == 0:
        return "Sweet spot: n/a (no fp32 cell yet)."
    reference, tolerance = fp32.iloc[0].estimate, KEEP_FRACTION * scale
    run = {int(b): r for b, r in zip(table["bits"], table["reward"]) if b.isdigit() and int(b) <= 8 and r.n_runs}
    kept = [bits for bits in sorted(run, reverse=True) if run[bits].estimate >= reference - tolerance]
    share = f"{KEEP_FRACTION:.0%} of the env's return scale"
    rule = f"mean reward within {tolerance:g} ({share}) of the fp32 mean {fmt(reference)}"
    if not kept:
        return f"Sweet spot: none of {min(run)}..{max(run)} bits keeps the {rule}."
    widths = ", ".join(str(b) for b in kept)
    if kept == [b for b in sorted(run, reverse=True) if b >= kept[-1]]:
        return f"Sweet spot: {kept[-1]} bits, the fewest of the widths that keep the {rule} ({widths})."
    wider = ", ".join(str(b) for b in sorted(run, reverse=True) if b > kept[-1] and b not in kept)
    seeds = run[kept[-1]].n_runs
    why = f"with {seeds} seeds a width's mean moves with a single seed" if seeds > 1 else "each width is one policy"
    return f"No clean sweet spot: {widths} bits keep the {rule}, but {wider} bits, wider, do not; {why}."


def sweet_table(table: pd.DataFrame) -> str:
    """A `sweet_spot` table as Markdown: reward and action agreement per bit width, with intervals,
    and for continuous actions the mean action difference (agreement only counts a state within 5%)."""
    continuous = "mad" in table.columns and any(m.n_runs for m in table["mad"])
    header = ["weight bits", "reward [95% CI]", "action agreement [95% CI]"]
    header += ["action MAD, fraction of range [95% CI]"] if continuous else []
    return _markdown(
        [*header, "n", "sd of E", "sd of agreement"],
        [
            [
                r["bits"],
                shown(r["reward"]),
                shown(r["agreement"], 3, FRACTION),
                *([shown(r["mad"], 3, FRACTION)] if continuous else []),
                str(r["n"]),
                fmt(r["sd_E"], 4),
                fmt(r["sd_agreement"], 4),
            ]
            for _, r in table.iterrows()
        ],
    )


AGREEMENT_LOW = 0.5  # a width whose reward holds with agreement below this is explained by its MAD


def agreement_reading(table: pd.DataFrame, scale: float) -> str:
    """For continuous actions: the widths whose reward holds while agreement is low, read with the
    mean action difference ('' where there are none)."""
    fp32 = table.loc[table["bits"] == "32", "reward"]
    if fp32.empty or fp32.iloc[0].n_runs == 0 or not any(m.n_runs for m in table["mad"]):
        return ""
    reference, tolerance = fp32.iloc[0].estimate, KEEP_FRACTION * scale
    low = [
        f"{r['bits']} bits (agreement {fmt(r['agreement'].estimate, 3)}, MAD {fmt(r['mad'].estimate, 3)}: "
        + (
            "the actions move by more than the band on average)"
            if r["mad"].estimate > AGREEMENT_TOLERANCE
            else "within the band on average, but many states just outside it)"
        )
        for _, r in table.iterrows()
        if r["bits"].isdigit()
        and r["mad"].n_runs
        and r["agreement"].estimate < AGREEMENT_LOW
        and r["reward"].estimate >= reference - tolerance
    ]
    if not low:
        return ""
    return (
        f" Agreement is low while the reward holds at {'; '.join(low)}. Agreement counts a state only where "
        f"every action is within {AGREEMENT_TOLERANCE:.0%} of the range of fp32's (the band); the task tolerates "
        "these moves, so agreement is a threshold here and the MAD says how far the actions moved."
    )


def extensions_section(runs: pd.DataFrame) -> str:
    """Per pair run from the extensions sweep: the sweet-spot table, whether the fp32 policies
    learned their task, and the sweet spot."""
    blocks = [
        _extension_block(runs, series, env)
        for algo, env in extension_pairs(runs)
        for series in series_of(runs, algo, env)
    ]
    return "\n\n".join(blocks) if blocks else "Not run yet."


def _extension_block(runs: pd.DataFrame, series: str, env: str) -> str:
    """One series' (a training of an algo) sweet-spot table on `env`, whether its fp32 policies
    learned the task, and its sweet spot."""
    table = sweet_spot(runs, series, env)
    table = table[table["bits"] != "fp16"]  # the extensions sweep has no fp16 cells
    pair = _of(runs, series, env)
    env_id = str(pair["env.id"].iloc[0]) if "env.id" in pair.columns else env
    fp32 = select(pair, quant="ptq", quant__bits=32)
    failed = _not_learned(fp32, env)
    learned = failed or "every fp32 policy at or above the env's reward threshold"
    if threshold(env, env_id) is None:
        per_seed = ", ".join(fmt(r, 1) for r in _by_seed(fp32, "reward_mean"))
        learned = f"{env_id} has no reward threshold; fp32 reward per seed: {per_seed}"
    scales = _values(pair, "env.return_scale") if "env.return_scale" in pair.columns else np.empty(0)
    return (
        f"**{series}** on {env_id}, {len(fp32)} seed{'' if len(fp32) == 1 else 's'} ({learned}):\n\n"
        + sweet_table(table)
        + "\n\n"
        + (extension_finding(table, float(scales[0])) if scales.size else "Sweet spot: n/a (no return scale).")
        + (agreement_reading(table, float(scales[0])) if scales.size else "")
        + (" Read with care: it is measured on policies that did not all learn the task." if failed else "")
    )


def extensions_left(sweeps: Path, runs: pd.DataFrame) -> str:
    """The extensions sweep's algo x task pairs that apply, run here on fewer seeds than the sweep
    asks: each with its seeds so far, rl-zoo3's tuned budget and the command that runs the rest."""
    params = yaml.safe_load((sweeps / f"{EXTENSIONS}.yaml").read_text())["hydra"]["sweeper"]["params"]
    algos, envs, seeds = (str(params[key]).split(",") for key in ("algo", "env", "seed"))
    ran = runs[runs["run_dir"].map(sweep_of) == EXTENSIONS] if "run_dir" in runs.columns else runs.iloc[0:0]
    conf = sweeps.parent
    rows = []
    for env in envs:
        for algo in algos:
            if not compat.applies(conf, algo, env):
                continue
            n = select(ran, algo=algo, env=env, quant="ptq", quant__bits=32)["seed"].nunique()
            if n < len(seeds):
                tuned = yaml.safe_load((conf / "tuned" / algo / f"{env}.yaml").read_text())
                command = f"`python run.py -m +sweep={EXTENSIONS} algo={algo} env={env}`"
                rows.append([algo, env, f"{n} of {len(seeds)}", f"{int(tuned['n_timesteps']):,}", command])
    if not rows:
        return "Every pair that applies has run on all its seeds."
    return "Left to run (the store skips the seeds already done):\n\n" + _markdown(
        ["algo", "env", "seeds run here", "training steps a seed", "command"], rows
    )


def noise(runs: pd.DataFrame) -> pd.DataFrame:
    """How much E and action agreement each move between seeds, cell by cell: their standard
    deviations across seeds for every quantized cell measured on two seeds or more."""
    quantized = runs[runs["quant"].isin(["ptq", "fp16", "bf16", "qat"])]
    if quantized.empty or "action_agreement" not in quantized.columns:
        return pd.DataFrame()
    if "series" in quantized.columns:  # one training's seeds per row: its label stands as the algo
        quantized = quantized.assign(algo=quantized["series"])
    cell = [c for c in ("algo", "env", "quant", "quant.bits", "quant.scheme") if c in quantized.columns]
    rows = []
    for key, group in quantized.groupby(cell, sort=True, dropna=False):
        errors, agree = _values(group, "rel_error", 100.0), _values(group, "action_agreement", 100.0)
        if min(errors.size, agree.size) < 2:
            continue
        rows.append(
            {
                **dict(zip(cell, key)),
                "n": int(min(errors.size, agree.size)),
                "sd_E": float(np.std(errors, ddof=1)),
                "sd_agreement": float(np.std(agree, ddof=1)),
            }
        )
    return pd.DataFrame(rows)


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def sweep_of(run_dir: str) -> Optional[str]:
    """The named sweep a record's run dir belongs to (its job folder is named `+sweep=NAME,...`)."""
    found = re.search(r"\+sweep=([\w-]+)", str(run_dir))
    return found.group(1) if found else None


def not_run_here(sweeps: Path, runs: pd.DataFrame) -> str:
    """Every named sweep with the records archived from it so far, its cost and command (read from
    its header)."""
    archived = runs["run_dir"].map(sweep_of).value_counts() if "run_dir" in runs.columns else pd.Series(dtype=int)
    rows = []
    for path in sorted(sweeps.glob("*.yaml")):
        header = [
            line[2:] for line in path.read_text().splitlines() if line.startswith("# ") and "@package" not in line
        ]
        text = " ".join(header)
        cost = re.search(r"Cost[^:]*: (.*?)(?= Quantizer:| Policies:| Run:|$)", text)
        run = re.search(r"Run: (.*?)(?=\s{2,}|\(|$)", text)
        rows.append(
            [
                f"`{path.stem}`",
                str(int(archived.get(path.stem, 0))),
                (cost.group(1) if cost else "see its header").strip(),
                f"`{run.group(1).strip()}`" if run else f"`python run.py -m +sweep={path.stem}`",
            ]
        )
    return _markdown(["sweep", "records here", "cost (its header)", "command"], rows)


def figure(runs: pd.DataFrame, algos: list[str], out: Path) -> Path:
    """Reward and action agreement vs bits for each algorithm on CartPole (the released code's
    formula), mean and 95% interval over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = {a: sweet_spot(runs, a) for a in algos}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    x = np.arange(len(SWEET_BITS) + 1)
    labels = [*map(str, SWEET_BITS[:-1]), "fp32", "fp16"]
    for algo, table in tables.items():
        for ax, column in zip(axes, ("reward", "agreement")):
            mean = np.array([ci.estimate for ci in table[column]])
            err = np.array(
                [[ci.estimate - ci.low, ci.high - ci.estimate] if ci.has_ci else [0, 0] for ci in table[column]]
            ).T
            n = int(table["n"].max())
            ax.errorbar(x, mean, yerr=err, marker="o", capsize=3, label=f"{algo} (n={n} seeds)")
    for ax, title in zip(axes, ("reward (mean, 95% t-interval)", "action agreement with fp32")):
        ax.set_xticks(x, labels)
        ax.set_xlabel("weight bits (quant.scheme=quarl_code, per tensor, biases fp32)")
        ax.set_title(f"CartPole: {title}")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / SWEET_FIGURE
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


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
    return ACTORQ_NOTE + "\n\n" + _markdown(header, rows) + reading + "".join(f"\n\n{f}" for f in figures)


def actorq_reading(ttr: pd.DataFrame, done: pd.DataFrame) -> str:
    """One line per task and policy, from the table's numbers: whether the run can speak to time to
    reward at all (a precision none of whose seeds reached the target cannot), and how int8 actors
    moved each side's throughput."""
    lines = []
    for key, rows in ttr.groupby(actorq.SETTING[:3], sort=True):
        algo, env, network = key
        by = {r["precision"]: r for _, r in rows.iterrows()}
        if "fp32" not in by or "int8" not in by:
            continue
        rate = {}
        for precision in ("fp32", "int8"):
            cells = _setting(done, {**dict(zip(actorq.SETTING[:3], key)), "precision": precision})
            rate[precision] = (_rate(cells, "env_steps"), _rate(cells, "learner_steps"))
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
        lines.append(f"- {algo} on {env}, {network} policy: {verdict}; {pace}{acts}.")
    return "\n\nReading the table:\n\n" + "\n".join(lines) if lines else ""


CARTPOLE_ALGOS = ("dqn", "a2c", "ppo")  # the paper's sweet-spot and QAT algorithms on CartPole


def build(records: Path, folder: Path, sweeps: Path, figures: bool = True) -> str:
    """The report's Markdown from the records (and its figures, written into `folder` when
    `figures`); each part is shown as it runs (a bar on a terminal, a log line off one)."""
    with Steps("Building the reproduction report", total=9) as steps:
        steps.next(f"reading the records in {records}")
        campaign = load_campaign(records)
        runs = campaign.runs
        steps.next("the PTQ table")
        parts = [
            INTRO.format(n=len(runs), files=sum(1 for _ in records.glob("*.record.json"))),
            _ptq_section(runs, folder),
        ]
        algos = [series for algo in CARTPOLE_ALGOS for series in series_of(runs, algo, "cartpole")]
        steps.next("the sweet spots")
        parts.append(_sweet_section(runs, algos, folder, figures))
        steps.next("the seed-to-seed noise")
        parts.append(_noise_section(runs))
        steps.next("QAT vs PTQ")
        parts.append(_qat_section(runs, algos))
        steps.next("the extensions")
        parts.append(
            "## Beyond the paper: PTQ sweet spots on tasks QuaRL skipped\n\n"
            + EXTENSIONS_NOTE
            + "\n\n"
            + extensions_section(runs)
            + "\n\n"
            + extensions_left(sweeps, runs)
        )
        steps.next("the published conditions and training for robustness")
        from quarl.report import published_conditions, robustness  # they build on this module's helpers

        parts.append(
            "## The PTQ table under the published conditions\n\n"
            + PUBLISHED_NOTE
            + "\n\n"
            + published_conditions.section(runs, campaign.published)
        )
        parts.append("## Trained for robustness\n\n" + ROBUST_NOTE + "\n\n" + robustness.section(runs, campaign.robust))
        steps.next("ActorQ")
        curves = actorq_figures(campaign, folder, figures)
        parts.append("## ActorQ: fp32 vs int8 actors\n\n" + actorq_section(campaign, curves))
        steps.next("the named sweeps")
        parts.append(
            "## Every named sweep: records so far, cost, command\n\n"
            + LATER_NOTE
            + "\n\n"
            + not_run_here(sweeps, campaign.every)
        )
        from quarl.report import summary

        reasons = yaml.safe_load((folder / REASONS).read_text()) or {} if (folder / REASONS).exists() else {}
        parts.insert(
            1,
            summary.build(
                campaign,
                ptq_table(runs, reasons),
                published_conditions.rows(runs, campaign.published),
                robustness.tables(runs, campaign.robust),
            ),
        )
    wall = (folder / WALL_TIMES).read_text().strip() if (folder / WALL_TIMES).exists() else "none yet"
    parts.append("## Wall time of each part on this machine\n\n```\n" + wall + "\n```")
    return "\n\n".join(p for p in parts if p).rstrip() + "\n"


def _ptq_section(runs: pd.DataFrame, folder: Path) -> str:
    """The PTQ table against the published rows (reasons from `folder`/reasons.yaml), then the fp32 policies."""
    reasons_file = folder / REASONS
    reasons = yaml.safe_load(reasons_file.read_text()) or {} if reasons_file.exists() else {}
    table = ptq_table(runs, reasons)
    section = (
        "## PTQ table, classic-control rows\n\n"
        + TABLE_NOTE
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
    return section + ("\n\n### The fp32 policies\n\n" + KEPT_NOTE + "\n\n" + kept if kept else "")


def _sweet_section(runs: pd.DataFrame, algos: list[str], folder: Path, figures: bool) -> str:
    """The sweet-spot table of each series on CartPole, and its figure (drawn when `figures`)."""
    sweet = [f"**{algo}** on CartPole:\n\n" + sweet_table(sweet_spot(runs, algo)) for algo in algos]
    has_sweet = any((sweet_spot(runs, a)["n"] > 0).any() for a in algos)
    if has_sweet and figures:
        figure(runs, algos, folder / FIGURES)
    return (
        "## PTQ sweet spots\n\n"
        + SWEET_NOTE
        + "\n\n"
        + "\n\n".join(sweet)
        + (f"\n\n![sweet spots]({FIGURES}/{SWEET_FIGURE})" if has_sweet else "")
    )


def _noise_section(runs: pd.DataFrame) -> str:
    """How much E and agreement move between seeds ('' when no cell has two seeds)."""
    spread = noise(runs)
    if spread.empty:
        return ""

    def label(r: pd.Series) -> str:  # an integer method's cells differ in bits and scheme: name them
        integer = methods.get(str(r["quant"])).integer
        return f"{r['quant']} {int(r['quant.bits'])}-bit {r['quant.scheme']}" if integer else str(r["quant"])

    return (
        "## How much E and action agreement move between seeds\n\n"
        + NOISE_NOTE
        + "\n\n"
        + _markdown(
            ["algo", "env", "cell", "seeds", "sd of E (points of %)", "sd of agreement (points of %)"],
            [
                [r["algo"], r["env"], label(r), str(r["n"]), fmt(r["sd_E"]), fmt(r["sd_agreement"])]
                for _, r in spread.iterrows()
            ],
        )
    )


def _qat_section(runs: pd.DataFrame, algos: list[str]) -> str:
    """QAT against PTQ per series on CartPole, and the finding read across the tables."""
    qat, findings = [], []
    for algo in algos:
        t = qat_vs_ptq(runs, algo)
        if t.empty:
            continue
        findings.append(qat_finding(t, algo))
        qat.append(
            f"**{algo}** on CartPole:\n\n"
            + _markdown(
                [
                    "bits",
                    "QAT reward [95% CI]",
                    "n",
                    "PTQ reward [95% CI]",
                    "n",
                    "fp32 reward [95% CI]",
                    "QAT - PTQ, paired by seed [95% CI]",
                    "verdict",
                ],
                [
                    [
                        str(r["bits"]),
                        shown(r["qat"]),
                        str(r["qat"].n_runs),
                        shown(r["ptq"]),
                        str(r["ptq"].n_runs),
                        shown(r["fp32"]),
                        shown(r["diff"]),
                        r["verdict"],
                    ]
                    for _, r in t.iterrows()
                ],
            )
        )
    if findings:
        qat.append("Read across the tables: " + " ".join(findings))
    return "## QAT vs PTQ\n\n" + QAT_NOTE + "\n\n" + ("\n\n".join(qat) if qat else "Not run yet.")


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


INTRO = """# QuaRL reproduced with quarl

QuaRL's published numbers (arXiv 1910.01055) beside quarl's, for the experiments run on this
machine (2 CPU cores). Generated by `quarl report` from {files} archived records ({n} done cells)
in `records/`; do not edit by hand: run

```bash
bash docs/reproduction/campaign.sh          # the campaign, resumable (skips done cells)
quarl report                                # this file, from docs/reproduction/records
```

Every quarl number is a mean over seeds with its Student-t 95% confidence interval and n (the
seeds behind it; intervals of action agreement are clipped to [0, 1]). A verdict "agrees" means
the published value lies inside that interval and the interval is narrow enough to say so (a
half-width within 5% of the env's return scale, or 5 points of E); "inconclusive" means it lies
inside a wider one; a disagreement says why (from the records, or from `reasons.yaml` beside this
file). E is
(R_fp32 - R_q) / |R_fp32| in percent; action agreement is the fraction of the states the fp32
policy visits where the quantized policy acts the same (README: What a record measures)."""

TABLE_NOTE = """Sweep `ptq_table_classic` (five seeds): int8 is symmetric per-tensor weights with fp32 biases,
the closest to the TFLite weight quantization behind the published column (the sweep's header
says why); fp16 casts weights and biases. The paper reports one run per cell, without an
interval."""

KEPT_NOTE = """Every policy is the best of its training's periodic evaluations (`train.keep_best=true`, as
rl-zoo3's EvalCallback keeps `best_model.zip`), on evaluation seeds disjoint from the study's. The
paper quantized rl-zoo agents that had solved their tasks; a policy below the env's reward
threshold is flagged here and in the verdicts rather than averaged in silently."""

SWEET_NOTE = """Sweep `ptq_classic` (five seeds): weights at 2..8 bits with the formula of QuaRL's released code
(`quant.scheme=quarl_code`, per tensor, biases fp32), which made the published sweet-spot plots;
fp16 from `ptq_table_classic`. `sd of E` and `sd of agreement` are the standard deviations
across seeds: how much each measure of the same cells moves from seed to seed."""

EXTENSIONS_NOTE = """Sweep `ptq_extensions`: the classic-control and Box2D tasks the paper did not quantize, with the
sweet-spot quantizer (`quant.scheme=quarl_code`, per tensor, biases fp32), rl-zoo3's tuned budgets and
the kept best policy, three seeds. Its whole grid (19 algo x task pairs) is about 16 CPU-hours at the
rates measured here, most of it the off-policy trainings on LunarLanderContinuous; the pairs below
are the ones run on this machine so far, and the table after them lists the pairs left, each with
its command. `32` is the fp32 policy. A pair's fp32 policies are checked against the env's reward
threshold, so a sweet spot is read on policies that learned their task. A width keeps the fp32
reward when its mean is within 5% of the env's return scale of the fp32 mean; the sweet spot is
the fewest bits down to which every width keeps it."""

NOISE_NOTE = """Every quantized cell measured on two seeds or more: the standard deviation across seeds of E
and of action agreement, both in percentage points. Reward over ten episodes moves with the
episodes a policy happens to meet; agreement compares actions state by state."""

QAT_NOTE = """Sweep `qat_classic` at 2, 4, 6 and 8 bits, three seeds: QAT (fake quantization from half the
budget, affine per tensor) against PTQ of the fp32 policy with the same quantizer. The paper's
finding is that QAT keeps reward down to 5-6 bits and beats PTQ at equal bits. A seed's QAT and
fp32 trainings share their first half, so the difference QAT - PTQ is also given paired by seed.
"Keeps the fp32 reward": a mean within 5% of the env's reward threshold of the fp32 policies' mean;
where PTQ already does, there is nothing for QAT to recover."""

ACTORQ_NOTE = """Sweeps `actorq_gym` (DQN with rl-zoo3's tuned 256x256 Q-network and budget on CartPole,
MountainCar and Acrobot, three seeds), `actorq_wide` (DQN with the published 3x2048 policy on
CartPole), `d4pg_cartpole` (D4PG with the published 3x2048 policy on DeepMind Control cartpole
balance) and `d4pg_cartpole_cpu` (the same with 256x256 networks, whose learner keeps up on this
CPU), one seed each but `actorq_gym`; fp32 vs int8 actors, four actors and the learner on one core
of this CPU (the paper's learner ran on a V100, for far longer). Time to target: wall seconds
until the mean return of the last training episodes reaches the paper's return; a run that never
reached it counts at its whole run time, so the value is a lower bound (≥) and a speedup is given
only as far as the bounds allow (– when both runs are bounds). Actor inference: ms per actor env
step spent running the policy (`quarl.collate.actorq`: the actors' runtime breakdown); env steps/s
and learner updates/s: the whole run's throughput on each side, so a run whose learner sets the
pace (few updates/s, actors waiting on the samples-per-insert limit) gains little from faster
actors. On one core the actors and the learner take turns, so an actor's ms/step includes the
time it waited for the core. Final eval
reward: the learner's final fp32 policy over ten evaluation episodes. In the figures, the dashed
line is the target and the grey band a uniformly random policy's return (mean ± sd), where
measured: a curve above the band learned something."""

PUBLISHED_NOTE = """Sweep `ptq_table_published` (five seeds, the same keep-best and evaluation as the PTQ table):
the int8 cell of each classic-control row three ways. quarl's defaults train rl-zoo3's tuned network
and quantize every weight. `zoo=sb2` trains the network and hyperparameters the published agent had,
read from rl-baselines-zoo's saved model (`src/quarl/conf/tuned/sb2/`, each file citing its sources;
SB3 has no dueling head or layer norm, so the DQN here is one 64-unit ReLU layer, which has no weight
of 1024 elements or more either). TFLite's rule (`quant.min_elements=1024`) leaves every weight
under 1024 elements in float, as the converter behind the published int8 column did
(`tensorflow/lite/tools/optimize/quantize_weights.cc`, `kWeightsMinNumElementsDefault`). The bytes
column is the int8 policy's size over fp32's: 1.00 means no weight was quantized."""

ROBUST_NOTE = """Sweep `ptq_robust`: policies trained with `train.robust=sam` (sharpness-aware minimisation with the
previous step's gradient as the ascent direction, rho 0.05) or `train.robust=noise` (uniform
pseudo-quantization noise of half a 4-bit step on every weight, drawn anew each step), then
quantized like the sweet spots (the released code's formula at 2..8 bits). Each robust policy has a
plain twin: the same seed, tuned budget and keep-best, from `ptq_classic` (CartPole) or
`ptq_extensions`. Differences are robust minus plain, seed by seed, with their Student-t interval; a
robust training that costs fp32 reward shows it in its 32-bit row."""

LATER_NOTE = """The campaign runs part by part (`docs/reproduction/campaign.sh`). Every named sweep is listed
with the records archived from it so far (0: not run yet; the larger rows are meant for a cluster or
a GPU), the cost its header states and the exact command."""


def archive(root: Path, records: Path) -> int:
    """Copy every done record found under `root` (run dirs' JSON copies) into `records`, one file a
    cell named by its key; returns how many files it holds now."""
    records.mkdir(parents=True, exist_ok=True)
    for record in find_records(root):
        if record["run"]["status"] == "done":
            text = json.dumps(record, indent=1, sort_keys=True, default=str)
            (records / f"{record['run']['cell_key']}.record.json").write_text(text + "\n")
    return sum(1 for _ in records.glob("*.record.json"))


def write(records: Path, folder: Path, sweeps: Path) -> Path:
    """Regenerate the report (and its figure) in `folder`."""
    text = build(records, folder, sweeps)
    path = folder / REPORT
    path.write_text(text)
    return path


def check(records: Path, folder: Path, sweeps: Path) -> list[str]:
    """Lines where the committed report and the records' report differ (empty: they match)."""
    import difflib

    committed = (folder / REPORT).read_text() if (folder / REPORT).exists() else ""
    fresh = build(records, folder, sweeps, figures=False)
    return list(
        difflib.unified_diff(committed.splitlines(), fresh.splitlines(), "committed", "from records", lineterm="", n=0)
    )
