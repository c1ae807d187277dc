"""How records are shown and picked: the keys that tell records apart, the summary `quarl results`
prints, `quarl status`'s grid, and the one record `quarl export` takes (or the filters that would
pick it)."""

from __future__ import annotations

import json
import math
import shlex
import shutil
import textwrap
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from quarl.errors import QuarlError
from quarl.store.query import comparable, float_bits, query
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

# ---------------------------------------------------------------- which keys tell records apart


#: Keys set by choosing algo=NAME and env=NAME (env.id, env.return_scale, algo.hyperparams.*): named
#: to a user only where records of one algorithm and env disagree on them (an override).
GROUP_PREFIXES = ("algo.", "env.")
#: Keys that change how a policy is evaluated or executed, never the policy itself.
EVAL_ONLY_KEYS = frozenset({"quant.backend"})
EVAL_ONLY_PREFIXES = ("eval.",)
#: Config keys that repeat a run column (the filter `algo=dqn` is the key algo.name).
_AS_COLUMN = {"algo.name": "algo", "env.name": "env", "quant.method": "quant"}


# ---------------------------------------------------------------- the summary `quarl results` prints

SUMMARY_COLUMNS = [
    "algo",
    "env",
    "quant",
    "quant.bits",
    "quant.scheme",
    "quant.granularity",
    "quant.quantize_bias",
    "seed",
    "status",
    "reward_mean",
    "reward_std",
    "fp32_reward",
    "rel_error",
    "n_episodes",
    "policy_bytes",
]
#: Action fidelity against the fp32 policy on the states it visits (blank in records written before them).
FIDELITY_COLUMNS = [
    "action_agreement",
    "action_mad",
    "action_kl",
    "agreement_states",
    "backend_action_agreement",
    "backend_action_mad",
    "actor_action_agreement",
    "actor_action_mad",
]


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


def display_text(value: Any, boolean: bool = False) -> str:
    """A stored value as listings show it: `value_text`, with a boolean key's 1 / 0 as true / false."""
    text = value_text(value)
    return {"1": "true", "0": "false"}.get(text, text) if boolean else text


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


def latest(runs: pd.DataFrame) -> pd.Series:
    """The most recent of `runs` (by start, then end time)."""
    order = [c for c in ("started_at", "ended_at") if c in runs.columns]
    return (runs.sort_values(order, kind="stable", na_position="first") if order else runs).iloc[-1]


def typed_text(record: pd.Series, key: str) -> str:
    """`record`'s value of `key` as a user types it: its stored config's, booleans as true/false."""
    value = record.get(key)
    if key in record.index and isinstance(record.get("config"), str):
        try:
            value = flatten(json.loads(record["config"])).get(key, value)
        except (TypeError, ValueError):
            pass
    return str(value).lower() if isinstance(value, bool) else value_text(value)


def one_record(
    runs: pd.DataFrame, typed: str, shown: int = 3, run_cell: str | None = None
) -> tuple[pd.Series, str | None]:
    """The finished record `typed` (the user's filters) picks among `runs`, with a note where several
    matched: `run_cell`'s (the cell `python run.py <filters>` makes), else the most recent where all
    hold one policy. Several policies, or none, raise a QuarlError naming up to `shown` keys a user
    sets that tell them apart, with the most recent record's values of them as the filter to add."""
    if runs.empty:
        raise QuarlError(f"No finished record matches {typed}: `quarl results` lists what is in the store.")
    record = latest(runs)
    if len(runs) == 1:
        return record, None
    made = runs[runs["cell_key"] == run_cell] if run_cell is not None and "cell_key" in runs else runs.iloc[0:0]
    if len(made):
        return latest(made), (
            f"{len(runs)} finished records match {typed}: exporting the one `python run.py {typed}` makes "
            f"(cell {run_cell}, the defaults for every key not given); `quarl results {typed}` lists the others."
        )
    if same_policy(runs):
        differ = differing_keys(runs, by=())
        how = f"differ only in {', '.join(differ)}, which" if differ else "share every setting, so they"
        return record, (
            f"{len(runs)} finished records match {typed}; they {how} do not change the policy: "
            f"exporting the most recent ({record['cell_key']})."
        )
    keys = user_keys(runs)
    picked, left = [], runs
    for key in [*keys, "cell_key"]:  # the most recent record's values, only as many as narrow it down
        if len(left) == 1 or same_policy(left):
            break
        narrower = left[left[key].map(value_text) == value_text(record[key])]
        if len(narrower) < len(left):
            picked.append(shlex.quote(f"{key}={typed_text(record, key)}"))
            left = narrower
    named = [k for k in keys if not eval_only(k)][:shown]
    if not named:
        apart = "they differ only in keys quarl derives from algo and env"
    else:
        more = len([k for k in keys if not eval_only(k)]) - len(named)
        apart = "they differ in " + "; ".join(f"{k} ({values_text(runs, k, limit=3)})" for k in named)
        apart += f" and {more} more key{'s' * (more > 1)} (`quarl results {typed}` shows them)" if more else ""
    raise QuarlError(
        f"{len(runs)} finished records match {typed}; {apart}: add e.g. {' '.join(picked)} (the most recent record)."
    )


