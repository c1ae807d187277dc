"""What a search reads and writes: a trial's objective values from its cells' records in the results
store (a mean over its seeds, with the per-seed values and spread kept as Optuna user attributes),
and, at the end of a search, the best trial's hyperparameters as YAML and the figures of the study.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra_plugins.quarl_sweeper.search_space import Objective, Param, SearchSettings
from quarl.collate.search import complete, figures
from quarl.store import studies

log = logging.getLogger(__name__)

FAILED_CELLS = studies.FAILED_CELLS  # user attribute of a trial that failed for a reason a rerun repeats


def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=120)
    con.row_factory = sqlite3.Row
    return con


def numeric_columns(store: Path) -> list[str]:
    """The numeric columns of the store's `runs` table (none where there is no store yet)."""
    if not store.exists():
        return []
    try:
        with _connect(store) as con:
            rows = con.execute("PRAGMA table_info(runs)").fetchall()
    except sqlite3.Error:
        return []
    return [row["name"] for row in rows if str(row["type"]).upper() in ("REAL", "INTEGER")]


def records(cells: Sequence[tuple[Path, str] | None]) -> list[dict[str, Any] | None]:
    """The stored record (the `runs` row) of each (store, cell key), None where there is none."""
    found: dict[tuple[Path, str], dict[str, Any]] = {}
    by_store: dict[Path, list[str]] = {}
    for cell in cells:
        if cell is not None:
            by_store.setdefault(cell[0], []).append(cell[1])
    for store, keys in by_store.items():
        if not store.exists():
            continue
        with _connect(store) as con:
            marks = ", ".join("?" for _ in keys)
            for row in con.execute(f"SELECT * FROM runs WHERE cell_key IN ({marks})", keys):
                found[(store, row["cell_key"])] = dict(row)
    return [found.get(cell) if cell is not None else None for cell in cells]


@dataclass
class Outcome:
    """A trial's values (None: it failed, `why` says why) and the user attributes that explain them."""

    values: list[float] | None
    attrs: dict[str, Any] = field(default_factory=dict)
    why: str = ""


def _value(record: Mapping[str, Any], objective: Objective) -> float | None:
    value = record.get(objective.field)
    if value is None or isinstance(value, (str, bytes)):
        return None
    number = float(value)
    return objective.of(number) if math.isfinite(number) else None


def outcome(seeds: Sequence[int], rows: Sequence[dict[str, Any] | None], search: SearchSettings) -> Outcome:
    """The trial's value per objective: the mean over its seeds' records. A seed whose cell is not
    done (failed, n/a, invalid) or lacks the field fails the trial, saying which and why."""
    attrs: dict[str, Any] = {"seeds": list(seeds), "cell_keys": [r["cell_key"] if r else None for r in rows]}
    values = []
    for objective in search.objectives:
        per_seed = []
        for seed, row in zip(seeds, rows):
            if row is None:
                return Outcome(None, attrs, f"seed {seed}: no record (an invalid cell, see the log)")
            if row.get("status") != "done":
                return Outcome(None, attrs, f"seed {seed}: {row.get('status')}: {row.get('message') or ''}".strip())
            value = _value(row, objective)
            if value is None:
                note = row.get("rel_error_note") if objective.field == "rel_error" else None
                return Outcome(
                    None, attrs, f"seed {seed}: the record has no {objective.field}" + (f" ({note})" if note else "")
                )
            per_seed.append(value)
        attrs[f"{objective.name}_per_seed"] = per_seed
        attrs[f"{objective.name}_std"] = statistics.pstdev(per_seed) if len(per_seed) > 1 else 0.0
        values.append(statistics.fmean(per_seed))
    return Outcome(values, attrs)


def trainings(cfg: Any) -> dict[str, int]:
    """The policy key of each training a cell may run, with its stage (0: the fp32 policy; 1: the
    method's own, such as QAT's): a trial lists them for its trainings to find it (quarl.train.pruning)."""
    import copy

    from quarl.config import method_registry
    from quarl.config.keys import policy_key

    cell = copy.deepcopy(cfg)
    method_registry.settle(cell, warn=False)  # as the cell settles itself before it trains
    keys = {policy_key(method_registry.fp32_config(cell)): 0}
    if method_registry.of(cell).trains_policy:
        keys[policy_key(cell)] = 1
    return keys


