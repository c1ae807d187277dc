"""The records collation works on: the selected, finished runs, each labelled with a method and a
bit width, reduced to one value per seed, with every problem found written down as a note."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from quarl.collate import trainings
from quarl.collate.bounds import ReturnRange, return_range
from quarl.collate.ptq_keys import effective_quant_columns
from quarl.collate.trainings import select
from quarl.config.keys import result_keys, shown_settings
from quarl.store.differences import config_keys, value_text
from quarl.store.flags import FLAGS, flags
from quarl.store.listing import FIDELITY_COLUMNS
from quarl.store.query import float_bits

log = logging.getLogger(__name__)

#: One value per seed of every (algo, env, method, bits): the unit collation averages over. `algo` is
#: the series label: the algo name, or where an (algo, env) holds several trainings the training's
#: label ('ppo (train.steps=8192)', `quarl.collate.trainings`), so different trainings never pool.
CELL = ["algo", "env", "method", "bits"]
INTEGER = "int"  # quant.format of integer and float records (and of records written before formats)
#: Action fidelity of a quantized record against its fp32 policy.
FIDELITY = FIDELITY_COLUMNS
#: The quantizer settings every table and plot names.
QUANTIZER_KEYS = ("scheme", "granularity", "quantize_bias")
#: The weight scheme of QuaRL's released code, behind the paper's published numbers.
PAPER_SCHEME = "quarl_code"

__all__ = ["CELL", "Notes", "Results", "bit_label", "config_keys", "is_float", "prepare", "select"]


class Notes(list):
    """Messages about the data (missing baselines, one seed, mixed settings): logged once each and
    written into the collation's README."""

    def add(self, message: str) -> None:
        """Log `message` as a warning and keep it (once)."""
        if message not in self:
            log.warning("%s", message)
            self.append(message)


_text = value_text


#: Keys besides a method's own result keys that change what a record measures (`quarl.config.keys.cell_key`).
MEASURED_KEYS = ("quant.backend", "eval.episodes", "eval.deterministic")
#: Values a record written before a key existed stands for.
ABSENT_MEANS = {"quant.backend": "fake"}


def is_float(method: str) -> bool:
    """True for a float method's label ('fp16', 'fp16 (backend=onnx)'): no bit width of its own."""
    return str(method).split(" (", 1)[0] in float_bits()


def _variant_labels(done: pd.DataFrame, notes: Notes) -> pd.Series:
    """'ptq', or 'ptq (backend=c)' where records of one method differ in a setting that changes what
    they measure (its quant keys, the execution backend, the evaluation): a mean pools seeds only."""
    labels = done["quant"].astype(str).copy()
    done = effective_quant_columns(done)  # PTQ records from before activation quantization: act_bits 32
    for key, value in ABSENT_MEANS.items():
        if key in done.columns:
            done[key] = done[key].where(done[key].notna(), value)
    for method in sorted(set(labels) - {"fp32", "actorq"}):  # ActorQ: collated apart, by its own setting
        rows = done["quant"] == method
        keys = [f"quant.{k}" for k in result_keys(method) if k != "bits"] + list(MEASURED_KEYS)
        keys = [k for k in dict.fromkeys(keys) if k in done.columns]
        varying = [k for k in keys if done.loc[rows, k].map(_text).nunique() > 1]
        if not varying:
            continue
        labels[rows] = done.loc[rows, varying].apply(lambda r, method=method: _label(method, r), axis=1)
        notes.add(f"{method} records differ in {', '.join(varying)}: each setting is its own method line and table.")
    return labels


def _label(method: str, row: pd.Series) -> str:
    """'ptq (scheme=affine)': the method and the settings of `row` that apply to it (`shown_settings`)."""
    shown = shown_settings(method, {str(k).removeprefix("quant."): v for k, v in row.items()})
    return f"{method} (" + ", ".join(f"{k}={_text(v)}" for k, v in shown.items()) + ")" if shown else method


def _bits(done: pd.DataFrame) -> pd.Series:
    fixed = done["quant"].map(float_bits())
    if "quant.bits" in done.columns:
        return fixed.fillna(pd.to_numeric(done["quant.bits"], errors="coerce")).astype("Int64")
    return fixed.astype("Int64")


