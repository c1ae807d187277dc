"""A record's JSON copy in its run dir: writing it, finding copies under a folder, checking that a
file is a record quarl wrote before its fields become store columns, and rebuilding a store from them.

A record is checked before it is believed: its parts and their types, its run fields as the store
types them (finite numbers, a status quarl writes), its config values as the config schema types
them, integers the store can hold (64 bits), and names that make sane columns. Only regular files
of bounded size are read. A rebuild passes over each bad record with one sentence naming the file
and the field, keeps the newest record of each cell (by its end time, and says so) or, where asked,
every done run of a cell (each earlier one under its own key), and rebuilds the rest.
"""

from __future__ import annotations

import json
import logging
import math
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from quarl.store.sqlite import RUN_COLUMNS, Store, flatten

log = logging.getLogger(__name__)

RECORD_GLOB = "*record.json"


def write_json(record: Mapping[str, Any], path: Path) -> None:
    """The run dir's copy of a record (written to a temporary name, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
    tmp.replace(path)


def _read(path: Path) -> Any:
    """The JSON of the record file `path`; ValueError naming why it is not read (not a regular file,
    larger than any record, not UTF-8 JSON), OSError where it cannot be."""
    if not path.is_file():  # a FIFO would block the read forever; a device never ends
        raise ValueError("it is not a regular file")
    size = path.stat().st_size
    if size > MAX_RECORD_BYTES:
        raise ValueError(f"it is {size:,} bytes, more than the {MAX_RECORD_BYTES:,} a record may have")
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past Python's limit
        raise ValueError("it is not JSON text") from None


def find_record_files(root: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Records found as JSON copies anywhere under `root`, with their files; a file that is not a
    regular one, cannot be read, is no JSON or is not a record quarl writes (`record_problem`) is
    reported in one sentence and passed over."""
    for path in sorted(root.rglob(RECORD_GLOB)):
        problem: str | None
        try:
            record = _read(path)
        except OSError as exc:
            problem = f"it cannot be read ({exc.strerror or exc})"
        except ValueError as exc:
            problem = str(exc)
        else:
            problem = record_problem(record)
            if problem is None:
                yield path, record
                continue
        log.warning("Passing over %s: not a quarl record (%s).", path, problem)


def find_records(root: Path) -> Iterator[dict[str, Any]]:
    """The records of `find_record_files`, without their files."""
    for _, record in find_record_files(root):
        yield record


#: The names a record's run fields and config keys may have as store columns (`quant.bits`,
#: `algo.hyperparams.policy_kwargs`), the most a record may add, and its run fields' types.
COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")
MAX_COLUMNS = 400
MAX_RECORD_BYTES = 64 << 20  # a record with a long ActorQ curve is a few megabytes
MAX_INT = 2**63 - 1  # what the store (SQLite) holds
#: The states a record may be in (quarl.store.listing.STATE_ORDER lists them in this order).
STATUSES = ("done", "running", "failed", "pruned", "skipped")
#: The run fields the store types, by their SQL type (REAL, INTEGER, TEXT).
_RUN_TYPES = {column.split()[0]: column.split()[1] for column in RUN_COLUMNS}
_RUN_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "REAL": ((int, float), "a number"),
    "INTEGER": ((int,), "an integer"),  # booleans too (trained, git_dirty)
    "TEXT": ((str,), "text"),
}
_SCALAR = (str, int, float, bool, type(None))
_ROWS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "episodes": {"episode": int, "seed": (int, type(None)), "reward": (int, float), "length": (int, type(None))},
    "curve": {"step": (int, float), "reward": (int, float, type(None)), "length": (int, float, type(None))},
    "actors": {"actor": int},
}