def describe(trial: Any, search: SearchSettings) -> str:
    """One line: a trial's values, per seed where it has several (a pruned one: where it was pruned),
    and its parameters."""
    params = " ".join(f"{k}={v}" for k, v in trial.params.items())
    if trial.state.name == "PRUNED":
        return f"trial {trial.number}: {studies.pruned_note(trial.user_attrs) or 'pruned'} with {params}"
    parts = []
    for index, objective in enumerate(search.objectives):
        value = trial.values[index] if trial.values else float("nan")
        per_seed = trial.user_attrs.get(f"{objective.name}_per_seed", [])
        spread = ""
        if len(per_seed) > 1:
            std = trial.user_attrs.get(f"{objective.name}_std", 0.0)
            spread = f" (seeds {', '.join(f'{v:.6g}' for v in per_seed)}; std {std:.3g})"
        parts.append(f"{objective.name} {value:.6g}{spread}")
    return f"trial {trial.number}: {', '.join(parts)} with {params}"


def _plain(value: Any) -> Any:
    """A searched value as YAML holds it: choices kept as override text (`[64,64]`) read back."""
    import yaml

    if isinstance(value, str):
        try:
            return yaml.safe_load(value)
        except yaml.YAMLError:
            return value
    return value


def _nest(params: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for name, value in params.items():
        if not name.startswith(prefix):
            continue
        node = nested
        *parents, leaf = name[len(prefix) :].split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = _plain(value)
    return nested


def _trial_entry(trial: Any, params: Sequence[Param], fixed: Sequence[str], search: SearchSettings) -> dict[str, Any]:
    return {
        "trial": trial.number,
        "values": {o.name: v for o, v in zip(search.objectives, trial.values)},
        "per_seed": {o.name: trial.user_attrs.get(f"{o.name}_per_seed") for o in search.objectives},
        "seeds": trial.user_attrs.get("seeds"),
        "params": {name: _plain(value) for name, value in trial.params.items()},
        "overrides": [*fixed, *(p.override(trial.params[p.name]) for p in params if p.name in trial.params)],
    }


def write_best(
    folder: Path, study: Any, params: Sequence[Param], fixed: Sequence[str], search: SearchSettings
) -> list[Path]:
    """`best_trial.yaml` (single objective: the best trial; several: every trial on the Pareto front)
    and, for one objective where the search covers `algo.hyperparams.*`, `best_hyperparams.yaml`:
    the best trial's values as the mapping `algo.hyperparams` holds."""
    import yaml

    written = []
    best = study.best_trials if len(search.objectives) > 1 else [study.best_trial]
    entries = [_trial_entry(t, params, fixed, search) for t in best]
    what = "the Pareto front" if len(search.objectives) > 1 else "the best trial"
    header = f"# Study {study.study_name}: {what}"
    path = folder / "best_trial.yaml"
    body = entries if len(search.objectives) > 1 else entries[0]
    path.write_text(f"{header}\n" + yaml.safe_dump(body, sort_keys=False))
    written.append(path)
    hyper = _nest(best[0].params, "algo.hyperparams.")
    if len(search.objectives) == 1 and hyper:
        entry = entries[0]
        path = folder / "best_hyperparams.yaml"
        path.write_text(
            f"# algo.hyperparams of trial {entry['trial']} of study {study.study_name} "
            f"({', '.join(f'{k} {v:.6g}' for k, v in entry['values'].items())}, "
            f"mean of {len(entry['seeds'] or [])} seeds).\n"
            f"# Run it: python run.py {' '.join(entry['overrides'])}\n" + yaml.safe_dump(hyper, sort_keys=False)
        )
        written.append(path)
    return written


def write_all(
    folder: Path, study: Any, params: Sequence[Param], fixed: Sequence[str], search: SearchSettings
) -> list[Path]:
    """Every output of a search into `folder`: trials.csv, best_trial.yaml, best_hyperparams.yaml
    (one objective), search_history.png and, with two objectives or more, search_pareto.png."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    frame = study.trials_dataframe()
    frame.to_csv(folder / "trials.csv", index=False)
    written.append(folder / "trials.csv")
    if not complete(study):
        log.warning("No trial of study %s is complete: no best trial or figures to write.", study.study_name)
        return written
    written += write_best(folder, study, params, fixed, search)
    return written + figures(study, folder)