@dataclass
class Results:
    """What collation reads: the selected records and their reduction to one value per seed.

    `runs`: every selected record (done and skipped); `done`: finished records with `algo` (the
    series label: the algo name, or 'ppo (train.steps=8192)' where an (algo, env) holds several
    trainings; `base_algo` keeps the plain name), `method`, `bits`, `e` (the relative error E as a
    fraction, NaN where it is n/a) and `e_note` (why); `seeds`: one row per (algo, env, method, bits,
    seed) with `reward`, `e` (over the records that have one) and the action-fidelity columns
    averaged over any records that share them; `baselines`: the fp32 reward per (algo, env, seed),
    each series' own fp32 records.
    """

    runs: pd.DataFrame
    done: pd.DataFrame
    seeds: pd.DataFrame
    baselines: pd.DataFrame
    notes: Notes = field(default_factory=Notes)
    store: Path | None = None

    @property
    def empty(self) -> bool:
        """True when no finished record is selected."""
        return self.done.empty

    def env_ids(self) -> dict[str, str]:
        """quarl env name -> Gymnasium id, for titles."""
        if "env.id" not in self.done.columns:
            return {}
        return dict(self.done.dropna(subset=["env.id"]).groupby("env")["env.id"].first())

    def return_ranges(self) -> dict[str, ReturnRange]:
        """env -> the range its episode returns can take (`quarl.collate.bounds`), for the envs whose
        definition bounds it: reward intervals are clipped to it."""
        ranges = {}
        for env, env_id in self.env_ids().items():
            column = "env.kwargs.max_episode_steps"
            rows = self.done[self.done["env"] == env]
            limits = pd.to_numeric(rows[column], errors="coerce").dropna() if column in rows else pd.Series()
            found = return_range(env_id, int(limits.iloc[0]) if len(limits) else None)
            if found is not None:
                ranges[env] = found
        return ranges

    def flag(self, algo: str, env: str) -> str:
        """'' where every fp32 policy of (algo, env) is sound, else its marker and what it marks:
        '† fp32 not learned in 2 of 5 seeds' (no better than a random policy), or '‡ fp32 not
        solved in 1 of 5 seeds' (below the env's reward threshold). Every row, cell and point
        that uses such a baseline carries the marker."""
        rows = self.baselines[(self.baselines["algo"] == algo) & (self.baselines["env"] == env)]
        worst = _worst(rows["fp32_flag"])
        if worst is None:
            return ""
        count = int((rows["fp32_flag"] == worst).sum())
        return f"{FLAGS[worst]} fp32 {worst} in {count} of {len(rows)} seeds"

    def e_range(self, algo: str, env: str, seeds: Sequence[Any]) -> tuple[float, float] | None:
        """What a mean of E (a fraction) over `seeds` of (algo, env) can be: each seed's E = (f - q) / |f|
        lies between (f - high) / |f| and (f - low) / |f| for its fp32 reward f and any return q in
        the env's range; None where the env has no range or no seed an fp32 reward."""
        found = self.return_ranges().get(env)
        base = self.baselines[(self.baselines["algo"] == algo) & (self.baselines["env"] == env)]
        f = pd.to_numeric(base[base["seed"].isin(list(seeds))]["fp32"], errors="coerce").to_numpy(float)
        f = f[np.isfinite(f) & (f != 0)]
        if found is None or not f.size:
            return None
        return float(np.mean((f - found.high) / np.abs(f))), float(np.mean((f - found.low) / np.abs(f)))

    def quantized(self) -> pd.DataFrame:
        """Per-seed values of every method but fp32."""
        return self.seeds[self.seeds["method"] != "fp32"]

    def quantizer(self, method: str, algos: list[str] | None = None) -> str:
        """What quantizer a method label's records used: 'ptq: affine, per_tensor, bias fp32'
        (several values joined by '/'); float methods are a cast ('fp16: weights cast to fp16')."""
        if is_float(method):
            return f"{method}: weights cast to {method.split(' (', 1)[0]}" if method != "fp32" else "fp32"
        rows = self.done[self.done["method"] == method]
        if algos is not None:
            rows = rows[rows["algo"].isin(algos)]
        parts = []
        for key in QUANTIZER_KEYS:
            column = f"quant.{key}"
            values = sorted({_text(v) for v in rows[column]}) if column in rows.columns else []
            values = [v for v in values if v != "null"]
            if key == "quantize_bias":
                values = [{"1": "bias quantized", "0": "bias fp32"}.get(v, f"bias {v}") for v in values]
            parts.append("/".join(values) if values else f"{key} not recorded")
        base = method.split(" ")[0]
        return f"{base}: " + ", ".join(parts)

    def quantizers(self, methods: Sequence[str | None] | None = None, algos: list[str] | None = None) -> str:
        """`quantizer` of every integer method (or of `methods`), joined by '; ': for titles and captions."""
        chosen = methods if methods is not None else self.integer_methods()
        return (
            "; ".join(dict.fromkeys(self.quantizer(m, algos) for m in chosen if m is not None and not is_float(m)))
            or "no quantizer"
        )

    def integer_methods(self, algo: str | None = None) -> list[str]:
        """Method labels with a bit width (ptq, qat, ... and their variants), of `algo` or of all, sorted."""
        seeds = self.seeds if algo is None else self.seeds[self.seeds["algo"] == algo]
        return sorted(seeds.loc[~seeds["method"].map(is_float), "method"].unique())

    def ptq_methods(self) -> list[str]:
        """PTQ's method labels ('ptq', 'ptq (scheme=quarl_code)', ...), the paper's scheme first: its
        published numbers came from QuaRL's released code (`quant.scheme=quarl_code`)."""
        column = self.done["quant.scheme"] if "quant.scheme" in self.done else pd.Series("", index=self.done.index)

        def paper_first(method: str) -> tuple[bool, str]:
            schemes = set(column[self.done["method"] == method].map(_text))
            return schemes != {PAPER_SCHEME}, method

        return sorted((m for m in self.integer_methods() if m.split(" ")[0] == "ptq"), key=paper_first)

    def fp32_of(self, algo: str, env: str, method: str | None = None) -> pd.Series:
        """The fp32 reward per seed that `method`'s rows of (algo, env) stand beside: the policies'
        fp32 baselines, or where the method's label names an evaluation setting of its own
        ('ptq (eval.episodes=5)'), the fp32 reward its records carry, evaluated the same way (fp32
        records of one seed under several evaluations are never averaged into it)."""
        if method is not None and "eval." in method:
            rows = self.seeds[
                (self.seeds["algo"] == algo) & (self.seeds["env"] == env) & (self.seeds["method"] == method)
            ]
            if rows["fp32"].notna().any():
                return rows.groupby("seed")["fp32"].mean().dropna()
        base = self.baselines[(self.baselines["algo"] == algo) & (self.baselines["env"] == env)]
        return base.set_index("seed")["fp32"]

    def pairs(self, method: str) -> set[tuple[str, str]]:
        """The (algo, env) pairs that have per-seed values of `method`."""
        rows = self.seeds[self.seeds["method"] == method]
        return set(zip(rows["algo"], rows["env"]))


