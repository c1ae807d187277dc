"""Python access to the results store."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from quarl.errors import QuarlError
from quarl.store import Store

DEFAULT_STORE = Path("outputs/results.sqlite")


def select(df: pd.DataFrame, filters: Mapping[str, Any]) -> pd.DataFrame:
    """Rows of `df` whose columns equal the filter values (compared as text, so `"4"` matches 4)."""
    for key, value in filters.items():
        if key not in df.columns:
            raise QuarlError(f"No column '{key}' in the store; filter by one of: {', '.join(df.columns)}.")
        wanted = str(int(value)) if isinstance(value, bool) else str(value)
        df = df[df[key].map(lambda v: str(int(v)) if isinstance(v, bool) else str(v)) == wanted]
    return df


def load(store: str | Path = DEFAULT_STORE, filters: Mapping[str, Any] | None = None, **kw: Any) -> pd.DataFrame:
    """Run records as a DataFrame, filtered by config keys.

    `filters` maps column names (``"quant.bits"``) to values; keyword arguments do the same with
    ``__`` for the dot: ``load(algo="dqn", quant__bits=4)``.
    """
    path = Path(store)
    if not path.exists():
        raise QuarlError(f"There is no results store at {path}: run `python run.py` first, or pass its path.")
    wanted = dict(filters or {})
    wanted.update({k.replace("__", "."): v for k, v in kw.items()})
    return select(Store(path).runs(), wanted).reset_index(drop=True)


def episodes(store: str | Path = DEFAULT_STORE) -> pd.DataFrame:
    """Per-episode rewards (cell_key, episode, seed, reward, length)."""
    return Store(store).episodes()