def values_text(runs: pd.DataFrame, key: str, limit: int = 4) -> str:
    """'0, 1, 2' or '500, null': the distinct values of `key` among `runs`, numbers in order."""
    values = sorted({typed_text(r, key) for _, r in runs.iterrows()}, key=lambda v: (v == "null", _sort_number(v), v))
    shown = ", ".join(values[:limit])
    return shown + (f", ... ({len(values)} values)" if len(values) > limit else "")


def _natural(level: pd.Index) -> pd.Index:
    """An index level as ranks in natural order (numbers as numbers, 'null' last), for sort_index."""
    key = lambda v: (str(v) == "null", _sort_number(str(v)), str(v))  # noqa: E731  (seeds stay ints)
    rank = {v: i for i, v in enumerate(sorted(set(level), key=key))}
    return level.map(rank)


def _sort_number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.inf


def setting_label(quant: Any, bits: Any) -> str:
    """'fp32', 'fp16' or 'ptq 4b': a quant setting as a status column."""
    if quant in float_bits():
        return str(quant)
    return f"{quant} {value_text(bits)}b" if comparable(bits) is not None else str(quant)


def setting_order(label: str) -> tuple:
    """Sort key of status columns: the float methods first (fp32, fp16, bf16), then each by bit width."""
    head, _, rest = label.partition(" ")
    floats = list(float_bits())
    if head in floats:
        return (0, floats.index(head), 0.0, label)
    bits = rest.split(" ", 1)[0].rstrip("b")
    return (1, head, _sort_number(bits), label)