def _mixed_settings(done: pd.DataFrame, notes: Notes) -> None:
    """A note where records of one (series, env, method, bits, seed) remain several after trainings and
    method settings are told apart (fp32 records evaluated differently, or one cell measured by two
    versions of quarl): the note names the keys they differ in."""
    keys = CELL + ["seed"]
    counts = done.groupby(keys, dropna=False).size()
    dupes = counts[counts > 1]
    if dupes.empty:
        return
    columns = [c for c in [*config_keys(done), "measurement", "policy_key"] if c not in keys and c in done.columns]
    differing: set[str] = set()
    indexed = done.set_index(keys)
    for key in dupes.index:
        rows = indexed.loc[[key]]
        differing.update(c for c in columns if rows[c].map(_text).nunique() > 1)
    shown = ", ".join(sorted(differing)) or "no setting at all (the same cell recorded more than once)"
    notes.add(
        f"{len(dupes)} (algo, env, method, bits, seed) cells have several records that differ in "
        f"{shown}; their mean averages them: filter by those keys (quarl collate KEY=VALUE) to separate them."
    )


def _series(done: pd.DataFrame, notes: Notes) -> pd.DataFrame:
    """`done` with `algo` the series label of each record's training and `base_algo` the algo name;
    ActorQ records (which train their own policies, collated apart) keep their algo name."""
    done = done.assign(base_algo=done["algo"])
    policies = done["quant"] != "actorq"
    labels, found = trainings.trainings(done[policies])
    done.loc[policies, "algo"] = labels
    for note in trainings.notes(found):
        notes.add(note)
    return done


