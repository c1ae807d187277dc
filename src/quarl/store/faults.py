"""What SQLite's faults mean for a results store, in one sentence each: a full disk, a damaged
file, one that cannot be written, one locked by another process."""

from __future__ import annotations

from pathlib import Path

from quarl.errors import QuarlError
from quarl.store.disk import disk_full, nearly_full

#: SQLite's result codes (`sqlite_errorname`, Python >= 3.11) by what the user should do, and the
#: words of its messages for older Pythons.
DAMAGED = (("SQLITE_CORRUPT", "SQLITE_NOTADB"), ("malformed", "not a database", "encrypted"))
UNWRITABLE = (
    ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH"),
    ("readonly", "read-only", "unable to open", "permission"),
)
BUSY = (("SQLITE_BUSY", "SQLITE_LOCKED"), ("locked", "busy"))
FULL = (("SQLITE_FULL",), ("disk is full",))
IOERR = (("SQLITE_IOERR",), ("disk i/o error",))


def is_fault(exc: BaseException, kind: tuple[tuple[str, ...], tuple[str, ...]]) -> bool:
    """Whether SQLite's error `exc` is of `kind` (one of the result-code groups above)."""
    names, words = kind
    name = str(getattr(exc, "sqlite_errorname", ""))
    return any(name.startswith(n) for n in names) or (not name and any(w in str(exc).lower() for w in words))


def store_fault(path: Path, exc: BaseException) -> QuarlError:
    """The one sentence for a store SQLite cannot use: what is wrong with `path` and what to do."""
    why = str(exc) or type(exc).__name__
    if path.is_dir():
        return QuarlError(f"The results store {path} is a folder: give its file, e.g. {path / 'results.sqlite'}.")
    if is_fault(exc, FULL) or disk_full(exc, path.parent) or (is_fault(exc, IOERR) and nearly_full(path.parent)):
        return QuarlError(
            f"The disk holding the results store {path} is full ({why}): nothing of the unfinished write "
            "was kept; free space there and run again, or use another store (store.path=PATH for run.py, "
            "--store PATH for quarl)."
        )
    if is_fault(exc, DAMAGED):
        return QuarlError(
            f"The results store {path} is damaged ({why}) and was left as it is: restore it from a backup, or "
            f"move it aside and run `quarl rebuild outputs --store {path}` to write it again from the run dirs' "
            "record.json copies."
        )
    if is_fault(exc, UNWRITABLE):
        return QuarlError(
            f"The results store {path} cannot be written ({why}): make the file and its folder writable "
            f"(SQLite also writes {path.name}-wal and {path.name}-shm beside it), or use another store "
            "(store.path=PATH for run.py, --store PATH for quarl)."
        )
    if is_fault(exc, BUSY):
        return QuarlError(
            f"The results store {path} stayed locked by another process ({why}): run again when it has "
            "finished; on a network file system, where SQLite's locks fail, let the sweep write JSON only "
            "and `quarl rebuild` the store afterwards."
        )
    return QuarlError(f"store.path={path} cannot be opened as a results store ({why}).")
