"""The results store: one SQLite file with a row per run, per evaluation episode and per training episode.

Every config key is a column of `runs` (dotted, e.g. ``quant.bits``); columns appear as new keys
do. Each record is written in one transaction (WAL, busy timeout), so parallel jobs lose nothing
and a killed job leaves no half-written record. A JSON copy of each record lives in its run dir,
and `rebuild` makes the store again from those copies.

A store that cannot be used (a damaged file, a read-only file or folder, a folder that cannot be
created) is a `QuarlError` naming the file and what to do, raised before anything is written.

Commands that only read (`quarl results`, `status`, `plan`, `collate`, `export`) open a store with
``read_only=True``: through SQLite's read-only URI (``mode=ro``), or, where that cannot be opened
because the folder is on a read-only mount and WAL's shared-memory file cannot be made, as an
immutable file (``immutable=1``). Such a store must exist and be quarl's: nothing is created, no
table is added, and an SQLite file that is not a quarl store is refused by name.

A store is recognised as quarl's the same way on the write path (run.py's store.path, `quarl
rebuild --store`): by SQLite's `application_id` (`APPLICATION_ID`, set when quarl creates a store,
and on an older quarl store when it is next written), or, for a store an older quarl made, by
quarl's tables. Any other SQLite file is refused by name before anything is written to it, and left
byte for byte as it was.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from quarl.errors import QuarlError
from quarl.store.faults import UNWRITABLE, is_fault, store_fault

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

RUN_COLUMNS = (
    "cell_key TEXT PRIMARY KEY",
    "status TEXT NOT NULL",
    "message TEXT",
    "algo TEXT",
    "env TEXT",
    "quant TEXT",
    "policy_key TEXT",
    "reward_mean REAL",
    "reward_std REAL",
    "reward_min REAL",
    "reward_max REAL",
    "n_episodes INTEGER",
    "fp32_reward REAL",
    "rel_error REAL",
    "train_time_s REAL",
    "eval_time_s REAL",
    "policy_bytes INTEGER",
    "fp32_bytes INTEGER",
    "trained INTEGER",
    "run_dir TEXT",
    "git_commit TEXT",
    "git_dirty INTEGER",
    "versions TEXT",
    "host TEXT",
    "started_at TEXT",
    "ended_at TEXT",
    "config TEXT",
)
#: SQLite's application_id of a quarl results store ("QRL1"), in its file header.
APPLICATION_ID = 0x51524C31
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs ({", ".join(RUN_COLUMNS)});
CREATE TABLE IF NOT EXISTS episodes (
    cell_key TEXT NOT NULL, episode INTEGER NOT NULL, seed INTEGER, reward REAL, length INTEGER,
    PRIMARY KEY (cell_key, episode)
);
CREATE TABLE IF NOT EXISTS curves (
    cell_key TEXT NOT NULL, step INTEGER NOT NULL, reward REAL, length INTEGER, wall_s REAL, actor INTEGER
);
CREATE INDEX IF NOT EXISTS curves_cell ON curves (cell_key);
CREATE TABLE IF NOT EXISTS actors (
    cell_key TEXT NOT NULL, actor INTEGER NOT NULL, steps INTEGER, steps_per_s REAL, wall_s REAL,
    inference_s REAL, env_s REAL, pull_s REAL, deserialize_s REAL, load_s REAL, pulls INTEGER, restarts INTEGER,
    send_s REAL, PRIMARY KEY (cell_key, actor)
);
"""
#: The most columns an SQLite table may have (SQLITE_MAX_COLUMN as SQLite is built by default).
MAX_TABLE_COLUMNS = 2000
# Columns added to a table after a store was first written: added to older files when opened.
MIGRATIONS = {"curves": ("wall_s REAL", "actor INTEGER"), "actors": ("send_s REAL",)}
#: What a store must hold to be read as quarl's: tables and the columns every quarl wrote.
REQUIRED = {"runs": {"cell_key", "status"}, "episodes": {"cell_key", "episode", "seed", "reward", "length"}}
ACTOR_COLUMNS = (
    "actor",
    "steps",
    "steps_per_s",
    "wall_s",
    "inference_s",
    "env_s",
    "pull_s",
    "deserialize_s",
    "load_s",
    "pulls",
    "restarts",
    "send_s",
)


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}}` -> `{"a.b": 1}`; lists become JSON text."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            flat[name] = json.dumps(value)
        else:
            flat[name] = value
    return flat


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


#: The columns a read-only store's reads give for a table or column that an older quarl did not write.
TABLE_COLUMNS = {
    "episodes": ("cell_key", "episode", "seed", "reward", "length"),
    "curves": ("cell_key", "step", "reward", "length", "wall_s", "actor"),
    "actors": ("cell_key", *ACTOR_COLUMNS),
}


class Store:
    """A results store at `path`: created on first use, or with `read_only` an existing quarl store
    that is only read (see the module's docstring)."""

    _ready: set[Path] = set()  # stores this process created or migrated already

    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._mode: str | None = None  # the read-only URI's mode that opened the file (mode=ro or immutable=1)
        if read_only:
            self._check_quarl()
            return
        if self.path.resolve() in Store._ready and self.path.exists():  # opened before: schema is there
            return
        make_folder(self.path.parent, "store.path", file=self.path)
        if not self.path.exists():
            _create_whole(self.path)
        elif not self.path.is_dir():  # a folder: store_fault says so below
            self._check_quarl(new=True)
        with self._open() as con:
            _make_tables(con)
            _migrate(con)
        Store._ready.add(self.path.resolve())

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            return self._connect_read_only()
        con = sqlite3.connect(self.path, timeout=120, isolation_level=None)
        con.execute("PRAGMA busy_timeout = 120000")
        con.execute("PRAGMA journal_mode = WAL")
        return con

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that cannot write: ``mode=ro``, else (a read-only mount, where SQLite cannot
        make the WAL's -shm file) ``immutable=1``, which reads the file as it is on the medium."""
        if not self.path.exists():
            raise QuarlError(
                f"There is no results store at {self.path}: run `python run.py` first, or pass --store PATH."
            )
        uri = self.path.resolve().as_uri()
        modes = (self._mode,) if self._mode else ("mode=ro", "immutable=1")
        for mode in modes:
            con = None
            try:
                con = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=120, isolation_level=None)
                con.execute("PRAGMA busy_timeout = 120000")
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # SQLite opens the file here
            except sqlite3.Error as exc:
                if con is not None:
                    con.close()
                if mode != modes[-1] and is_fault(exc, UNWRITABLE):
                    continue  # a read-only folder: read the file as immutable
                raise
            self._mode = mode
            return con
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_quarl(self, new: bool = False) -> None:
        """Refuse, by name and before reading on or writing, an SQLite file that is not a quarl results
        store: one with another application's id, or without quarl's id and tables. With `new` (the
        write path), an empty database is one to make the store in. Read through a read-only
        connection, so that a refused file is left byte for byte as it was."""
        read_only, self.read_only = self.read_only, True
        try:
            with self._open() as con:
                application = con.execute("PRAGMA application_id").fetchone()[0]
                tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                found = {t: {row[1] for row in con.execute(f"PRAGMA table_info({_quote(t)})")} for t in REQUIRED}
        finally:
            self.read_only, self._mode = read_only, None
        ours = all(columns <= found[table] for table, columns in REQUIRED.items())
        if application == APPLICATION_ID or (application == 0 and (ours or (new and not tables))):
            return
        held = f"its tables: {', '.join(sorted(tables))}" if tables else "no tables at all"
        held += f"; SQLite application_id {application}" if application else ""
        fix = (
            "give a quarl store or a new file (store.path=PATH for run.py, --store PATH for quarl rebuild)"
            if new
            else "give the store that run.py writes (store.path, default outputs/results.sqlite) with --store PATH"
        )
        raise QuarlError(f"{self.path} is not a quarl results store ({held}) and was left as it is: {fix}.")

    @contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        """A connection, closed after use; SQLite's faults (damaged, read-only, ...) become a QuarlError."""
        try:
            con = self._connect()
        except (sqlite3.Error, OSError) as exc:
            raise store_fault(self.path, exc) from None
        try:
            yield con
        except sqlite3.Error as exc:
            raise store_fault(self.path, exc) from None
        finally:
            con.close()

    def status(self, cell_key: str) -> str | None:
        """'done', 'skipped', ... for a stored cell, None if absent."""
        with self._open() as con:
            row = con.execute("SELECT status FROM runs WHERE cell_key = ?", (cell_key,)).fetchone()
        return row[0] if row else None

    def reward(self, cell_key: str) -> float | None:
        """Mean reward of a finished cell, None if it is not done."""
        with self._open() as con:
            row = con.execute(
                "SELECT reward_mean FROM runs WHERE cell_key = ? AND status = 'done'", (cell_key,)
            ).fetchone()
        return row[0] if row else None

    def write(self, record: Mapping[str, Any]) -> None:
        """Insert or replace one record (`run` fields, flattened `config`, `episodes`) atomically."""
        self.write_many([record])

    def write_many(
        self, records: Iterable[Mapping[str, Any]], refused: Callable[[Mapping[str, Any], str], None] | None = None
    ) -> int:
        """Insert or replace records in one transaction (all or none, one commit: a store rebuilt
        from a thousand record files in seconds); how many. With `refused`, a record the store cannot
        hold (more columns than a table may have, a value SQLite cannot take) is undone alone and
        given to `refused` with the reason, and the others are written."""
        count = 0
        with self._open() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                known = {row[1].lower() for row in con.execute("PRAGMA table_info(runs)")}
                for record in records:
                    if refused is None:
                        _insert(con, record, known)
                    elif (why := _insert_alone(con, record, known)) is not None:
                        refused(record, why)
                        continue
                    count += 1
                con.execute("COMMIT")
            except BaseException:
                _rollback(con)
                raise
        return count

    def delete(self, cell_key: str) -> None:
        """Remove a cell's record (and its episodes and curve)."""
        with self._open() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                for table in ("runs", "episodes", "curves", "actors"):
                    con.execute(f"DELETE FROM {table} WHERE cell_key = ?", (cell_key,))
                con.execute("COMMIT")
            except BaseException:
                _rollback(con)
                raise

    def _frame(self, table: str, order: str) -> pd.DataFrame:
        """Every row of `table`, sorted by `order`. A read-only store written by an older quarl, which
        could not be migrated, gives its missing tables and columns as empty ones."""
        import pandas as pd  # only where frames are read: a sweep's check of its cells needs none

        with self._open() as con:
            present = [row[1] for row in con.execute(f"PRAGMA table_info({table})")]
            if not present and table in TABLE_COLUMNS:
                return pd.DataFrame(columns=list(TABLE_COLUMNS[table]))
            try:
                frame = pd.read_sql_query(f"SELECT * FROM {table} ORDER BY {order}", con)
            except pd.errors.DatabaseError as exc:  # pandas wraps SQLite's error: let _open tell it
                if isinstance(exc.__cause__, sqlite3.Error):
                    raise exc.__cause__ from None
                raise
        for column in TABLE_COLUMNS.get(table, ()):
            if column not in frame.columns:
                frame[column] = None
        return frame

    def runs(self) -> pd.DataFrame:
        """Every run record, one row each."""
        return self._frame("runs", "started_at")

    def episodes(self) -> pd.DataFrame:
        """Every evaluation episode, one row each."""
        return self._frame("episodes", "cell_key, episode")

    def curves(self) -> pd.DataFrame:
        """Training curves: the return of every training episode and the env step it ended at
        (ActorQ: also the wall time since training started and the actor that played it)."""
        return self._frame("curves", "cell_key, step")

    def actors(self) -> pd.DataFrame:
        """ActorQ's per-actor time breakdown: one row per (cell, actor)."""
        return self._frame("actors", "cell_key, actor")


def _rollback(con: sqlite3.Connection) -> None:
    """Undo an open transaction; a rollback that fails too (a damaged file) leaves the first error to tell."""
    if con.in_transaction:
        with suppress(sqlite3.Error):
            con.execute("ROLLBACK")


def make_folder(folder: Path, key: str, file: Path | None = None) -> Path:
    """Create `folder` (and its parents) for the setting `key`, or raise a QuarlError naming the
    setting, its value and the reason: the folder of a store's `file` (store.path) or the folder
    itself (store.policies). Used wherever a store's folder is created."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if file is None:
            raise QuarlError(
                f"{key}={folder} cannot be created ({reason}): set {key} to a folder you can write."
            ) from None
        raise QuarlError(
            f"{key}={file} cannot be opened: its folder {folder} cannot be created ({reason}); "
            f"set {key} to a path in a folder you can write."
        ) from None
    return folder


def _create_whole(path: Path) -> None:
    """Make a new store with its tables before its name appears, so that a reader (`quarl status` as a
    run starts) never finds a database without them. A store another process made meanwhile is kept;
    where this cannot be done (no hard links, a full disk), the caller makes it in place."""
    new = path.with_name(f".{path.name}.{os.getpid()}.new")
    try:
        with suppress(sqlite3.Error, OSError):
            with closing(sqlite3.connect(new)) as con:
                _make_tables(con)
            os.link(new, path)
    finally:
        new.unlink(missing_ok=True)


def _make_tables(con: sqlite3.Connection) -> None:
    """The store's tables where they are missing, and quarl's application_id where it is not yet set
    (a store an older quarl made; where the file cannot be written, the next write says so)."""
    con.executescript(SCHEMA)
    if con.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
        with suppress(sqlite3.OperationalError):
            con.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def _migrate(con: sqlite3.Connection) -> None:
    """Add the columns of MIGRATIONS that a store written by an older quarl lacks."""
    for table, columns in MIGRATIONS.items():
        known = {row[1] for row in con.execute(f"PRAGMA table_info({table})")}
        for column in columns:
            if column.split()[0] not in known:
                con.execute(f"ALTER TABLE {table} ADD COLUMN {column}")


def _insert_alone(con: sqlite3.Connection, record: Mapping[str, Any], known: set[str]) -> str | None:
    """`_insert` under a savepoint of its own: None once written, or why the store cannot hold the
    record (then nothing of it is kept, and `known` is as it was)."""
    before = set(known)
    con.execute("SAVEPOINT record")
    try:
        _insert(con, record, known)
    except (QuarlError, OverflowError, sqlite3.InterfaceError, sqlite3.ProgrammingError) as exc:
        con.execute("ROLLBACK TO record")
        con.execute("RELEASE record")
        known.clear()
        known.update(before)
        return str(exc).rstrip(".")
    con.execute("RELEASE record")
    return None


def _insert(con: sqlite3.Connection, record: Mapping[str, Any], known: set[str]) -> None:
    """One record's rows in the open transaction of `con`, adding the run columns it brings to
    `known` (the runs table's, in lower case: SQLite's names ignore case)."""
    run = dict(record["run"])
    run["config"] = json.dumps(record["config"], sort_keys=True)
    run["versions"] = json.dumps(run.get("versions", {}), sort_keys=True)
    run.update(flatten(record["config"]))
    new = [column for column in run if column.lower() not in known]
    if len(known) + len(new) > MAX_TABLE_COLUMNS:
        raise QuarlError(
            f"The record of cell {run['cell_key']} would give the store's runs table {len(known) + len(new)} columns "
            f"({len(new)} new fields and config keys), more than the {MAX_TABLE_COLUMNS} an SQLite table may have: "
            "write it to another store."
        )
    for column in new:
        con.execute(f"ALTER TABLE runs ADD COLUMN {_quote(column)}")
        known.add(column.lower())
    names = ", ".join(_quote(c) for c in run)
    marks = ", ".join("?" for _ in run)
    key = run["cell_key"]
    con.execute(f"INSERT OR REPLACE INTO runs ({names}) VALUES ({marks})", list(run.values()))
    for table in ("episodes", "curves", "actors"):
        con.execute(f"DELETE FROM {table} WHERE cell_key = ?", (key,))
    con.executemany(
        "INSERT INTO episodes (cell_key, episode, seed, reward, length) VALUES (?, ?, ?, ?, ?)",
        [(key, e["episode"], e["seed"], e["reward"], e["length"]) for e in record["episodes"]],
    )
    con.executemany(
        "INSERT INTO curves (cell_key, step, reward, length, wall_s, actor) VALUES (?, ?, ?, ?, ?, ?)",
        [(key, c["step"], c["reward"], c["length"], c.get("wall_s"), c.get("actor")) for c in record.get("curve", [])],
    )
    con.executemany(
        f"INSERT INTO actors (cell_key, {', '.join(ACTOR_COLUMNS)}) VALUES (?{', ?' * len(ACTOR_COLUMNS)})",
        [(key, *(a.get(c) for c in ACTOR_COLUMNS)) for a in record.get("actors", [])],
    )
