"""What one training is, for collation: the one rule for which records may be pooled as seeds.

A mean over seeds pools only records that differ in nothing but the seed and the quantization
setting being compared. Records of one (algo, env) from different trainings (another budget,
hyperparameters, env settings, keep-best, pretrained source, training device) are separate series.

A training is read from each record's stored config, mirroring `quarl.config.keys.training_spec` less the
seed and less the quantization method's own settings (they are what collation compares):

- ``algo.*``: hyperparameters, n_envs, policy, normalize, ... (not ``algo.name``, the series'
  own name, nor ``algo.n_timesteps``, which counts through the budget);
- ``env.*`` except the measurement-only ``env.return_scale``;
- the effective budget ``train.steps`` (null means the algorithm's ``algo.n_timesteps``);
- ``train.keep_best`` and, only where it is true, the effective ``train.eval_every`` (null means a
  twentieth of the budget) and ``train.eval_episodes``;
- ``policy.source``, ``policy.path``, ``policy.repo``; for a pretrained policy (source other than
  ``train``) only these and the env count, as in `training_spec`;
- ``zoo`` (whose hyperparameters: rl-zoo3's or the published agents'; it implies the ``algo.*``
  values and the budget it sets, so a label names the zoo alone) and ``train.robust`` with its
  setting (``train.robust_rho`` for sam, ``train.robust_bits`` for noise), ``train.amp`` and
  ``train.stop_at_return`` (a training that ended at its target is another policy);
- the training device, where a record holds it (a ``training_device`` run field; an ActorQ record
  without one ran its learner on the CPU, the only device before quarl recorded it);
- for ActorQ records, which train their own policy, the ``actorq.*`` settings too (not those that
  only watch or place the run: log interval, stall timeout, restarts, Ray address, transport).

A key a record lacks is read as follows: an ``algo.hyperparams.*`` key that is absent was not set
(the algorithm's default: null); any other key absent from a record was added to quarl after the
record was written, and takes the value the records of its (algo, env) that have it agree on.

Where an (algo, env) holds one training its label is the plain algo name ('ppo'), so a store of one
training per (algo, env) collates exactly as before. Where it holds several, each is labelled by
the keys that tell them apart, written as the filter that selects it: 'ppo (train.steps=8192)'.
`select` matches these keys on their effective values, so that filter works as typed.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import pandas as pd

from quarl.config.keys import MEASUREMENT_ONLY_ENV_KEYS, keep_best_every, slug, train_steps
from quarl.store import differences
from quarl.store import query as results
from quarl.store.sqlite import flatten

#: Prefixes of the config keys that shape a trained policy.
PREFIXES = ("algo.", "env.")
#: Keys under those prefixes that do not tell trainings apart (see the module docstring).
LEFT_OUT = frozenset({"algo.name", "algo.n_timesteps", *(f"env.{k}" for k in MEASUREMENT_ONLY_ENV_KEYS)})
BUDGET, EVAL_EVERY, EVAL_EPISODES, KEEP_BEST = (
    "train.steps",
    "train.eval_every",
    "train.eval_episodes",
    "train.keep_best",
)
POLICY = ("policy.source", "policy.path", "policy.repo")
#: A run field naming the device a policy was trained on, where records hold one.
DEVICE = "training_device"
#: Keys whose value in a label and a filter is the effective one (a null budget is the algorithm's).
EFFECTIVE = (BUDGET, EVAL_EVERY)
HYPERPARAMS = "algo.hyperparams."
#: ActorQ keys that change how a run is watched or where it runs, not the policy it trains.
ACTORQ_OPERATIONAL = frozenset(
    {
        "actorq.log_interval_s",
        "actorq.stall_timeout_s",
        "actorq.max_restarts",
        "actorq.ray_address",
        "actorq.backend",
        "actorq.pin_actors",
    }
)
ABSENT = object()  # a key the record's stored config does not have
#: Keys whose absence has a known meaning: records from before keep-best and pretrained policies.
CUDA_GRAPH = "actorq.cuda_graph"  # the DQN learner's updates as one CUDA graph
ABSENT_MEANS: dict[str, Any] = {
    KEEP_BEST: False,
    "policy.source": "train",
    "policy.path": None,
    "policy.repo": None,
    "zoo": "rl_zoo3",
    "train.robust": None,
    "train.amp": False,
    "train.stop_at_return": None,
    CUDA_GRAPH: False,
}
ZOO = "zoo"  # whose hyperparameters (conf/zoo): it implies the algo.* values and the budget it sets
ROBUST, ROBUST_SETTING = "train.robust", {"sam": "train.robust_rho", "noise": "train.robust_bits"}
AMP = "train.amp"  # mixed-precision updates (quarl.train.amp)
STOP = "train.stop_at_return"  # the training ended once its return reached this (quarl.train.stopping)
NOT_APPLICABLE = "n/a"  # a training key that does not apply to a record (a pretrained policy's budget)


def _config(row: pd.Series, columns: list[str]) -> dict[str, Any]:
    """The record's flat config (from its stored config text, else from its columns), with the
    training device where the record holds one."""
    stored = row.get("config")
    flat: dict[str, Any] | None = None
    if isinstance(stored, str):
        try:
            flat = flatten(json.loads(stored))
        except (TypeError, ValueError):
            flat = None
    if flat is None:
        flat = {c: row[c] for c in columns if not _missing(row[c])}
    if not _missing(row.get(DEVICE)):
        flat[DEVICE] = row[DEVICE]
    elif row.get("quant") == "actorq":  # ActorQ records from before quarl recorded the device: its CPU learner
        flat[DEVICE] = "cpu"
    return flat


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _whole(value: Any) -> int | None:
    return None if _missing(value) else int(value)


def _budgets(flat: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The effective budget and keep-best interval (`quarl.config.keys`), None where nothing gives them."""
    steps, default = _whole(flat.get(BUDGET)), _whole(flat.get("algo.n_timesteps"))
    if steps is None and default is None:
        return None, None
    cfg = _Node(train=_Node(steps=steps, eval_every=_whole(flat.get(EVAL_EVERY))), algo=_Node(n_timesteps=default))
    return train_steps(cfg), keep_best_every(cfg)


