"""The settings of quarl's Optuna search, checked: objectives read from a cell's record, directions,
seeds per trial, and the search space from Hydra's override grammar (`choice`, `range`,
`interval`, `tag(log, interval(...))`) as Optuna distributions.

Imported by Hydra's plugin scan at every start of run.py: optuna is imported where a search needs it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from quarl.errors import QuarlError
from quarl.store.studies import check_pruner

DIRECTIONS = ("maximize", "minimize")
#: Numeric fields of a record that make sense as objectives (a store may hold more: any numeric
#: column of its `runs` table is accepted too).
RECORD_FIELDS = (
    "reward_mean", "reward_std", "reward_min", "reward_max", "fp32_reward", "rel_error",
    "policy_bytes", "fp32_bytes", "train_time_s", "eval_time_s",
    "action_agreement", "action_mad", "action_kl",
    "backend_action_agreement", "backend_action_mad", "actor_action_agreement", "actor_action_mad",
)  # fmt: skip
NOT_OBJECTIVES = {"git_dirty", "trained", "n_episodes", "agreement_states"}  # numeric, but bookkeeping
#: Keys a trial sets itself (`seed` from search.seeds): not part of a search space.
RESERVED = ("seed",)
PLAIN = re.compile(r"^[\w./:@-]+$")


@dataclass(frozen=True)
class Objective:
    """One objective: a record field, negated when written `-field`."""

    field: str
    negate: bool = False

    @property
    def name(self) -> str:
        return f"-{self.field}" if self.negate else self.field

    def of(self, value: float) -> float:
        return -value if self.negate else value


@dataclass
class Param:
    """One searched key: its Optuna distribution and the key as the override writes it (`+`, `++`)."""

    name: str
    key: str
    distribution: Any
    encoded: bool = False  # categorical values kept as override text (lists, dicts)

    def override(self, value: Any) -> str:
        return f"{self.key}={override_text(value, self.encoded)}"


@dataclass
class SearchSettings:
    """What a search optimizes and how many runs each trial costs."""

    objectives: list[Objective]
    directions: list[str]
    seeds: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


def as_list(value: Any) -> list[Any]:
    """A setting given as one value or a list (`direction: maximize`, `direction: [maximize, minimize]`)."""
    if value is None:
        return []
    if isinstance(value, (str, int, float)):
        return [value]
    return list(value)


def settings(search: Mapping[str, Any], direction: Any, store_columns: Sequence[str] = ()) -> SearchSettings:
    """The checked settings; a bad one is one QuarlError sentence naming the field and what it takes."""
    known = set(RECORD_FIELDS) | (set(store_columns) - NOT_OBJECTIVES)
    unknown = sorted(set(search) - {"objective", "seeds"})
    if unknown:
        raise QuarlError(f"search.{unknown[0]} is not a setting of a search: it takes objective and seeds.")
    objectives = []
    for name in as_list(search.get("objective", "reward_mean")):
        text = str(name).strip()
        negate = text.startswith("-")
        base = text.lstrip("-").strip()
        if base not in known:
            raise QuarlError(
                f"search.objective={name} is not a numeric field of a record: use one of "
                f"{', '.join(sorted(known))} (a leading - negates it)."
            )
        objectives.append(Objective(base, negate))
    if not objectives:
        raise QuarlError("search.objective is empty: name a numeric field of a record, such as reward_mean.")
    directions = [str(d) for d in as_list(direction)] or ["maximize"]
    for value in directions:
        if value not in DIRECTIONS:
            raise QuarlError(f"hydra.sweeper.direction={value} is not allowed: use maximize or minimize (or a list).")
    if len(directions) == 1 and len(objectives) > 1:
        directions *= len(objectives)
    if len(directions) != len(objectives):
        raise QuarlError(
            f"hydra.sweeper.direction has {len(directions)} directions for {len(objectives)} objectives "
            f"(search.objective): give one direction per objective."
        )
    seeds = search.get("seeds", 1)
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise QuarlError(f"search.seeds={seeds} is not allowed: use a positive number of seeds per trial.")
    return SearchSettings(objectives, directions, seeds)


#: Record fields the training return tracks: a search on one of them may prune on the training curve.
PRUNABLE = ("reward_mean", "reward_min", "reward_max", "fp32_reward")


def pruning(node: Any, search: SearchSettings) -> tuple[dict[str, Any] | None, str]:
    """The checked `hydra.sweeper.pruner` (a bad one is one QuarlError sentence), with `sign` -1 where
    the objective is negated; None, and why, where the search does not prune."""
    spec = check_pruner(node)
    if spec["name"] == "none":
        return None, "hydra.sweeper.pruner.name=none"
    if len(search.objectives) > 1:
        return None, "Optuna prunes single-objective studies only"
    objective = search.objectives[0]
    if objective.field not in PRUNABLE:
        return None, f"the training return does not track {objective.field} (it does {', '.join(PRUNABLE)})"
    return {**spec, "sign": -1 if objective.negate else 1}, ""


def positive(name: str, value: Any) -> int:
    """A positive integer setting of the sweeper (n_trials, n_jobs)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise QuarlError(f"hydra.sweeper.{name}={value} is not allowed: use a positive whole number.")
    return value