def status(store: str | Path, filters: Mapping[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A grid of cell states and the failed cells' errors.

    Rows: (algo, env, seed) and every other config key that differs among the selected records
    (``train.steps``, ``eval.episodes``, ...); columns: the quant settings (``fp32``, ``ptq 2b``,
    ``ptq 4b``, ... sorted by bit width as numbers), with the options that differ among a method's
    records (``scheme``) added to the column name. Failed cells: their row keys, their column
    (``setting``), message and run dir.
    """
    runs = query(store, filters)
    if runs.empty:
        return pd.DataFrame(), pd.DataFrame()
    fixed = ["algo", "env", "seed", "quant", "quant.bits", "quant.actor_bits"]
    differ = differing_keys(runs, exclude=fixed)
    quant_keys = [k for k in differ if k.startswith("quant.")]
    extra = [k for k in differ if k not in quant_keys]
    row_keys = [k for k in ["algo", "env", "seed"] if k in runs.columns] + extra
    bits = runs["quant.bits"] if "quant.bits" in runs.columns else pd.Series(None, index=runs.index)
    if "quant.actor_bits" in runs.columns:  # ActorQ's width is its actors' (older records say quant.bits=8)
        bits = bits.where((runs["quant"] != "actorq") | runs["quant.actor_bits"].isna(), runs["quant.actor_bits"])
    labels = {i: setting_label(q, b) for i, q, b in zip(runs.index, runs["quant"], bits)}
    for method, group in runs.groupby("quant", sort=False):  # a method's options that differ among its records
        own = [k for k in differing_keys(group, exclude=fixed) if k in quant_keys and method not in float_bits()]
        for i in group.index:
            shown_keys = [k for k in own if comparable(runs.at[i, k]) is not None]
            labels[i] = " ".join(
                [labels[i], *(f"{k.split('.', 1)[1]}={value_text(runs.at[i, k])}" for k in shown_keys)]
            )
    booleans = boolean_keys(runs)
    shown = runs.assign(
        setting=pd.Series(labels), **{k: runs[k].map(lambda v, b=k in booleans: display_text(v, b)) for k in extra}
    )  # null: a value
    grid = shown.pivot_table(
        index=row_keys, columns="setting", values="status", aggfunc=lambda s: "/".join(sorted(set(s))), dropna=False
    )
    grid = grid.dropna(how="all").reindex(columns=sorted(grid.columns, key=setting_order))
    grid = grid.sort_index(key=_natural)
    grid.columns.name = None
    failed = shown[shown["status"] == "failed"]
    failed = failed[[c for c in [*row_keys, "setting", "message", "run_dir"] if c in failed.columns]]
    return grid.fillna("-"), failed.reset_index(drop=True)


def summary_columns(runs: pd.DataFrame) -> list[str]:
    """The columns `quarl results` shows: the summary, every config key that tells the selected
    records apart, the action-fidelity columns any of them has, and `rel_error_note` where E is n/a."""
    base = [c for c in SUMMARY_COLUMNS if c in runs.columns]
    extra = [k for k in differing_keys(runs) if k not in base]
    at = base.index("status") if "status" in base else len(base)
    columns = base[:at] + extra + base[at:]
    columns += [c for c in FIDELITY_COLUMNS if c in runs.columns and runs[c].notna().any()]
    if "rel_error_note" in runs.columns and runs["rel_error_note"].notna().any():
        columns.append("rel_error_note")
    if "fp32_flag" in runs.columns and runs["fp32_flag"].astype(bool).any():
        columns.insert(columns.index("rel_error") + 1 if "rel_error" in columns else len(columns), "fp32_flag")
    return columns


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    """The summary table as printed: `summary_columns`, as `shown`."""
    return shown(runs, summary_columns(runs))


def shown(runs: pd.DataFrame, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """`columns` of `runs` (default all) as text, as `quarl results` prints them (`--csv` writes the
    stored values instead): E in percent as the run log prints it (``1.23%``; 'n/a' where a finished
    quantized record has none, its fp32 reward too close to 0 to divide by: see rel_error_note),
    booleans as true / false, whole numbers as integers, blanks for missing values."""
    table = runs[list(runs.columns if columns is None else columns)].copy()
    booleans = boolean_keys(runs)
    for column in table.columns:
        if column in booleans:
            table[column] = table[column].map(lambda v: "" if comparable(v) is None else display_text(v, boolean=True))
        elif column == "rel_error":
            na = table[column].isna() & (runs.get("status") == "done") & (runs.get("quant") != "fp32")
            table[column] = table[column].map(lambda v: "" if pd.isna(v) else f"{100 * v:.2f}%").where(~na, "n/a")
        elif pd.api.types.is_numeric_dtype(table[column]) and not pd.api.types.is_bool_dtype(table[column]):
            table[column] = table[column].map(number_text)
        else:
            table[column] = table[column].astype(object).where(table[column].notna(), "")
    return table


def number_text(value: Any) -> str:
    """A number as listings show it: whole numbers as integers (20000, not 2e+04), others to 4
    significant digits without an exponent below 10^4 ... 10^12; blank for a missing value."""
    if value is None or pd.isna(value):
        return ""
    number = float(value)
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return f"{number:.0f}" if 1e4 <= abs(number) < 1e12 else f"{number:.4g}"


# ---------------------------------------------------------------- fitting a terminal

STATE_ORDER = ("done", "running", "failed", "pruned", "skipped")


def status_lines(grid: pd.DataFrame, width: int) -> list[str]:
    """A status grid too wide for the terminal, as a block per row: its keys, then each state
    and the quant settings in it (`done: fp32, ptq 2b, ...`)."""
    lines = []
    names = list(grid.index.names)
    keys = grid.index.to_frame(index=False).astype(str)
    pair = [n for n in ("algo", "env") if n in names]
    # a row names the keys that tell it apart from the other rows of its algorithm and env
    apart = keys.groupby(pair)[[n for n in names if n not in pair]].transform("nunique").gt(1) if pair else None
    for i, (key, row) in enumerate(grid.iterrows()):
        values = key if isinstance(key, tuple) else (key,)
        head = [
            v if n in pair else f"{n}={v}"
            for n, v in zip(names, map(str, values))
            if n in pair or apart is None or apart.at[i, n]
        ]
        lines.append(pack(head, width, sep=" ", indent="    "))
        states: dict[str, list[str]] = {}
        for setting, state in row.items():
            if state != "-":
                states.setdefault(str(state), []).append(str(setting))
        for state in sorted(states, key=lambda s: (STATE_ORDER.index(s) if s in STATE_ORDER else len(STATE_ORDER), s)):
            lines.append(pack(states[state], width, indent="      ", first=f"  {state}: "))
    return lines


def terminal_width() -> int:
    """The terminal's width in characters (100 where the output is not a terminal; $COLUMNS wins)."""
    return shutil.get_terminal_size((100, 24)).columns


def shorten(text: str, limit: int = 32) -> str:
    """`text`, cut to `limit` characters with '...' where longer."""
    return text if len(text) <= limit else text[: max(limit - 3, 1)] + "..."


def pack(items: list[str], width: int, sep: str = ", ", indent: str = "", first: str = "") -> str:
    """`items` joined by `sep` into lines of at most `width` characters, broken between items (an
    item longer than a line is broken between words), the first line starting with `first`, the
    others with `indent`."""
    lines, line = [], first
    for i, item in enumerate(items):
        piece = item + (sep.rstrip() if i < len(items) - 1 else "")
        gap = "" if line in (first, indent) else " " if sep.endswith(" ") else ""
        if len(line) + len(gap) + len(piece) <= width or line in (first, indent):
            if len(line) + len(gap) + len(piece) > width:  # alone on its line and still too long
                wrapped = textwrap.wrap(piece, width, initial_indent=line, subsequent_indent=indent)
                lines += wrapped[:-1]
                line = wrapped[-1] if wrapped else line
                continue
            line += gap + piece
        else:
            lines.append(line)
            line = indent + piece
    lines.append(line)
    return "\n".join(lines)
