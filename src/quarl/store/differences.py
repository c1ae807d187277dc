"""Which config keys tell records apart: the settings that change a policy, those that change only its
evaluation (quant.backend, eval.*), and those that change no stored number (store paths, progress
bars); `quarl results`, `quarl export` and collation name records by them."""

from __future__ import annotations

import json
from typing import Any, Iterable

import pandas as pd

from quarl.store.query import comparable
from quarl.store.sqlite import RUN_COLUMNS, flatten

#: Config keys that never change a stored number (left out when looking for keys that tell records apart).
NEUTRAL_KEYS = frozenset(
    {
        "force",
        "train.progress",
        "eval.progress",
        "eval.n_envs",
        "train.device",
        "train.log_interval_s",
        "actorq.log_interval_s",
    }
)


NEUTRAL_PREFIXES = ("store.", "hydra.", "train.tracking.")

#: Keys set by choosing algo=NAME and env=NAME (env.id, env.return_scale, algo.hyperparams.*): named
#: to a user only where records of one algorithm and env disagree on them (an override).
GROUP_PREFIXES = ("algo.", "env.")
#: Keys that change how a policy is evaluated or executed, never the policy itself.
EVAL_ONLY_KEYS = frozenset({"quant.backend"})
EVAL_ONLY_PREFIXES = ("eval.",)
#: Config keys that repeat a run column (the filter `algo=dqn` is the key algo.name).
_AS_COLUMN = {"algo.name": "algo", "env.name": "env", "quant.method": "quant"}


def config_keys(runs: pd.DataFrame) -> list[str]:
    """The columns of `runs` that are config keys (from each record's stored config), less those
    that never change a result (store paths, progress bars, eval.n_envs, ...)."""
    keys: dict[str, None] = {}
    if "config" in runs.columns:
        for text in runs["config"].dropna().unique():
            try:
                keys.update(dict.fromkeys(flatten(json.loads(text))))
            except (TypeError, ValueError):
                continue
    else:  # frames without the config text: every column that is not a run field
        run_fields = {c.split()[0] for c in RUN_COLUMNS}
        keys.update(dict.fromkeys(c for c in runs.columns if c not in run_fields))
    return [k for k in keys if k in runs.columns and k not in NEUTRAL_KEYS and not k.startswith(NEUTRAL_PREFIXES)]


def boolean_keys(runs: pd.DataFrame) -> set[str]:
    """The config keys whose values are booleans in the stored configs (the store holds them as 1 / 0)."""
    found: set[str] = set()
    for text in runs["config"].dropna().unique() if "config" in runs.columns else []:
        try:
            found.update(k for k, v in flatten(json.loads(text)).items() if isinstance(v, bool))
        except (TypeError, ValueError):
            continue
    return found


def value_text(value: Any) -> str:
    v = comparable(value)
    if v is None:
        return "null"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _present(runs: pd.DataFrame) -> list[set[str]]:
    """Per record, the config keys its stored config has (a key added to quarl after a record was
    written is absent from it, which is not the same as a value of null)."""
    out = []
    for text in runs["config"] if "config" in runs.columns else [None] * len(runs):
        try:
            out.append(set(flatten(json.loads(text))) if text is not None else set(runs.columns))
        except (TypeError, ValueError):
            out.append(set(runs.columns))
    return out


def differing_keys(
    runs: pd.DataFrame, exclude: Iterable[str] = (), by: Iterable[str] = ("algo", "env", "quant")
) -> list[str]:
    """Config keys that tell `runs` apart beyond the columns `by` (algo, env, quant method).

    A key counts when records that share `by` disagree on it (null is a value: ``train.steps=null``
    is the default budget): ``train.steps`` of two budgets, ``quant.scheme``, ``seed``. Keys that
    only follow `by` (an algorithm's hyperparameters, a method's own options) do not, nor does a
    key that records written by an older quarl lack altogether.
    """
    skip = set(exclude)
    groups = [c for c in by if c in runs.columns]
    present = _present(runs)
    out = []
    for key in config_keys(runs):
        if key in skip or key in groups:
            continue
        has = pd.Series([key in p for p in present], index=runs.index, dtype=bool)
        values = runs.loc[has, key].map(value_text)
        if values.empty:
            continue
        spread = (
            values.groupby([runs.loc[has, c].astype(str) for c in groups]).nunique()
            if groups
            else pd.Series([values.nunique()])
        )
        if (spread > 1).any():
            out.append(key)
    return out


def eval_only(key: str) -> bool:
    """Whether `key` only changes how a policy is evaluated or executed (quant.backend, eval.*)."""
    return key in EVAL_ONLY_KEYS or key.startswith(EVAL_ONLY_PREFIXES)


def user_keys(runs: pd.DataFrame) -> list[str]:
    """The keys a user sets that tell `runs` apart, as a filter names them: algo, env, quant, then
    config keys (seed, train.steps, quant.bits, ...). A method's own keys (quant.*) count among
    records of one method, and keys that choosing the algorithm and env sets (env.id,
    algo.hyperparams.*) among records of one algorithm and env: where they only follow from those
    choices, they are not named. Keys that never change a result (store.*, ...) are left out."""
    columns = [c for c in ("algo", "env", "quant") if c in runs.columns and runs[c].map(value_text).nunique() > 1]
    within_method = set(differing_keys(runs, exclude=_AS_COLUMN, by=("quant",)))
    within_group = set(differing_keys(runs, exclude=_AS_COLUMN, by=("algo", "env")))

    def named(key: str) -> bool:
        if key.startswith(GROUP_PREFIXES):
            return key in within_group
        return key in within_method if key.startswith("quant.") else True

    return columns + [k for k in differing_keys(runs, exclude=_AS_COLUMN, by=()) if named(k)]


def same_policy(runs: pd.DataFrame) -> bool:
    """Whether `runs` hold one policy: they differ in no config key but evaluation-only ones."""
    return all(eval_only(k) for k in differing_keys(runs, by=()))
