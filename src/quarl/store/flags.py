"""Weak fp32 baselines: which records compare against an fp32 policy that did not learn its task
(no better than a random one) or did not solve it (below the env's reward threshold), and the
markers every table and listing gives them."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import pandas as pd
import yaml

from quarl.rl.baseline import fp32_flag

#: A weak fp32 baseline's kind -> its marker in every table and listing (`quarl.rl.baseline.fp32_flag`).
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
    """Each record's weak-baseline kind ('not learned', 'not solved' or None): the weaker of its
    `fp32_note` and the rule (`quarl.rl.baseline.fp32_flag`) applied to its fp32 reward and env
    settings, a setting the record predates taken as quarl ships it (a note written before
    `env.random_return` existed could only say 'not solved')."""

    def one(row: pd.Series) -> str | None:
        note = row.get("fp32_note")
        noted = flag_of(note) if isinstance(note, str) and note else None
        reward = pd.to_numeric(row.get("fp32_reward"), errors="coerce")
        if pd.isna(reward) or row.get("status", "done") != "done":
            return noted
        shipped = _shipped_env(str(row.get("env")))  # a setting the record predates: the env's as quarl ships it
        env = {k: shipped.get(k) if pd.isna(v := row.get(f"env.{k}")) else v for k in ENV_SETTINGS}
        found = fp32_flag(env, float(reward))
        return next((kind for kind in FLAGS if kind in {noted, found[0] if found else None}), None)

    if not len(runs):
        return pd.Series(dtype=object)
    kinds = runs.apply(one, axis=1)  # pandas may hold a string column's None as NaN, which is truthy
    return pd.Series([k if isinstance(k, str) else None for k in kinds], index=runs.index, dtype=object)


#: The env settings the weak-baseline rule reads (`quarl.rl.baseline.fp32_flag`).
ENV_SETTINGS = ("random_return", "return_scale", "id")


@lru_cache(maxsize=None)
def _shipped_env(name: str) -> dict[str, Any]:
    """The rule's settings of env `name` as quarl ships them (conf/env/<name>.yaml), for records
    written before a setting existed (env.random_return came after the first campaign); {} for an
    env quarl does not ship."""
    path = resources.files("quarl").joinpath(f"conf/env/{name}.yaml")
    if not name or ".." in name or not path.is_file():
        return {}
    settings = yaml.safe_load(path.read_text()) or {}
    return {k: settings.get(k) for k in ENV_SETTINGS}


def with_flags(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with `fp32_flag`: '† not learned' or '‡ not solved' where the record's fp32 baseline
    is weak (`flags`), else ''; the legend is `FLAG_LEGEND`."""
    return runs.assign(fp32_flag=flags(runs).map(lambda k: f"{FLAGS[k]} {k}" if isinstance(k, str) else ""))