def override_text(value: Any, encoded: bool = False) -> str:
    """A value as the override grammar reads it back (true, null, 0.001, 'a b')."""
    if encoded:
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    return text if PLAIN.match(text) else "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def distribution(override: Any) -> tuple[Any, bool]:
    """The Optuna distribution of one sweep override, and whether its choices are kept as text."""
    from hydra.core.override_parser.types import Transformer
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    value = override.value()
    if override.is_choice_sweep() or (override.is_range_sweep() and value.shuffle):
        raw = list(override.sweep_iterator())
        if all(isinstance(x, (bool, int, float, str)) for x in raw):
            return CategoricalDistribution(raw), False
        return CategoricalDistribution(list(override.sweep_iterator(transformer=Transformer.encode))), True
    if override.is_range_sweep():
        start, stop, step = value.start, value.stop, value.step
        if all(isinstance(x, int) for x in (start, stop, step)) and step > 0:
            if stop <= start:
                raise QuarlError(f"{override.input_line} is empty: range(start, stop) needs start < stop.")
            return IntDistribution(start, start + step * ((stop - start - 1) // step), step=step), False
        return CategoricalDistribution(list(override.sweep_iterator())), False
    if override.is_interval_sweep():
        log = "log" in value.tags
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(value.start, value.end, log=log), False
        return FloatDistribution(float(value.start), float(value.end), log=log), False
    raise QuarlError(
        f"{override.input_line} cannot be searched: use choice(...), range(...), interval(...) or "
        "tag(log, interval(...)), or a plain value."
    )


def space(overrides: Sequence[Any]) -> tuple[list[Param], list[str]]:
    """The searched keys (a sweep override each) and the fixed overrides, in order; a key given again
    replaces the earlier one (the command line after `hydra.sweeper.params`)."""
    params: dict[str, Param] = {}
    fixed: dict[str, str] = {}
    for override in overrides:
        name = override.key_or_group
        params.pop(name, None)
        fixed.pop(name, None)
        if not override.is_sweep_override():
            fixed[name] = str(override.input_line)
            continue
        if name in RESERVED:
            raise QuarlError(f"{name} cannot be searched: a trial's seeds are seed, seed+1, ... (search.seeds).")
        dist, encoded = distribution(override)
        params[name] = Param(name, override.get_key_element(), dist, encoded)
    if not params:
        raise QuarlError(
            "The search space is empty: give hydra.sweeper.params (or the command line) at least one key to "
            "search, e.g. algo.hyperparams.learning_rate='tag(log, interval(1e-4, 1e-2))' or quant.bits='range(2, 9)'."
        )
    return list(params.values()), list(fixed.values())


def study_name(params: Sequence[Param], fixed: Sequence[str], search: SearchSettings, prefix: str = "quarl") -> str:
    """A name that the same search (space, fixed overrides, objectives, seeds) always gets, so that
    running the command again resumes its study: `prefix` (the named search) and a hash of them."""
    described = {
        "space": {p.name: repr(p.distribution) for p in params},
        "fixed": sorted(fixed),
        "objectives": [o.name for o in search.objectives],
        "directions": search.directions,
        "seeds": search.seeds,
    }
    return f"{prefix}-" + hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:12]
