"""A record's JSON copy in its run dir: writing it, finding copies under a folder, checking that a
file is a record quarl wrote before its fields become store columns, and rebuilding a store from them."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any, Iterator, Mapping

from quarl.store.sqlite import Store, flatten

log = logging.getLogger(__name__)

RECORD_GLOB = "*record.json"


def write_json(record: Mapping[str, Any], path: Path) -> None:
    """The run dir's copy of a record (written to a temporary name, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
    tmp.replace(path)


def find_records(root: Path) -> Iterator[dict[str, Any]]:
    """Records found as JSON copies anywhere under `root`; a file that cannot be read, is no JSON
    or is not a record quarl writes (`record_problem`) is reported in one sentence and passed over."""
    for path in sorted(root.rglob(RECORD_GLOB)):
        problem: str | None
        try:
            record = json.loads(path.read_bytes().decode("utf-8"))
        except OSError as exc:
            problem = f"it cannot be read ({exc.strerror or exc})"
        except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past Python's limit
            problem = "it is not JSON text"
        else:
            problem = record_problem(record)
            if problem is None:
                yield record
                continue
        log.warning("Passing over %s: not a quarl record (%s).", path, problem)


#: The names a record's run fields and config keys may have as store columns (`quant.bits`,
#: `algo.hyperparams.policy_kwargs`), the most a record may add, and its run fields' types.
COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")
MAX_COLUMNS = 400
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


def record_problem(record: Any) -> str | None:
    """What keeps `record` (a record.json's JSON) from being written into a store as quarl wrote it,
    in words, or None: its parts and their types, a cell key and status, episodes with their seeds,
    and field and config names that make sane, bounded columns that do not shadow one another."""
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
                if not isinstance(row[name], allowed) or isinstance(row[name], bool):
                    return f"its {part}[{i}] {name} is {str(row[name])[:40]!r}"
        key = {"episodes": "episode", "actors": "actor"}.get(part)
        if key is not None and len({row[key] for row in rows}) < len(rows):
            return f"two of its {part} have the same {key}"
    return None


def rebuild(root: Path, store: Store) -> int:
    """Write every record found under `root` into `store`; returns how many."""
    return store.write_many(find_records(root))