def _json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words ("a list", "a number", ...)."""
    kinds = ((bool, "a boolean"), ((int, float), "a number"), (str, "text"), (list, "a list"), (dict, "an object"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


def _run_value_problem(field: str, value: Any) -> str | None:
    """What is wrong with a run field's value as the store types it (REAL, INTEGER, TEXT), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"its run field {field} is {value}, not a finite number"
    sql = _RUN_TYPES.get(field)
    if value is None or sql is None or field == "versions":  # versions: an object, stored as JSON text
        return None
    kinds, expected = _RUN_KINDS[sql]
    if not isinstance(value, kinds) or (sql == "REAL" and isinstance(value, bool)):
        return f"its run field {field} is {json.dumps(value)[:40]}, not {expected}"
    return None


def _huge(value: Any, where: str) -> str | None:
    """The first integer in `value` (a JSON value) that the store cannot hold (64 bits), named by
    where it is (`where`, then its keys dotted and its indices in brackets), or None."""
    if isinstance(value, int) and abs(value) > MAX_INT:
        return f"its {where} is 2^{abs(value).bit_length() - 1} or more, beyond the 64-bit integers the store holds"
    if isinstance(value, dict):
        items = ((f"{where}{'.' if where[-1:] not in ('', ' ') else ''}{key}", item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((f"{where.rstrip()}[{i}]", item) for i, item in enumerate(value))
    else:
        return None
    for inner, item in items:
        found = _huge(item, inner)
        if found is not None:
            return found
    return None


def _iso_time(text: str) -> bool:
    """Whether `text` is an ISO 8601 time (as quarl writes started_at and ended_at)."""
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _value_problem(record: dict[str, Any]) -> str | None:
    """What keeps a well-formed record's values from being believed, in words, or None: a status quarl
    does not write, run fields not as the store types them, config values not as the schema types
    them, integers the store cannot hold."""
    from quarl.config.stored import stored_config_problem

    run = record["run"]
    if run["status"] not in STATUSES:
        return f"its run status {json.dumps(run['status'])[:40]} is none of {', '.join(STATUSES)}"
    for field, value in run.items():
        problem = _run_value_problem(field, value)
        if problem is not None:
            return problem
    for field in ("started_at", "ended_at"):
        if isinstance(run.get(field), str) and not _iso_time(run[field]):
            return f"its run field {field} is {json.dumps(run[field])[:40]}, not an ISO 8601 time"
    problem = stored_config_problem(record["config"])
    if problem is not None:
        return f"its config {problem}"
    for part in ("run", "config", "episodes", "curve", "actors"):
        problem = _huge(record.get(part), f"{part} ")
        if problem is not None:
            return problem
    return None


def record_problem(record: Any) -> str | None:
    """What keeps `record` (a record.json's JSON) from being written into a store as quarl wrote it,
    in words, or None: its parts and their types, a cell key and status, episodes with their seeds,
    field and config names that make sane, bounded columns that do not shadow one another (SQLite's
    names ignore case), and its values (`_value_problem`)."""
    if not isinstance(record, dict):
        return f"it is {_json_kind(record)}, not an object"
    for part, kind in (("run", dict), ("config", dict), ("episodes", list), ("curve", list), ("actors", list)):
        if part not in record and part in ("curve", "actors"):
            continue
        if part not in record:
            return f"it has no {part}"
        if not isinstance(record[part], kind):
            return f"its {part} is {_json_kind(record[part])}, not {'an object' if kind is dict else 'a list'}"
    run = record["run"]
    for field in ("cell_key", "status"):
        if not isinstance(run.get(field), str) or not run[field]:
            return f"its run has no {field}"
    config = flatten(record["config"])
    for field, value in run.items():
        if not isinstance(value, _SCALAR) and not (field == "versions" and isinstance(value, dict)):
            return f"its run field {field} is {_json_kind(value)}, not a number or text"
    names = [*run, *config]
    odd = [n for n in names if not isinstance(n, str) or len(n) > 200 or not COLUMN_NAME.fullmatch(n)]
    if odd:
        return f"{str(odd[0])[:80]!r} cannot be a column name (letters, digits, _ and dotted parts)"
    seen: dict[str, str] = {}
    for name in names:
        if seen.setdefault(name.lower(), name) != name:
            return f"its names {seen[name.lower()]} and {name} differ only in case, and make one store column"
    shadowed = sorted(set(run) & set(config) | {"config"} & set(config))
    if shadowed:
        return f"its config key {shadowed[0]} would overwrite the run field of that name"
    if len(set(names)) > MAX_COLUMNS:
        return f"{len(set(names))} fields and config keys, more than the {MAX_COLUMNS} a record may have"
    for part, fields in _ROWS.items():
        rows = record.get(part, [])
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                return f"its {part}[{i}] is {_json_kind(row)}, not an object"
            for name, allowed in fields.items():
                if name not in row:
                    return f"its {part}[{i}] has no {name}"
                value = row[name]
                if not isinstance(value, allowed) or isinstance(value, bool):
                    return f"its {part}[{i}] {name} is {str(value)[:40]!r}"
                if isinstance(value, float) and not math.isfinite(value):
                    return f"its {part}[{i}] {name} is {value}, not a finite number"
        key = {"episodes": "episode", "actors": "actor"}.get(part)
        if key is not None and len({row[key] for row in rows}) < len(rows):
            return f"two of its {part} have the same {key}"
    return _value_problem(record)


def _ended(record: dict[str, Any]) -> datetime:
    """When a record's run ended (else started), in UTC; the earliest time for one that says neither."""
    for field in ("ended_at", "started_at"):
        text = record["run"].get(field)
        if isinstance(text, str):
            when = datetime.fromisoformat(text)  # checked by `_value_problem`
            return when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    return datetime.min.replace(tzinfo=timezone.utc)


def rerun(record: dict[str, Any]) -> dict[str, Any]:
    """A copy of an earlier run of a cell whose key names its start too (`<cell_key>@<started_at>`),
    so that it is stored beside the cell's newest run, not in its place."""
    run = {**record["run"], "cell_key": f"{record['run']['cell_key']}@{record['run'].get('started_at')}"}
    return {**record, "run": run}


def newest(
    found: Iterable[tuple[Path, dict[str, Any]]], keep: Callable[[dict[str, Any]], bool] | None = None
) -> list[tuple[Path, dict[str, Any]]]:
    """Of the records of each cell, the one whose run ended last (of two that ended together, the
    file that sorts last); each choice is logged. Done runs for which `keep` is true are all kept:
    the earlier runs of a cell (another start time) under their `rerun` key."""
    kept: dict[str, tuple[Path, dict[str, Any]]] = {}
    earlier: list[tuple[Path, dict[str, Any]]] = []
    for path, record in found:
        key = record["run"]["cell_key"]
        if key in kept:
            older_path, older = kept[key]
            if _ended(record) < _ended(older):
                (path, record), (older_path, older) = (older_path, older), (path, record)
            if keep is not None and all(keep(r) and r["run"]["status"] == "done" for r in (record, older)):
                if record["run"].get("started_at") != older["run"].get("started_at"):
                    log.info(
                        "Two runs of cell %s kept: %s and %s (started %s).",
                        key,
                        path,
                        older_path,
                        older["run"].get("started_at"),
                    )
                    earlier.append((older_path, rerun(older)))
                    kept[key] = (path, record)
                    continue
            log.info(
                "Two records of cell %s: keeping %s (%s, ended %s), not %s (%s, ended %s).",
                key,
                path,
                record["run"]["status"],
                record["run"].get("ended_at") or "when not said",
                older_path,
                older["run"]["status"],
                older["run"].get("ended_at") or "when not said",
            )
        kept[key] = (path, record)
    return list(kept.values()) + earlier


def rebuild(root: Path, store: Store, keep: Callable[[dict[str, Any]], bool] | None = None) -> int:
    """Write the newest record of each cell found under `root` into `store` (`newest`; every done run
    for which `keep` is true); a bad one, or one the store cannot hold, is passed over in a sentence.
    Returns how many were written."""
    chosen = newest(find_record_files(root), keep)
    files = {id(record): path for path, record in chosen}

    def refused(record: Mapping[str, Any], why: str) -> None:
        log.warning("Passing over %s: %s.", files[id(record)], why)

    return store.write_many((record for _, record in chosen), refused)