def _seed_list(keys: list[tuple]) -> str:
    """[(algo, env, seed), ...] as 'ppo/cartpole seeds 0,1; a2c/acrobot seed 2'."""
    groups: dict[tuple, list[str]] = {}
    for algo, env, seed in keys:
        groups.setdefault((algo, env), []).append(_text(seed))
    return "; ".join(f"{a}/{e} seed{'s' if len(s) > 1 else ''} {','.join(s)}" for (a, e), s in groups.items())


def _baselines(done: pd.DataFrame, notes: Notes) -> pd.DataFrame:
    """fp32 reward per (algo, env, seed): the fp32 records, or else the baseline stored with the
    quantized records of the same policy; with `fp32_flag` ('not learned', 'not solved' or None)
    from the records (`quarl.store.flags.flags`)."""
    keys = ["algo", "env", "seed"]
    fp32 = done[done["quant"] == "fp32"].groupby(keys, dropna=False)["reward_mean"].mean()
    carried = done[done["quant"] != "fp32"].groupby(keys, dropna=False)["fp32_reward"].mean()
    missing = carried.index.difference(fp32.index)
    carried_ok = [k for k in missing if pd.notna(carried.loc[k])]
    blank = [k for k in missing if k not in carried_ok]
    if carried_ok:
        notes.add(
            f"No fp32 record in the selection for {_seed_list(carried_ok)}: the fp32 baseline is the one "
            "stored with their quantized records."
        )
    if blank:
        notes.add(f"No fp32 baseline at all for {_seed_list(blank)}: their fp32 value and E are left blank.")
    both = pd.concat([fp32, carried.loc[missing]]).dropna().rename("fp32").reset_index()
    flagged = done.assign(fp32_flag=flags(done))
    worst = flagged.groupby(keys, dropna=False)["fp32_flag"].agg(_worst).rename("fp32_flag").reset_index()
    return both.merge(worst, on=keys, how="left")


def _worst(flags: pd.Series) -> str | None:
    """The weakest of a seed's fp32 flags: 'not learned' before 'not solved' before none."""
    present = {f for f in flags if isinstance(f, str)}
    return next((f for f in FLAGS if f in present), None)


