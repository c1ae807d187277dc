"""How records are shown and picked: the summary `quarl results` prints, `quarl status`'s grid, and
the one record `quarl export` takes (or the filters that would pick it), naming records by the keys
that tell them apart (`quarl.store.differences`)."""

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
from quarl.store.differences import boolean_keys, differing_keys, eval_only, same_policy, user_keys, value_text
from quarl.store.query import comparable, float_bits, query
from quarl.store.sqlite import flatten

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


def display_text(value: Any, boolean: bool = False) -> str:
    """A stored value as listings show it: `value_text`, with a boolean key's 1 / 0 as true / false."""
    text = value_text(value)
    return {"1": "true", "0": "false"}.get(text, text) if boolean else text


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