class _Node(dict):
    """The few config nodes `quarl.config.keys` reads, as attributes (a whole OmegaConf per record is slow)."""

    def __getattr__(self, name: str) -> Any:
        return self[name]


def _truthy(value: Any) -> bool:
    return not _missing(value) and value is not ABSENT and bool(results.comparable(value))


def identity(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The training of one record's flat config as {key: value} (ABSENT where the record lacks a key
    other than a hyperparameter); the seed and the quantization settings are not part of it."""
    spec: dict[str, Any] = {k: flat.get(k, ABSENT_MEANS.get(k, ABSENT)) for k in POLICY}
    if spec["policy.source"] not in (None, "train"):  # a pretrained policy: where it comes from, for this env
        return {**{k: v for k, v in flat.items() if k.startswith("env.") and k not in LEFT_OUT}, **spec}
    spec.update({k: v for k, v in flat.items() if k.startswith(PREFIXES) and k not in LEFT_OUT})
    if flat.get("quant.method") == "actorq":  # ActorQ trains its own policy: its settings shape it
        spec.update({k: v for k, v in flat.items() if k.startswith("actorq.") and k not in ACTORQ_OPERATIONAL})
        spec[CUDA_GRAPH] = flat.get(CUDA_GRAPH, ABSENT_MEANS[CUDA_GRAPH])
    spec[ZOO] = flat.get(ZOO, ABSENT_MEANS[ZOO])
    spec[ROBUST] = flat.get(ROBUST, ABSENT_MEANS[ROBUST])
    if spec[ROBUST] in ROBUST_SETTING:  # quarl.rl.robust: the technique and its one setting
        spec[ROBUST_SETTING[spec[ROBUST]]] = flat.get(ROBUST_SETTING[spec[ROBUST]], ABSENT)
    spec[AMP] = flat.get(AMP, ABSENT_MEANS[AMP])
    spec[STOP] = flat.get(STOP, ABSENT_MEANS[STOP])
    steps, every = _budgets(flat)
    spec[BUDGET] = steps
    spec[KEEP_BEST] = flat.get(KEEP_BEST, ABSENT_MEANS[KEEP_BEST])
    if _truthy(spec[KEEP_BEST]):
        spec[EVAL_EVERY], spec[EVAL_EPISODES] = every, flat.get(EVAL_EPISODES, ABSENT)
    if DEVICE in flat:
        spec[DEVICE] = flat[DEVICE]
    return spec


def _pretrained(spec: Mapping[str, Any]) -> bool:
    return spec.get("policy.source") not in (None, "null", "train")


def text(value: Any) -> str:
    """A value as a label and a filter write it: true/false, null, 8192, 0.0003, [64, 64]."""
    if value is ABSENT or _missing(value):
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return differences.value_text(value)


def _identities(records: pd.DataFrame) -> pd.DataFrame:
    """One row per record, one column per training key, as text ('null' where unset; ABSENT where a
    record lacks a key; NOT_APPLICABLE for a pretrained policy's training settings)."""
    columns = [str(c) for c in records.columns]
    specs = [identity(_config(row, columns)) for _, row in records.iterrows()]
    rows = [{k: v if v is ABSENT else text(v) for k, v in spec.items()} for spec in specs]
    frame = pd.DataFrame(rows, index=records.index).astype(object)
    pretrained = pd.Series([_pretrained(s) for s in specs], index=records.index, dtype=bool)
    for key in frame.columns:
        if key.startswith(HYPERPARAMS):  # a hyperparameter nobody set on a record: the algorithm's default
            frame.loc[~pretrained & frame[key].isna(), key] = "null"
        frame.loc[pretrained & frame[key].isna(), key] = NOT_APPLICABLE
    return frame


def _fill_absent(frame: pd.DataFrame) -> pd.DataFrame:
    """Within one (algo, env): a key some records lack (added to quarl after they were written)
    takes the value the others agree on; where they disagree, or none has it, it is null."""
    out = frame.copy()
    for key in out.columns:
        values = out[key]
        lacking = values.isna() | values.map(lambda v: v is ABSENT)
        known = values[~lacking].unique()
        out.loc[lacking, key] = known[0] if len(known) == 1 else "null"
    return out.astype(object)


@dataclass(frozen=True)
class Training:
    """One training of an (algo, env): its label, the keys that tell it apart and their values."""

    algo: str
    env: str
    label: str
    keys: dict[str, str]
    records: int

    def filter_text(self) -> str:
        """The filter that selects this training's records: 'algo=ppo env=cartpole train.steps=8192'."""
        return " ".join([f"algo={self.algo}", f"env={self.env}", *(f"{k}={v}" for k, v in self.keys.items())])


def label(algo: str, keys: Mapping[str, str]) -> str:
    """'ppo', or 'ppo (train.steps=8192)' for a training told apart by `keys`."""
    return f"{algo} (" + ", ".join(f"{k}={v}" for k, v in keys.items()) + ")" if keys else str(algo)


def base_algo(series: str) -> str:
    """The plain algo name of a series label: 'ppo (train.steps=8192)' -> 'ppo'."""
    return str(series).split(" (", 1)[0]


def title(series: str) -> str:
    """A series label for titles: the algo upper-case, the training as typed ('PPO (train.steps=8192)')."""
    algo, sep, rest = str(series).partition(" (")
    return algo.upper() + sep + rest


MAX_STEM = 96  # characters of a file-name stem: a longer one keeps its start and a hash of the whole


def stem(*parts: str) -> str:
    """A file-name stem of labels, without dots (a suffix would cut them off): ('ppo (train.steps=8192)',
    'cartpole') -> 'ppo-train-steps-8192_cartpole'; plain names give what they always did ('ppo_cartpole').
    A stem past MAX_STEM characters (a series told apart by many keys) is cut, with a hash of the
    whole so that two series never share a file."""
    whole = "_".join(slug(p).replace(".", "-") for p in parts)
    if len(whole) <= MAX_STEM:
        return whole
    return f"{whole[: MAX_STEM - 9].rstrip('-_')}-{hashlib.sha256(whole.encode()).hexdigest()[:8]}"


def trainings(records: pd.DataFrame) -> tuple[pd.Series, list[Training]]:
    """Each record's series label (indexed as `records`), and every training per (algo, env) where an
    (algo, env) holds more than one. Records need `algo` and `env`; the stored `config` text is read."""
    labels = records["algo"].astype(str).copy() if "algo" in records.columns else pd.Series(dtype=str)
    if records.empty or "env" not in records.columns:
        return labels, []
    found: list[Training] = []
    for (algo, env), group in records.groupby(["algo", "env"], sort=True):
        spec = _fill_absent(_identities(group))
        if spec.empty or len(spec.drop_duplicates()) < 2:
            continue
        differing = _implied_out(
            [k for k in spec.columns if spec.loc[spec[k] != NOT_APPLICABLE, k].nunique() > 1], spec
        )
        for values, rows in spec.groupby(differing, sort=True):
            keys = _label_keys(dict(zip(differing, map(str, values if isinstance(values, tuple) else (values,)))))
            labels.loc[rows.index] = label(str(algo), keys)
            found.append(Training(str(algo), str(env), label(str(algo), keys), keys, len(rows)))
    return labels, found


def _implied_out(differing: list[str], spec: pd.DataFrame) -> list[str]:
    """`differing` less the keys other differing keys imply, where the rest still tells the same
    trainings apart: the keep-best interval that only follows the budget (a twentieth of it), and
    the hyperparameters and budget a zoo sets ('dqn (zoo=sb2)', not its every value)."""

    def without(keys: list[str], implied: Callable[[str], bool]) -> list[str]:
        rest = [k for k in keys if not implied(k)]
        same = rest and len(spec[rest].drop_duplicates()) == len(spec[keys].drop_duplicates())
        return rest if same else keys

    if ZOO in differing:
        differing = without(differing, _zoo_sets)
    return without(differing, lambda k: k == EVAL_EVERY)


def _zoo_sets(key: str) -> bool:
    return key.startswith("algo.") or key in (BUDGET, EVAL_EVERY)


def _label_keys(values: dict[str, str]) -> dict[str, str]:
    """The keys a training's label names: those that differ and apply to it; a trained policy
    names its source only where nothing else tells it from a pretrained one."""
    keys = {k: v for k, v in values.items() if v != NOT_APPLICABLE}
    if not _pretrained(keys):
        trained = {k: v for k, v in keys.items() if k not in POLICY or v not in ("train", "null")}
        keys = trained or {k: v for k, v in keys.items() if k == "policy.source"}
    return keys


def notes(found: list[Training]) -> list[str]:
    """One sentence per (algo, env) with several trainings: each series and the filter that selects it."""
    out = []
    by_pair: dict[tuple[str, str], list[Training]] = {}
    for t in found:
        by_pair.setdefault((t.algo, t.env), []).append(t)
    for (algo, env), group in by_pair.items():
        keys = sorted({k for t in group for k in t.keys})
        each = "; ".join(f"'{t.label}' ({t.records} records: `quarl collate {t.filter_text()}`)" for t in group)
        out.append(
            f"{algo}/{env} holds {len(group)} trainings that differ in {', '.join(keys)}: each is its own series, "
            f"never averaged with the others: {each}."
        )
    return out


def effective(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with `train.steps` and `train.eval_every` holding their effective values (a null budget
    is the algorithm's `algo.n_timesteps`, a null interval a twentieth of the budget)."""
    out = runs.copy()
    if BUDGET not in out.columns and "algo.n_timesteps" not in out.columns:
        return out
    columns = [str(c) for c in out.columns]
    pairs = [_budgets(_config(row, columns)) for _, row in out.iterrows()]
    out[BUDGET] = pd.Series([p[0] for p in pairs], index=out.index, dtype=object)
    out[EVAL_EVERY] = pd.Series([p[1] for p in pairs], index=out.index, dtype=object)
    return out


def select(runs: pd.DataFrame, filters: Mapping[str, Any]) -> pd.DataFrame:
    """`quarl.store.query.select`, where `train.steps` and `train.eval_every` also match their effective
    values: `train.steps=100000` selects a record trained on the algorithm's 100000-step default
    (as a series label names it), and `train.steps=null` still selects it as well."""
    wanted = dict(filters)
    plain = {k: v for k, v in wanted.items() if k not in EFFECTIVE or k not in runs.columns}
    picked = results.select(runs, plain)
    budget = {k: v for k, v in wanted.items() if k not in plain}
    if not budget or picked.empty:
        return picked
    shown = effective(picked)
    for key, value in budget.items():
        stored = results.select(picked, {key: value}).index
        as_run = results.select(shown, {key: value}).index
        keep = picked.index.isin(stored.union(as_run))
        picked, shown = picked[keep], shown[keep]
    return picked
