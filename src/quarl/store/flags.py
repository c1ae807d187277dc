"""Weak fp32 baselines: which records compare against an fp32 policy that did not learn its task
(no better than a random one) or did not solve it (below the env's reward threshold), and the
markers every table and listing gives them."""

from __future__ import annotations

from typing import Any

import pandas as pd

from quarl.rl.baseline import fp32_flag

#: A weak fp32 baseline's kind -> its marker in every table and listing (`quarl.rl.envs.fp32_flag`).
FLAGS = {"not learned": "†", "not solved": "‡"}
FLAG_LEGEND = (
    "† fp32 not learned: the fp32 policy is no better than a random one, so E compares two unlearned policies; "
    "‡ fp32 not solved: its reward is below the env's reward threshold (the record's fp32_note says by how much)."
)


def flag_of(note: Any) -> str | None:
    """A record's `fp32_note` as its kind: 'not learned' (no better than a random policy), 'not
    solved' (below the env's reward threshold), or None (no note)."""
    if not isinstance(note, str) or not note:
        return None
    return "not learned" if "did not learn" in note else "not solved"


def flags(runs: pd.DataFrame) -> pd.Series:
    """Each record's weak-baseline kind ('not learned', 'not solved' or None): its `fp32_note`, or
    for a record written before notes were stored, the same rule (`quarl.rl.baseline.fp32_flag`)
    applied to its fp32 reward and env settings."""

    def one(row: pd.Series) -> str | None:
        note = row.get("fp32_note")
        if isinstance(note, str) and note:
            return flag_of(note)
        reward = pd.to_numeric(row.get("fp32_reward"), errors="coerce")
        if pd.isna(reward) or row.get("status", "done") != "done":
            return None
        env = {k: None if pd.isna(v := row.get(f"env.{k}")) else v for k in ("random_return", "return_scale", "id")}
        found = fp32_flag(env, float(reward))
        return found[0] if found else None

    if not len(runs):
        return pd.Series(dtype=object)
    kinds = runs.apply(one, axis=1)  # pandas may hold a string column's None as NaN, which is truthy
    return pd.Series([k if isinstance(k, str) else None for k in kinds], index=runs.index, dtype=object)


def with_flags(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with `fp32_flag`: '† not learned' or '‡ not solved' where the record's fp32 baseline
    is weak (`flags`), else ''; the legend is `FLAG_LEGEND`."""
    return runs.assign(fp32_flag=flags(runs).map(lambda k: f"{FLAGS[k]} {k}" if isinstance(k, str) else ""))
