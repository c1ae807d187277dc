"""The Optuna studies of a search (`hydra/sweeper=optuna` keeps them in `optuna.db` beside the results
store): where they live, the pruner a study prunes with (checked settings, stored in the study, so a
training in another process builds the same pruner), and `quarl trials`, the table of a study's
trials, read without writing to the database.

Imported by Hydra's plugin scan (through the sweeper) and by every training: optuna and pandas are
imported where they are used.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from quarl.errors import QuarlError

log = logging.getLogger(__name__)

DATABASE = "optuna.db"  # beside the results store
PRUNER = "pruner"  # study user attribute: the checked pruner settings (None: no pruning)
TRAINS = "trains"  # trial user attribute: {policy key: [seed index, stage]} of the trainings its cells need
PRUNED = "pruned"  # trial user attribute, set by the training that was pruned: where, and at what value
PRUNED_MESSAGE = "Pruned:"  # how the record message of a cell whose training was pruned starts
FAILED_CELLS, RETRY_OF = "failed_cells", "retry_of"  # trial user attributes the sweeper sets

#: Each pruner's own keys; every pruner also takes `name` and `reports`.
PRUNER_KEYS: dict[str, tuple[str, ...]] = {
    "median": ("n_startup_trials", "n_warmup_steps", "interval_steps"),
    "percentile": ("percentile", "n_startup_trials", "n_warmup_steps", "interval_steps"),
    "threshold": ("lower", "upper", "n_warmup_steps", "interval_steps"),
    "none": (),
}
#: A null key is its default. A training reports `reports` times (steps 1..reports), so
#: n_warmup_steps=3 lets no trial be pruned before 30% of its training.
PRUNER_DEFAULTS: dict[str, Any] = {
    "reports": 10,
    "n_startup_trials": 5,
    "n_warmup_steps": 3,
    "interval_steps": 1,
    "percentile": 25.0,
}
_LEAST = {"reports": 1, "interval_steps": 1, "n_startup_trials": 0, "n_warmup_steps": 0}


def storage_url(storage: str | None, store_path: Path) -> str:
    """Optuna's storage: an RDB URL as given, a file path as SQLite, or by default `optuna.db` beside
    the results store (several jobs, on one machine or a cluster's shared disk, share its studies)."""
    if not storage:
        return f"sqlite:///{(store_path.parent / DATABASE).resolve()}"
    if "://" in storage:
        return storage
    return f"sqlite:///{Path(storage).expanduser().resolve()}"


def open_storage(url: str) -> Any:
    """An existing study storage, opened without creating tables or upgrading its schema."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kwargs = {"connect_args": {"timeout": 120}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(
        url, engine_kwargs=kwargs, skip_table_creation=True, skip_compatibility_check=True
    )


# --- the pruner ---------------------------------------------------------------------------------


def check_pruner(node: Any) -> dict[str, Any]:
    """`hydra.sweeper.pruner` checked, its defaults filled in: `{name, reports, <the pruner's keys>}`.
    A mapping (`{name: median, n_startup_trials: 5}`), a name (`none`) or null (the median pruner)."""
    given = {"name": node} if isinstance(node, str) or node is None else dict(node)
    name = str(given.pop("name", None) or "median")
    if name not in PRUNER_KEYS:
        raise QuarlError(f"hydra.sweeper.pruner.name={name} is not a pruner: use {', '.join(PRUNER_KEYS)}.")
    every = {key for keys in PRUNER_KEYS.values() for key in keys} | {"reports"}
    for key, value in given.items():
        if key not in every:
            raise QuarlError(
                f"hydra.sweeper.pruner.{key} is not a setting of a pruner: the {name} pruner takes "
                f"{', '.join(['name', 'reports', *PRUNER_KEYS[name]])}."
            )
        if value is not None and key != "reports" and key not in PRUNER_KEYS[name]:
            owners = [n for n, keys in PRUNER_KEYS.items() if key in keys]
            raise QuarlError(
                f"hydra.sweeper.pruner.{key}={value} is a setting of the {' or '.join(owners)} pruner, not of "
                f"{name}: set hydra.sweeper.pruner.name, or leave {key} null."
            )
    spec: dict[str, Any] = {"name": name}
    for key in ("reports", *PRUNER_KEYS[name]):
        value = given.get(key)
        spec[key] = PRUNER_DEFAULTS.get(key) if value is None else value
        if key in _LEAST and (not _whole(spec[key]) or spec[key] < _LEAST[key]):
            what = "0 or more" if _LEAST[key] == 0 else "1 or more"
            raise QuarlError(f"hydra.sweeper.pruner.{key}={spec[key]} is not allowed: use a whole number, {what}.")
    if name == "percentile" and not (_number(spec["percentile"]) and 0 <= spec["percentile"] <= 100):
        raise QuarlError(f"hydra.sweeper.pruner.percentile={spec['percentile']} is not allowed: use 0 to 100.")
    if name == "threshold":
        if spec["lower"] is None and spec["upper"] is None:
            raise QuarlError("The threshold pruner needs hydra.sweeper.pruner.lower or upper (or both).")
        for key in ("lower", "upper"):
            if spec[key] is not None and not _number(spec[key]):
                raise QuarlError(f"hydra.sweeper.pruner.{key}={spec[key]} is not allowed: use a number.")
    return spec


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def build_pruner(spec: Mapping[str, Any]) -> Any:
    """The Optuna pruner of checked settings (`check_pruner`)."""
    import optuna

    kwargs = {key: spec[key] for key in PRUNER_KEYS[spec["name"]]}
    made: dict[str, Callable[..., Any]] = {
        "median": optuna.pruners.MedianPruner,
        "percentile": optuna.pruners.PercentilePruner,
        "threshold": optuna.pruners.ThresholdPruner,
        "none": optuna.pruners.NopPruner,
    }
    return made[spec["name"]](**kwargs)


def describe_pruner(spec: Mapping[str, Any] | None) -> str:
    """`median (n_startup_trials=5, n_warmup_steps=3, interval_steps=1; 10 reports a training)`, or `none`."""
    if not spec or spec["name"] == "none":
        return "none"
    keys = ", ".join(f"{k}={spec[k]}" for k in PRUNER_KEYS[spec["name"]])
    return f"{spec['name']} ({keys}; {spec['reports']} reports a training)"


def pruned_note(attrs: Mapping[str, Any]) -> str:
    """Where a pruned trial stopped, from its `pruned` user attribute (empty where it has none)."""
    at = attrs.get(PRUNED)
    if not isinstance(at, Mapping):
        return ""
    return (
        f"pruned at report {at.get('report')} of {at.get('of')} of seed {at.get('seed')}'s training "
        f"(env step {at.get('step')}): training return {at.get('return', float('nan')):.4g}"
    )


# --- quarl trials -------------------------------------------------------------------------------


def _number_text(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _labels(names: list[str]) -> dict[str, str]:
    """Each parameter's last dotted part where that is unique among them, else its full name."""
    last = [n.rsplit(".", 1)[-1] for n in names]
    return {n: (short if last.count(short) == 1 else n) for n, short in zip(names, last)}


def trials_frame(study: Any) -> Any:
    """One row per trial: number, state, each objective's value (mean over seeds), per-seed values and
    spread, a note (where a trial was pruned, why it failed), and its parameters."""
    import pandas as pd

    objectives = [str(o) for o in study.user_attrs.get("objectives") or ["value"]]
    trials = study.get_trials(deepcopy=False)
    names = list(dict.fromkeys(name for t in trials for name in t.params))
    labels = _labels(names)
    rows = []
    for t in trials:
        seeds = ", ".join(str(s) for s in t.user_attrs.get("seeds") or [])
        row: dict[str, Any] = {"trial": t.number, "state": t.state.name, "seeds": seeds}
        for index, objective in enumerate(objectives):
            complete = t.state.name == "COMPLETE" and t.values is not None
            per_seed = t.user_attrs.get(f"{objective}_per_seed") or []
            row[objective] = _number_text(t.values[index]) if complete else ""
            row[f"{objective} per seed"] = ", ".join(_number_text(v) for v in per_seed) if complete else ""
            std = t.user_attrs.get(f"{objective}_std")
            row[f"{objective} std"] = _number_text(std) if complete and std is not None else ""
        note = pruned_note(t.user_attrs) if t.state.name == "PRUNED" else ""
        if t.state.name == "FAIL":
            note = str(t.user_attrs.get(FAILED_CELLS) or "interrupted: its parameters run again")
        if RETRY_OF in t.user_attrs:
            note = f"retry of trial {t.user_attrs[RETRY_OF]}" + (f"; {note}" if note else "")
        row["note"] = note
        row.update({labels[n]: _number_text(t.params[n]) if n in t.params else "" for n in names})
        rows.append(row)
    return pd.DataFrame(rows)


def header(study: Any, url: str) -> str:
    """`Study NAME (URL): maximize reward_mean, 2 seed(s) a trial, last pruner median (...); 4 trials: ...`
    (the pruner of the last search that ran the study)."""
    from collections import Counter

    objectives = study.user_attrs.get("objectives") or ["value"]
    aims = ", ".join(f"{d.name.lower()} {o}" for o, d in zip(objectives, study.directions))
    states = Counter(t.state.name for t in study.get_trials(deepcopy=False))
    counted = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
    return (
        f"Study {study.study_name} ({url}): {aims}, {study.user_attrs.get('seeds', 1)} seed(s) a trial, last pruner "
        f"{describe_pruner(study.user_attrs.get(PRUNER))}; {sum(states.values())} trials: {counted or 'none'}"
    )


def cmd_trials(args: argparse.Namespace) -> None:
    """Print the trials of every study (or `--study`) in the search storage beside the store."""
    import optuna
    import pandas as pd

    url = storage_url(args.storage, args.store)
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).exists():
        raise QuarlError(
            f"There is no Optuna study at {url[len('sqlite:///') :]}: run a search first "
            "(python run.py -m hydra/sweeper=optuna ...), or pass --store PATH or --storage URL."
        )
    storage = open_storage(url)
    names = optuna.get_all_study_names(storage)
    if args.study is not None and args.study not in names:
        raise QuarlError(f"{url} has no study {args.study}: it holds {', '.join(names) or 'none'}.")
    chosen = [args.study] if args.study is not None else names
    if args.csv:  # one table: each study's own columns, blank in the other studies' rows
        frames = [trials_frame(optuna.load_study(study_name=n, storage=storage)).assign(study=n) for n in chosen]
        whole = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["study"])
        whole[["study", *whole.columns.drop("study")]].to_csv(sys.stdout, index=False)
        return
    for name in chosen:
        study = optuna.load_study(study_name=name, storage=storage)
        frame = trials_frame(study)
        print(header(study, url), flush=True)
        if not frame.empty:  # notes read left to right
            frame["note"] = frame["note"].str.ljust(int(frame["note"].str.len().max()))
        with pd.option_context("display.max_rows", None, "display.width", 250, "display.max_columns", None):
            print(frame.to_string(index=False) if not frame.empty else "(no trials)", "\n", flush=True)


def add_command(sub: Any, store_option: Callable[[argparse.ArgumentParser], None]) -> None:
    """`quarl trials [--store PATH | --storage URL] [--study NAME] [--csv]`."""
    trials = sub.add_parser("trials", help="the trials of the Optuna searches beside the store (read only)")
    store_option(trials)
    trials.add_argument("--storage", help="an Optuna RDB URL or SQLite file instead of optuna.db beside the store")
    trials.add_argument("--study", help="only this study (default: every study)")
    trials.add_argument("--csv", action="store_true", help="CSV, one row per trial, for scripts")
    trials.set_defaults(func=cmd_trials)