def prepare(runs: pd.DataFrame, store: str | Path | None = None) -> Results:
    """Turn selected store records into a `Results` (see there); problems become notes, not errors."""
    notes = Notes()
    runs = runs.reset_index(drop=True)
    done = runs[runs["status"] == "done"].copy() if "status" in runs.columns else runs.iloc[0:0].copy()
    left_out = runs.loc[runs["status"] != "done", "status"] if "status" in runs.columns else pd.Series(dtype=object)
    if len(left_out):
        counts = left_out.value_counts()
        states = ", ".join(f"{n} {s}" for s, n in counts.items())
        na = "; skipped = the paper's n/a" if "skipped" in counts.index else ""
        notes.add(f"{len(left_out)} selected records are not done ({states}{na}): left out.")
    if "seed" not in done.columns:
        done["seed"] = 0
    if not done.empty:
        done = _series(done, notes)
        done["method"] = _variant_labels(done, notes)
        done["bits"] = _bits(done)
        no_bits = done["bits"].isna()
        if no_bits.any():
            notes.add(f"{int(no_bits.sum())} records have no quant.bits: left out.")
            done = done[~no_bits]
        done["e"] = pd.to_numeric(done["rel_error"], errors="coerce")
        done.loc[done["quant"] == "fp32", "e"] = 0.0
        done["e_note"] = done["rel_error_note"] if "rel_error_note" in done.columns else None
        for column in FIDELITY:  # records written before action fidelity was measured have none: blank
            done[column] = pd.to_numeric(done[column], errors="coerce") if column in done.columns else float("nan")
        weight_bits = done.get("bits_per_weight", pd.Series(np.nan, index=done.index))  # format records have it
        done["bits_per_weight"] = pd.to_numeric(weight_bits, errors="coerce")
        named = done.get("quant.format", pd.Series(None, index=done.index, dtype=object))
        done["number_format"] = named.where(named.notna(), INTEGER).astype(str)
        quantized = done[done["quant"] != "actorq"]  # ActorQ trains its own policies: collated apart
        _mixed_settings(quantized, notes)
        baselines = _baselines(quantized, notes)
        _undefined_e(quantized, notes)
        carried = pd.to_numeric(quantized.get("fp32_reward", pd.Series(index=quantized.index)), errors="coerce")
        seeds = (
            quantized.assign(fp32_carried=carried)
            .groupby(CELL + ["seed"], dropna=False)
            .agg(
                reward=("reward_mean", "mean"),
                e=("e", "mean"),
                fp32=("fp32_carried", "mean"),
                records=("cell_key", "size"),
                e_note=("e_note", lambda v: next((str(n) for n in v if isinstance(n, str) and n), None)),
                **{c: (c, "mean") for c in FIDELITY},
                bits_per_weight=("bits_per_weight", "mean"),
                number_format=("number_format", "first"),
            )
            .reset_index()
        )
        seeds["bits"] = seeds["bits"].astype(int)
        seeds = seeds.merge(baselines[["algo", "env", "seed", "fp32_flag"]], on=["algo", "env", "seed"], how="left")
    else:
        done = done.assign(
            base_algo=done["algo"] if "algo" in done.columns else pd.Series(dtype=str),
            method=pd.Series(dtype=str),
            bits=pd.Series(dtype="Int64"),
            e=pd.Series(dtype=float),
        )
        baselines = pd.DataFrame(columns=["algo", "env", "seed", "fp32", "fp32_flag"])
        seeds = pd.DataFrame(
            columns=CELL
            + ["seed", "reward", "e", "fp32", "records", "e_note", *FIDELITY, "bits_per_weight", "number_format"]
            + ["fp32_flag"]
        )
    _one_seed(seeds, notes)
    return Results(
        runs=runs,
        done=done.reset_index(drop=True),
        seeds=seeds,
        baselines=baselines,
        notes=notes,
        store=Path(store) if store is not None else None,
    )


def _undefined_e(quantized: pd.DataFrame, notes: Notes) -> None:
    """A note per (algo, env) whose quantized records have no E: n/a, with the records' reason."""
    undefined = quantized[(quantized["quant"] != "fp32") & quantized["e"].isna()]
    for (algo, env), rows in undefined.groupby(["algo", "env"]):
        reasons = sorted({str(n) for n in rows["e_note"] if isinstance(n, str) and n})
        why = "; ".join(reasons) if reasons else "no fp32 reward to compare with, or an fp32 reward of 0"
        notes.add(
            f"{algo}/{env}: E is n/a for {len(rows)} records ({why}): shown as n/a and left out of every "
            "mean, aggregate and plot of E."
        )


def _one_seed(seeds: pd.DataFrame, notes: Notes) -> None:
    if seeds.empty:
        return
    counts = seeds.groupby(CELL).size()
    single = counts[counts == 1]
    if len(single) == len(counts):
        notes.add(
            "Every cell has a single seed: no confidence intervals can be given (run more seeds, e.g. seed=0,1,2)."
        )
    elif len(single):
        cells = ", ".join(f"{a}/{e} {m} {b}" for a, e, m, b in single.index[:5])
        more = f" and {len(single) - 5} more" if len(single) > 5 else ""
        notes.add(f"{len(single)} cells have a single seed and no confidence interval: {cells}{more}.")


def bit_label(method: str, bits: int) -> str:
    """'fp16', 'fp32' or 'ptq 4': how a (method, bits) pair is named in tables and plots."""
    return method if is_float(method) else f"{method} {bits}"
