"""QuaRL's published PTQ rewards (arXiv 1910.01055, Table 2), matched to quarl's cells.

The numbers ship as package data (`quarl/data/paper_ptq_rewards.csv`: algo, env, fp32, fp16,
e_fp16_pct, int8, e_int8_pct). The paper names environments 'CartPole', 'Breakout', 'Walker2D';
quarl names them 'cartpole', 'atari/breakout', 'bullet/walker2d' with Gymnasium ids such as
'CartPole-v1' or 'BreakoutNoFrameskip-v4'. Both are reduced to a bare lower-case name to match.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

import pandas as pd

#: Published column -> the column of quarl's error table it stands beside.
COLUMNS = {"fp32": "fp32", "fp16": "fp16", "e_fp16_pct": "E_fp16 (%)", "int8": "int8", "e_int8_pct": "E_int8 (%)"}


def packaged(filename: str, env_column: str) -> pd.DataFrame:
    """A table of published numbers shipped in quarl/data, with a `key` column (the bare name of
    `env_column`) for matching."""
    with resources.files("quarl").joinpath(f"data/{filename}").open() as f:
        df = pd.read_csv(f)
    df["key"] = df[env_column].map(bare_name)
    return df


@lru_cache(maxsize=1)
def table() -> pd.DataFrame:
    """The published PTQ rows, with a `key` column (bare env name) for matching."""
    return packaged("paper_ptq_rewards.csv", "env")


def bare_name(name: str) -> str:
    """'atari/breakout', 'BreakoutNoFrameskip-v4', 'ALE/Breakout-v5', 'Breakout' -> 'breakout'."""
    text = str(name).rsplit("/", 1)[-1]
    text = re.sub(r"-v\d+$", "", text)
    text = re.sub(r"(NoFrameskip|Deterministic|BulletEnv|PyBulletEnv)", "", text)
    text = re.sub(r"[^0-9a-z]", "", text.lower())
    return text


def lookup(algo: str, env: str, env_id: str | None = None) -> dict[str, float | str] | None:
    """The published numbers for (algo, env) as {fp32, fp16, e_fp16_pct, int8, e_int8_pct, env}
    (``env``: the paper's name), or None when the paper has no such cell."""
    df = table()
    keys = {bare_name(env)} | ({bare_name(env_id)} if env_id else set())
    rows = df[(df["algo"] == str(algo).lower()) & df["key"].isin(keys)]
    if rows.empty:
        return None
    row = rows.iloc[0]
    return {c: float(row[c]) for c in COLUMNS} | {"env": row["env"]}
