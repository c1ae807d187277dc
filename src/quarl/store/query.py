"""Python access to the results store, and the one query that every command uses.

Filter grammar (``quarl results``, ``status``, ``export``, ``collate`` and `load` alike): ``KEY=VALUE``
selects the records whose column KEY holds VALUE. ``a,b`` means either (as in a Hydra sweep
override); a number matches whatever type the column holds (``quant.bits=4`` matches 4 and 4.0);
``true`` / ``false`` match booleans (stored as 1 / 0); ``null`` matches a missing value. The
budget has one name: records are read with ``train.steps`` at its effective value (a null budget
is the algorithm's tuned ``algo.n_timesteps``, `as_run`), so ``train.steps=100000`` finds PPO
CartPole's default run, and ``train.steps=null`` still selects the records trained on their
algorithm's default budget. An unknown KEY is refused with the nearest column names.

Reading never creates or changes a store: it is opened read-only (`Store(path, read_only=True)`), a
missing path is one sentence, and no file is made.
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd
from omegaconf import OmegaConf

from quarl.errors import QuarlError
from quarl.store.sqlite import Store

DEFAULT_STORE = Path("outputs/results.sqlite")
_NULL = ("null", "none", "nan", "")
_BOOLS = {"true": 1.0, "false": 0.0}


def float_bits() -> dict[str, int]:
    """Methods without a bit width (the registry's float methods, `QuantMethod.float_width`), and the
    width they stand for, the baseline first."""
    from quarl.config import method_registry  # light: the method modules import no torch

    return method_registry.float_widths()


def weight_bits(quant: Any) -> int:
    """The width of a record's policy weights (its `quant` config): the width its method uses where
    that is not quant.bits (fp16: 16, whatever an older record stores; ActorQ: its actors'), else the
    widest of quant.bits and the quant.layer_bits of single layers."""
    from quarl.config import method_registry  # light: the method modules import no torch

    known = method_registry.REGISTRY.get(str(quant.get("method")))
    node = quant if OmegaConf.is_config(quant) else OmegaConf.create(dict(quant))
    used = known.used_bits(node) if known is not None else None
    if used is not None:
        return used
    layers = quant.get("layer_bits") or {}
    return max([int(quant.get("bits", 32)), *(int(b) for b in layers.values())])


def comparable(value: Any) -> Any:
    """A stored or typed value in the form filters compare: numbers as float, text as text, None for missing."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and math.isnan(value) else float(value)
    text = str(value).strip()
    if text.lower() in _NULL:
        return None
    if text.lower() in _BOOLS:
        return _BOOLS[text.lower()]
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def _wanted(value: Any) -> set[Any]:
    """A filter value as the set of normalised values it accepts (``"dqn,ppo"``: either)."""
    if isinstance(value, (list, tuple, set)):
        items: Iterable[Any] = value
    else:
        text = str(value) if not isinstance(value, (bool, int, float)) else None
        items = [value] if text is None or text[:1] in "[{" else [v.strip() for v in text.split(",")]
    return {comparable(v) for v in items}


BUDGET, DEFAULT_BUDGET = "train.steps", "algo.n_timesteps"


def select(df: pd.DataFrame, filters: Mapping[str, Any]) -> pd.DataFrame:
    """Rows of `df` that match every filter (the grammar is in this module's docstring)."""
    for key, value in filters.items():
        if key not in df.columns:
            near = difflib.get_close_matches(key, [str(c) for c in df.columns], n=3, cutoff=0.5)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise QuarlError(f"No column '{key}' in the store to filter by{hint}; `quarl results --all` lists them.")
        wanted = _wanted(value)
        values = df[key].map(comparable)
        match = values.isin(wanted - {None})
        if None in wanted:
            match |= values.isna()
            if key == BUDGET and DEFAULT_BUDGET in df.columns:  # null: the algorithm's default budget
                match |= values.notna() & (values == df[DEFAULT_BUDGET].map(comparable))
        df = df[match]
    return df


def effective_budget(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with a null `train.steps` replaced by the algorithm's tuned budget (`algo.n_timesteps`),
    as the run trained: one name per budget. A pretrained policy (`policy.source` other than train)
    trained on nothing quarl chose, and keeps its null."""
    if BUDGET not in runs.columns or DEFAULT_BUDGET not in runs.columns:
        return runs
    source = runs["policy.source"] if "policy.source" in runs.columns else pd.Series(None, index=runs.index)
    fill = runs[BUDGET].isna() & runs[DEFAULT_BUDGET].notna() & (source.isna() | (source == "train"))
    if not fill.any():
        return runs
    out = runs.copy()
    out[BUDGET] = out[BUDGET].astype(object)
    out.loc[fill, BUDGET] = [int(v) for v in out.loc[fill, DEFAULT_BUDGET]]
    return out


def open_store(store: str | Path) -> Store:
    """The existing store at `store`, opened read-only: a missing file, or an SQLite file that is
    not a quarl store, is one sentence, and nothing is created or written."""
    path = Path(store)
    if path.is_dir():
        raise QuarlError(f"The results store {path} is a folder: give its file, e.g. {path / 'results.sqlite'}.")
    if not path.is_file():
        raise QuarlError(f"There is no results store at {path}: run `python run.py` first, or pass --store PATH.")
    return Store(path, read_only=True)


def as_run(runs: pd.DataFrame) -> pd.DataFrame:
    """Records as they ran: a method that overrides quant.bits (fp16, bf16, fp32; ActorQ: its
    actors') shows the width it used, whatever a record written before that rule stores (a named
    sweep's fp16 records said quant.bits=8). Their cell keys are untouched."""
    from quarl.config import method_registry

    if runs.empty or "quant.bits" not in runs.columns:
        return runs
    out = runs.copy()
    config = [c for c in runs.columns if c.startswith("quant.")]
    for name, rows in runs.groupby("quant"):
        method = method_registry.REGISTRY.get(str(name))
        if method is None or method.used_bits(_quant_of(rows.iloc[0], config)) is None:
            continue  # quant.bits is the method's own setting (PTQ, QAT; a PTQ format's is stored settled)
        used = [method.used_bits(_quant_of(row, config)) for _, row in rows.iterrows()]
        # where it is the setting (PTQ's integer cells beside its quant.format ones), the stored value stays
        out.loc[rows.index, "quant.bits"] = [b if u is None else u for u, b in zip(used, rows["quant.bits"])]
    return out


def _quant_of(row: pd.Series, columns: list[str]) -> Any:
    """A record's quant settings (its `quant.*` columns) as a config node."""
    values = {c.split(".", 1)[1]: v.item() if hasattr(v, "item") else v for c, v in row[columns].items()}
    return OmegaConf.create(
        {k: v for k, v in values.items() if "." not in k and not (isinstance(v, float) and math.isnan(v))}
    )


def read_runs(store: str | Path) -> pd.DataFrame:
    """Every record of the existing store at `store`, as it ran (`as_run`, `effective_budget`)."""
    return effective_budget(as_run(open_store(store).runs()))


def query(store: str | Path, filters: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The records of `store` that match `filters`, one row each: the query behind every command."""
    return select(read_runs(store), dict(filters or {})).reset_index(drop=True)


def load(store: str | Path = DEFAULT_STORE, filters: Mapping[str, Any] | None = None, **kw: Any) -> pd.DataFrame:
    """Run records as a DataFrame, filtered by config keys.

    `filters` maps column names (``"quant.bits"``) to values; keyword arguments do the same with
    ``__`` for the dot: ``load(algo="dqn", quant__bits=4)``. Values follow the filter grammar
    (``{"algo": "dqn,ppo", "train.steps": None}``).
    """
    wanted = dict(filters or {})
    wanted.update({k.replace("__", "."): v for k, v in kw.items()})
    return query(store, wanted)


def episodes(store: str | Path = DEFAULT_STORE) -> pd.DataFrame:
    """Per-episode rewards (cell_key, episode, seed, reward, length)."""
    return open_store(store).episodes()
