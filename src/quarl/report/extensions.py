"""The report's extensions: PTQ sweet spots on the algorithm x task pairs QuaRL skipped (sweep
ptq_extensions), each with whether its fp32 policies learned the task, and the pairs left to run
with their seeds so far and the command that runs the rest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from quarl.report import facts
from quarl.report.campaign import below_threshold, by_seed, of_series, select, series_of, sweep_of, threshold, values
from quarl.report.sweet_spots import agreement_reading, extension_finding, sweet_spot, sweet_table
from quarl.report.text import fmt, markdown

EXTENSIONS = "ptq_extensions"


def extension_pairs(runs: pd.DataFrame) -> list[tuple[str, str]]:
    """The (algo, env) pairs with records from the extensions sweep, in order."""
    if "run_dir" not in runs.columns:
        return []
    ext = runs[runs["run_dir"].map(sweep_of) == EXTENSIONS]
    return sorted({(str(a), str(e)) for a, e in zip(ext["algo"], ext["env"])})


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
    pair = of_series(runs, series, env)
    env_id = str(pair["env.id"].iloc[0]) if "env.id" in pair.columns else env
    fp32 = select(pair, quant="ptq", quant__bits=32)
    failed = below_threshold(fp32, env)
    learned = failed or "every fp32 policy at or above the env's reward threshold"
    if threshold(env, env_id) is None:
        per_seed = ", ".join(fmt(r, 1) for r in by_seed(fp32, "reward_mean"))
        learned = f"{env_id} has no reward threshold; fp32 reward per seed: {per_seed}"
    scales = values(pair, "env.return_scale") if "env.return_scale" in pair.columns else np.empty(0)
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
    named = facts.sweep(EXTENSIONS, sweeps)
    seeds = named.grid["seed"]
    ran = runs[runs["run_dir"].map(sweep_of) == EXTENSIONS] if "run_dir" in runs.columns else runs.iloc[0:0]
    conf = sweeps.parent
    rows = []
    for algo, env in named.pairs(conf):
        n = select(ran, algo=algo, env=env, quant="ptq", quant__bits=32)["seed"].nunique()
        if n < len(seeds):
            tuned = facts.tuned(algo, env, conf=conf)
            command = f"`python run.py -m +sweep={EXTENSIONS} algo={algo} env={env}`"
            rows.append([algo, env, f"{n} of {len(seeds)}", f"{int(tuned['n_timesteps']):,}", command])
    if not rows:
        return "Every pair that applies has run on all its seeds."
    return "Left to run (the store skips the seeds already done):\n\n" + markdown(
        ["algo", "env", "seeds run here", "training steps a seed", "command"], rows
    )
