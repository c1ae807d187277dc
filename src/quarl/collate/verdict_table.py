"""Each published PTQ cell of a study judged as a referee would (`quarl.collate.verdicts`): per
quantity (fp32, fp16, E_fp16, int8, E_int8), the paper's value, quarl's mean over seeds with its
Student-t 95% interval clipped to what the quantity can take, n, each seed's value (up to five),
the verdict within the stated margin and the seeds a decision would need."""

from __future__ import annotations

import numpy as np
import pandas as pd

from quarl.collate import published, stats, verdicts
from quarl.collate.frame import Results
from quarl.collate.tables import INT_BITS, QUANTITIES
from quarl.collate.trainings import base_algo

MAX_SHOWN = 5  # up to this many seeds, each seed's value is listed
CAPTION = (
    "Ours: mean over seeds with its Student-t 95% interval, clipped to what the quantity can take (a reward to the "
    "env's return range, E to the bounds that range and each seed's fp32 reward give; 'clipped' says where); n: seeds "
    "behind the value; per seed: each seed's value up to five seeds. Verdict (docs/collation.md, Verdicts): 'agrees "
    f"within ±m' where TOST passes at α = {verdicts.ALPHA:g} (m = {verdicts.E_MARGIN:g} points of E, or "
    f"{verdicts.SCALE_MARGIN:.0%} of the env's return scale for a reward), 'disagrees' where the 95% interval lies "
    "wholly beyond ±m, otherwise 'inconclusive' with the seeds outside ±m and the seeds a decision needs at power "
    f"{verdicts.POWER:g}. fp32 flag: † not learned, ‡ not solved in some seed."
)


def _per_seed(study: Results, algo: str, env: str, method: str | None) -> dict[str, pd.Series]:
    """Each quantity's value per seed (E in %), indexed by seed."""
    seeds = study.seeds[(study.seeds["algo"] == algo) & (study.seeds["env"] == env)]
    half = seeds[seeds["method"] == "fp16"].set_index("seed")
    int8 = seeds[(seeds["method"] == method) & (seeds["bits"] == INT_BITS)].set_index("seed")
    return {
        "fp32": study.fp32_of(algo, env, method),
        "fp16": half["reward"],
        "E_fp16 (%)": 100 * half["e"],
        "int8": int8["reward"],
        "E_int8 (%)": 100 * int8["e"],
    }


def _bounds(study: Results, env: str, quantity: str, fp32: pd.Series, seeds: pd.Index) -> tuple[float, float]:
    """What the mean of `quantity` over `seeds` can be: a reward the env's return range, E the mean
    over the seeds of (f - high) / |f| .. (f - low) / |f| in %; unbounded where no range is known."""
    found = study.return_ranges().get(env)
    if found is None:
        return -np.inf, np.inf
    if not quantity.startswith("E"):
        return found.low, found.high
    f = fp32.reindex(seeds).to_numpy(float)
    f = f[np.isfinite(f) & (f != 0)]
    if not f.size:
        return -np.inf, np.inf
    return float(np.mean((f - found.high) / np.abs(f))) * 100, float(np.mean((f - found.low) / np.abs(f))) * 100


def _margin(study: Results, env: str, quantity: str, value: float) -> tuple[float, str]:
    """The verdict's margin and its unit: 5 points of E, else 5% of the env's return scale."""
    if quantity.startswith("E"):
        return verdicts.E_MARGIN, " points"
    rows = study.done[study.done["env"] == env]
    column = rows["env.return_scale"] if "env.return_scale" in rows else pd.Series(dtype=float)
    scale = pd.to_numeric(column, errors="coerce").dropna()
    return verdicts.SCALE_MARGIN * (float(scale.iloc[0]) if len(scale) else abs(value)), ""


def verdict_table(study: Results, method: str | None, pairs: set[tuple[str, str]] | None = None) -> pd.DataFrame:
    """One row per published quantity of every series and env the paper has a PTQ row for (of
    `pairs` (algo, env) only, where given)."""
    rows = []
    env_ids = study.env_ids()
    for algo in sorted(study.seeds["algo"].unique()):
        for env in sorted(study.seeds.loc[study.seeds["algo"] == algo, "env"].unique()):
            paper = published.lookup(base_algo(algo), env, env_ids.get(env))
            if not paper or (pairs is not None and (algo, env) not in pairs):
                continue
            values = _per_seed(study, algo, env, method)
            for quantity in QUANTITIES:
                value = float(paper[next(k for k, v in published.COLUMNS.items() if v == quantity)])
                x = values[quantity].dropna()
                ci = stats.seed_interval(x.to_numpy(float))
                low, high = _bounds(study, env, quantity, values["fp32"], x.index)
                margin, unit = _margin(study, env, quantity, value)
                verdict = verdicts.compare(x.to_numpy(float), value, margin, unit)
                clipped = ci.has_ci and (ci.low < low or ci.high > high)
                rows.append(
                    {
                        "algo": algo,
                        "env": env,
                        "quantity": quantity,
                        "published": value,
                        "mean": ci.estimate,
                        "low": max(ci.low, low) if ci.has_ci else np.nan,
                        "high": min(ci.high, high) if ci.has_ci else np.nan,
                        "interval": "clipped" if clipped else "",
                        "n": ci.n_runs,
                        "per seed": ", ".join(f"{v:.4g}" for v in x) if 0 < len(x) <= MAX_SHOWN else "",
                        "verdict": verdict.text,
                        "seeds needed": verdict.seeds_needed if verdict.seeds_needed is not None else "",
                        "fp32 flag": study.flag(algo, env),
                    }
                )
    return pd.DataFrame(rows)
