"""The results store: records, filters, JSON copies, rebuild, parallel writers, bad paths."""

import json
import multiprocessing as mp
import sqlite3
from contextlib import closing

import pytest

from quarl.errors import QuarlError
from quarl.store import listing
from quarl.store import query as results
from quarl.store.record_files import find_records, rebuild, write_json
from quarl.store.sqlite import ACTOR_COLUMNS, Store, flatten
from tests.conftest import ROOT
from tests.full_disk import FILL, run_on_a_small_disk
from tests.store.writers import make_record, writer


def test_flatten_dots_nested_keys():
    assert flatten({"a": {"b": 1, "c": {"d": "x"}}, "e": [1, 2]}) == {"a.b": 1, "a.c.d": "x", "e": "[1, 2]"}


def test_record_lands_with_every_config_key_as_a_column(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    store.write(make_record("k1", bits=4))
    df = store.runs()
    assert df.loc[0, "quant.bits"] == 4 and df.loc[0, "algo.name"] == "dqn"
    assert df.loc[0, "algo.hyperparams.net"] == "[64, 64]"
    assert store.status("k1") == "done" and store.reward("k1") == 100.0
    eps = store.episodes()
    assert list(eps["reward"]) == [99.0, 101.0] and list(eps["seed"]) == [11, 12]


def test_rewriting_a_cell_replaces_it(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    store.write(make_record("k1", reward=1.0))
    store.write(make_record("k1", reward=2.0))
    assert len(store.runs()) == 1 and store.reward("k1") == 2.0
    assert len(store.episodes()) == 2


def test_load_filters_by_config_keys(tmp_path):
    path = tmp_path / "r.sqlite"
    store = Store(path)
    for bits in (2, 4, 8):
        store.write(make_record(f"k{bits}", bits=bits))
    assert len(results.load(path)) == 3
    assert list(results.load(path, {"quant.bits": "4"})["cell_key"]) == ["k4"]
    assert list(results.load(path, algo="dqn", quant__bits=8)["cell_key"]) == ["k8"]
    with pytest.raises(QuarlError, match="No column 'quant.bitz'"):
        results.load(path, {"quant.bitz": 4})
    with pytest.raises(QuarlError, match="There is no results store"):
        results.load(tmp_path / "missing.sqlite")


def test_eight_processes_writing_at_once_lose_no_row(tmp_path):
    path = str(tmp_path / "r.sqlite")
    Store(path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=writer, args=(path, w, 25)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = Store(path)
    assert len(store.runs()) == 200 and len(store.episodes()) == 400


def test_unusable_store_paths_get_a_clear_error(tmp_path):
    with pytest.raises(QuarlError, match="store.path=.* cannot be opened"):
        Store("/proc/no/such/dir/r.sqlite")
    bad = tmp_path / "not-a-db.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(QuarlError, match=r"not-a-db.sqlite is damaged \(file is not a database\).*quarl rebuild"):
        Store(bad)
    assert bad.read_bytes() == b"this is not sqlite" * 100  # left as it was
    with pytest.raises(QuarlError, match="is a folder"):
        Store(tmp_path)


def _filled_store(path, records=40):
    """A store of `records` records, closed (its WAL folded into the file), and the file's bytes."""
    store = Store(path)
    for i in range(records):
        store.write(make_record(f"k{i}", bits=2 + i % 7))
    return path.read_bytes()


def _damage(path, how):
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    else:  # every page after the first (the header and the schema) overwritten with garbage
        path.write_bytes(data[:4096] + bytes(range(256)) * ((len(data) - 4096) // 256))


@pytest.mark.parametrize("how", ["truncated", "overwritten"])
def test_a_damaged_store_is_one_sentence_and_left_as_it_is(tmp_path, monkeypatch, how):
    path = tmp_path / "r.sqlite"
    _filled_store(path)
    _damage(path, how)
    damaged = path.read_bytes()
    monkeypatch.setattr(Store, "_ready", set())  # as a new process opens it
    for use in (lambda s: s.runs(), lambda s: s.status("k1"), lambda s: s.write(make_record("new")),
                lambda s: s.delete("k1"), lambda s: s.episodes()):
        with pytest.raises(QuarlError) as err:
            use(Store(path))
        message = str(err.value)
        assert f"The results store {path} is damaged (" in message
        assert "restore it from a backup" in message and f"quarl rebuild outputs --store {path}" in message
        assert err.value.__cause__ is None and "\n" not in message
    assert path.read_bytes() == damaged


def read_only(monkeypatch):
    """Open every store through a read-only SQLite URI: a read-only file, even for root."""
    def connect(self):
        con = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=1, isolation_level=None)
        con.execute("PRAGMA journal_mode = WAL")
        return con

    monkeypatch.setattr(Store, "_connect", connect)
    monkeypatch.setattr(Store, "_ready", set())


def test_a_read_only_store_reads_and_refuses_writes_in_one_sentence(tmp_path, monkeypatch):
    path = tmp_path / "r.sqlite"
    _filled_store(path, records=3)
    before = Store(path).runs()
    read_only(monkeypatch)
    assert Store(path).runs().equals(before)  # reading a store you may not write works
    for use in (lambda s: s.write(make_record("new")), lambda s: s.delete("k1")):
        with pytest.raises(QuarlError) as err:
            use(Store(path))
        assert str(err.value).startswith(f"The results store {path} cannot be written (attempt to write a readonly")
        assert "make the file and its folder writable" in str(err.value) and "--store PATH" in str(err.value)
    monkeypatch.undo()
    assert Store(path).runs().equals(before)


def test_an_uncreatable_store_or_policy_folder_names_its_setting(tmp_path):
    from quarl.store.sqlite import make_folder

    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(QuarlError, match=rf"store.path={blocker}/sub/r.sqlite cannot be opened: its folder "):
        Store(blocker / "sub" / "r.sqlite")
    with pytest.raises(QuarlError, match=rf"^store.policies={blocker}/policies cannot be created \(Not a directory\)"):
        make_folder(blocker / "policies", "store.policies")
    assert make_folder(tmp_path / "a" / "b", "store.policies").is_dir()
    assert blocker.read_text() == "a file where a folder should be"


def test_rebuild_from_json_copies(tmp_path):
    for i in range(3):
        write_json(make_record(f"k{i}"), tmp_path / "outputs" / f"run{i}" / "record.json")
    write_json(make_record("kb"), tmp_path / "outputs" / "run0" / "baseline.record.json")
    (tmp_path / "outputs" / "junk.record.json").write_text("{not json")
    assert len(list(find_records(tmp_path / "outputs"))) == 4
    store = Store(tmp_path / "rebuilt.sqlite")
    assert rebuild(tmp_path / "outputs", store) == 4
    assert sorted(store.runs()["cell_key"]) == ["k0", "k1", "k2", "kb"]
    assert len(store.episodes()) == 8


MALFORMED = {
    "a number as run": b'{"run": 5, "config": {}, "episodes": []}',
    "only a run": b'{"run": {"cell_key": "x", "status": "done"}}',
    "a list": b"[1, 2]",
    "random bytes": bytes(range(256)) * 4,
    "no cell_key": None,            # filled from make_record below
    "an episode without seed": None,
    "a column name of SQL": None,
    "a config key over a run field": None,
    "a nested run field": None,
    "two episodes 0": None,
    "too many columns": None,
}


def _malformed(name):
    if MALFORMED[name] is not None:
        return MALFORMED[name]
    record = make_record("bad")
    if name == "no cell_key":
        del record["run"]["cell_key"]
    elif name == "an episode without seed":
        del record["episodes"][1]["seed"]
    elif name == "a column name of SQL":
        record["config"]['x" TEXT); DROP TABLE runs; --'] = 1
    elif name == "a config key over a run field":
        record["config"]["status"] = "done"
    elif name == "a nested run field":
        record["run"]["reward_mean"] = [1, 2]
    elif name == "two episodes 0":
        record["episodes"][1]["episode"] = 0
    else:
        record["config"]["many"] = {f"k{i}": i for i in range(500)}
    return json.dumps(record).encode()


def test_rebuild_passes_over_each_malformed_record_in_one_sentence_and_rebuilds_the_rest(tmp_path, caplog):
    from quarl import cli

    root = tmp_path / "outputs"
    for i in range(2):
        write_json(make_record(f"k{i}"), root / f"run{i}" / "record.json")
    for i, name in enumerate(MALFORMED):  # sorted between the good ones: the rebuild goes on past each
        (root / f"run0{i:02d}").mkdir(parents=True)
        (root / f"run0{i:02d}" / "record.json").write_bytes(_malformed(name))
    with caplog.at_level("INFO"):
        assert cli.main(["rebuild", str(root), "--store", str(tmp_path / "r.sqlite")]) == 0
    assert "Traceback" not in caplog.text and not [r for r in caplog.records if r.levelname == "ERROR"]
    passed = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(passed) == len(MALFORMED) and all(m.startswith(f"Passing over {root}/run0") for m in passed)
    assert all(m.count(".") >= 1 and "\n" not in m and "not a quarl record (" in m for m in passed)
    said = " ".join(passed)
    for words in ("(it is a list, not an object)", "(it is not JSON text)", "(its run has no cell_key)",
                  "(its episodes[1] has no seed)", "cannot be a column name", "(its config key status would overwrite",
                  "(its run field reward_mean is a list, not a number or text)", "have the same episode",
                  "more than the 400", "(its run is a number, not an object)", "(it has no config)"):
        assert words in said, (words, said)
    assert "Wrote 2 records" in caplog.text
    store = Store(tmp_path / "r.sqlite", read_only=True)
    assert sorted(store.runs()["cell_key"]) == ["k0", "k1"] and len(store.episodes()) == 4
    columns = set(store.runs().columns)
    assert not {c for c in columns if c.startswith(("many", "x"))} and "algo.hyperparams.net" in columns


def test_every_committed_record_passes_the_checks():
    from quarl.store.record_files import record_problem

    records = list((ROOT / "docs/reproduction/records").rglob("*.json"))
    assert len(records) > 700
    assert {record_problem(json.loads(p.read_text())) for p in records} == {None}


class _Full(sqlite3.OperationalError):
    sqlite_errorname = "SQLITE_FULL"


def test_a_full_disk_under_the_store_is_called_so(tmp_path, monkeypatch):
    from quarl.store.faults import store_fault

    message = str(store_fault(tmp_path / "r.sqlite", _Full("database or disk is full")))
    assert message.startswith(f"The disk holding the results store {tmp_path / 'r.sqlite'} is full (database or")
    assert "free space there" in message
    assert "is full" in str(store_fault(tmp_path / "r.sqlite", OSError(28, "No space left on device")))
    io = sqlite3.OperationalError("disk I/O error")
    io.sqlite_errorname = "SQLITE_IOERR_WRITE"
    assert "cannot be opened as a results store (disk I/O error)" in str(store_fault(tmp_path / "r.sqlite", io))
    monkeypatch.setattr("quarl.store.faults.nearly_full", lambda where: True)  # the same error on a full disk
    assert "is full (disk I/O error)" in str(store_fault(tmp_path / "r.sqlite", io))


_FILLED = f"""
import os
from quarl.errors import QuarlError
from quarl.store.sqlite import Store
from tests.store.test_sqlite import make_record

Store("r.sqlite").write(make_record("k0"))
{FILL}
Store._ready.clear()  # as a later run opens it
for i in range(1, 40):
    record = make_record(f"k{{i}}")
    record["config"]["notes"] = "x" * 20000
    try:
        Store("r.sqlite").write(record)
    except QuarlError as exc:
        print("refused:", exc)
        break
os.remove("filler")  # space freed: the next run goes on, with every record written before
print("kept:", sorted(Store("r.sqlite").runs()["cell_key"]))
"""


def test_a_store_on_a_really_full_disk_is_called_full_and_keeps_its_records(tmp_path):
    """A real full file system (a 256 KiB tmpfs in a user namespace); skipped where that is not allowed."""
    done = run_on_a_small_disk(tmp_path, "256k", _FILLED)
    log = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in log, log
    assert "refused: The disk holding the results store r.sqlite is full (" in log, log
    assert "kept: ['k0'" in log


def test_store_is_sqlite_with_wal(tmp_path):
    Store(tmp_path / "r.sqlite")
    with sqlite3.connect(tmp_path / "r.sqlite") as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# ---------------------------------------------------------------- one filter grammar, read-only commands

def _grammar_store(tmp_path):
    from tests.records import record, write

    path = tmp_path / "r.sqlite"
    store = Store(path)
    write(store, [record("dqn", "cartpole", bits=4, seed=0), record("ppo", "cartpole", bits=8, seed=1),
                  record("a2c", "acrobot", bits=2, seed=2, steps=None)])
    with sqlite3.connect(path) as con:  # a bit width stored as REAL, as an older writer could
        con.execute("""UPDATE runs SET "quant.bits" = 4.0 WHERE algo = 'dqn'""")
    return path


def test_one_filter_grammar_for_every_command_and_the_python_api(tmp_path):
    from quarl.collate import frame
    from quarl.collate import load as collate_load

    path = _grammar_store(tmp_path)
    runs = results.load(path)
    for filters in ({"quant.bits": "4"}, {"algo": "dqn,ppo"}, {"train.steps": "null"}, {"quant.quantize_bias": "0"}):
        assert frame.select(runs, filters).equals(results.select(runs, filters))  # collation's grammar is the same
    assert list(results.load(path, {"quant.bits": "4"})["algo"]) == ["dqn"]      # 4 matches 4.0
    assert list(results.load(path, {"quant.bits": 4.0})["algo"]) == ["dqn"]
    assert sorted(results.load(path, {"algo": "dqn,ppo"})["algo"]) == ["dqn", "ppo"]  # a,b means either
    assert list(results.load(path, {"train.steps": "null"})["algo"]) == ["a2c"]      # null: the default budget
    assert list(results.load(path, {"train.steps": None})["algo"]) == ["a2c"]
    assert len(results.load(path, {"quant.quantize_bias": "false"})) == 3
    assert len(results.load(path, {"train.steps": "1000,null"})) == 3
    study = collate_load(path, {"quant.bits": "4", "algo": "dqn,a2c"})
    assert list(study.done["algo"]) == ["dqn"]
    grid, _ = listing.status(path, {"quant.bits": "2,4"})
    assert sorted(grid.index.get_level_values("algo")) == ["a2c", "dqn"]
    with pytest.raises(QuarlError, match="No column 'quant.bitz'.*quant.bits"):
        results.load(path, {"quant.bitz": 4})


READ_COMMANDS = [["status"], ["results"], ["export", "--out", "x.onnx"], ["collate"], ["plan"]]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("missing", ["missing.sqlite", "no/such/folder/r.sqlite"])
def test_read_only_commands_never_create_a_store(tmp_path, command, missing, caplog, monkeypatch):
    from quarl import cli

    monkeypatch.chdir(tmp_path)
    with caplog.at_level("ERROR"):
        assert cli.main([*command, "--store", missing]) == 1
    assert f"There is no results store at {missing}: run `python run.py` first" in caplog.text
    assert len(caplog.records) == 1 and "Traceback" not in caplog.text
    assert not list(tmp_path.iterdir())  # no file, no folder (collate's --out neither)


def _foreign(path, how):
    """An SQLite file that is not a quarl store: another program's tables, or a 0-byte file."""
    if how == "empty":
        path.write_bytes(b"")
        return "no tables at all"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        con.execute("CREATE TABLE runs (id INTEGER, duration REAL)")  # a `runs` table, but not quarl's
        con.execute("INSERT INTO notes (text) VALUES ('keep me')")
    con.close()
    return "its tables: notes, runs"


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("how", ["tables", "empty"])
def test_read_only_commands_refuse_a_foreign_sqlite_file_by_name_and_leave_it_as_it_is(
        tmp_path, command, how, caplog, monkeypatch):
    from quarl import cli

    monkeypatch.chdir(tmp_path)
    held = _foreign(tmp_path / "other.sqlite", how)
    before = (tmp_path / "other.sqlite").read_bytes()
    with caplog.at_level("ERROR"):
        assert cli.main([*command, "--store", "other.sqlite"]) == 1
    assert caplog.records[-1].getMessage() == (
        f"quarl: other.sqlite is not a quarl results store ({held}) and was left as it is: give the store that "
        "run.py writes (store.path, default outputs/results.sqlite) with --store PATH.")
    assert len(caplog.records) == 1 and "Traceback" not in caplog.text
    assert (tmp_path / "other.sqlite").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]  # no -wal, no collate folder


def test_reading_a_store_changes_nothing_in_it(tmp_path, capsys):
    from quarl import cli

    path = tmp_path / "r.sqlite"
    _filled_store(path, records=3)
    with sqlite3.connect(path) as con:  # as a store written before the ActorQ columns and table were
        con.execute("DROP TABLE actors")
        con.execute("ALTER TABLE curves DROP COLUMN wall_s")
    con.close()
    before = path.read_bytes()
    store = Store(path, read_only=True)
    assert list(store.actors().columns) == ["cell_key", *ACTOR_COLUMNS] and store.actors().empty
    assert "wall_s" in store.curves().columns and len(store.runs()) == 3 and store.status("k1") == "done"
    assert cli.main(["results", "--store", str(path)]) == 0 and "cartpole" in capsys.readouterr().out
    assert cli.main(["status", "--store", str(path)]) == 0
    with pytest.raises(QuarlError, match=f"The results store {path} cannot be written"):
        store.write(make_record("new"))  # a read-only store cannot be written by mistake either
    assert path.read_bytes() == before
    with sqlite3.connect(path) as con:
        assert {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {
            "runs", "episodes", "curves"}
    con.close()


def test_a_store_sqlite_cannot_open_read_only_is_read_as_immutable(tmp_path, monkeypatch):
    """Where ``mode=ro`` cannot open the file (a read-only mount, where WAL's -shm file cannot be
    made), the store is read through ``immutable=1``. Simulated here by refusing ``mode=ro`` as SQLite
    does on such a mount; tests/test_cli_store.py reads a store on a real read-only bind mount."""
    path = tmp_path / "r.sqlite"
    _filled_store(path, records=2)
    real = sqlite3.connect

    def connect(target, *args, **kw):
        if "mode=ro" in str(target):
            target = (tmp_path / "no-such-folder" / "x.sqlite").as_uri() + "?mode=ro"  # SQLITE_CANTOPEN
        return real(target, *args, **kw)

    monkeypatch.setattr(sqlite3, "connect", connect)
    store = Store(path, read_only=True)
    assert len(store.runs()) == 2 and store._mode == "immutable=1"


def test_results_and_status_show_every_key_that_tells_records_apart(tmp_path, capsys):
    from quarl import cli
    from tests.records import record, write

    path = tmp_path / "r.sqlite"
    recs = [record("ppo", "cartpole", "fp32", seed=0, steps=s) for s in (500, 1000)]
    recs += [record("ppo", "cartpole", "ptq", b, seed=0, steps=s) for b in (2, 3, 32, 8) for s in (500, 1000)]
    recs += [record("ppo", "cartpole", "ptq", 4, seed=0, steps=500, episodes=3)]
    write(Store(path), recs)
    assert cli.main(["results", "--store", str(path), "quant.bits=2"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert "train.steps" in header                                 # it differs among the selected records
    assert "eval.episodes" not in header and "algo.n_envs" not in header  # these do not
    assert len(out.splitlines()) == 3                              # two budgets: two rows, not duplicates
    assert cli.main(["results", "--store", str(path), "quant.bits=4,2"]) == 0
    assert "eval.episodes" in capsys.readouterr().out.splitlines()[0].split()
    grid, _ = listing.status(path, {})
    assert list(grid.columns) == ["fp32", "ptq 2b", "ptq 3b", "ptq 4b", "ptq 8b", "ptq 32b"]  # as numbers
    assert grid.index.names[:3] == ["algo", "env", "seed"]
    assert set(grid.index.names[3:]) == {"train.steps", "eval.episodes"}
    rows = grid.reset_index()
    assert list(rows["eval.episodes"]) == ["3", "10", "10"] and list(rows["train.steps"]) == ["500", "500", "1000"]
    assert cli.main(["status", "--store", str(path)]) == 0
    printed = capsys.readouterr().out
    assert printed.index("ptq 3b") < printed.index("ptq 32b") and "train.steps" in printed


def test_export_names_the_keys_that_tell_matches_apart(tmp_path, caplog):
    from quarl import cli
    from tests.records import record, write

    path = tmp_path / "r.sqlite"
    write(Store(path), [record("ppo", "cartpole", "ptq", 8, seed=s, steps=st) for s in (0, 1) for st in (500, None)])
    with caplog.at_level("ERROR"):
        assert cli.main(["export", "--store", str(path), "--out", str(tmp_path / "p.onnx"), "algo=ppo"]) == 1
    message = caplog.records[-1].getMessage()
    assert "4 finished records match algo=ppo" in message
    assert "seed (0, 1)" in message and "train.steps (500, null)" in message
    assert "add e.g. seed=1 train.steps=null (the most recent record)" in message  # seed 1 started last
    assert len(results.load(path, {"algo": "ppo", "seed": 0, "train.steps": "null"})) == 1  # null: the default budget


def test_records_without_the_new_columns_still_show(tmp_path, capsys):
    from quarl import cli
    from tests.records import record, write

    path = tmp_path / "r.sqlite"
    write(Store(path), [record("ppo", "cartpole", bits=8), record("ppo", "cartpole", bits=4, seed=1,
                                                                      action_agreement=0.97, agreement_states=100)])
    assert cli.main(["results", "--store", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "action_agreement" in lines[0].split() and "0.97" in lines[2] and "0.97" not in lines[1]
    write(Store(path), [record("ddpg", "mountaincar_continuous", bits=8, seed=2, reward=-0.5, fp32=-0.03,
                               run={"rel_error": None, "rel_error_note": "|R_fp32| 0.03 < 0.1 (1% of the range)"})])
    table = listing.summary(results.load(path))
    row = table[table["algo"] == "ddpg"].iloc[0]
    assert row["rel_error"] == "n/a" and row["rel_error_note"].startswith("|R_fp32|")


def test_old_fp16_records_are_read_at_the_width_they_ran(tmp_path):
    """The committed campaign records of a named sweep's fp16 cells say quant.bits=8 (written before
    a record stored the width a method uses): read, filtered and collated as 16 bits, keys unchanged."""
    store = tmp_path / "old.sqlite"
    rebuild(ROOT / "docs/reproduction/records", Store(store))
    with sqlite3.connect(store) as con:
        query = "SELECT COUNT(*) FROM runs WHERE quant = 'fp16' AND config LIKE '%\"bits\": 8%'"
        stored = con.execute(query).fetchone()[0]
    assert stored > 0  # the old records as written
    assert results.load(store, {"quant": "fp16", "quant.bits": 8}).empty
    assert len(results.load(store, {"quant": "fp16", "quant.bits": 16})) >= stored
    actorq = results.load(store, {"quant": "actorq"})
    named = actorq["quant.actor_format"].notna() if "quant.actor_format" in actorq else actorq["quant"].isna()
    plain = actorq[~named]
    assert (plain["quant.bits"] == plain["quant.actor_bits"]).all()  # ActorQ: its actors' width
    from quarl.methods._formats import FORMAT_BITS  # a format's actors: its element bits (they run in fp32)

    assert (actorq.loc[named, "quant.bits"] == actorq.loc[named, "quant.actor_format"].map(FORMAT_BITS)).all()


def test_a_new_store_appears_with_its_tables_and_a_store_made_meanwhile_is_kept(tmp_path, monkeypatch):
    """A reader that finds the store's file as a run starts (`quarl status`) finds a quarl store, never
    an empty database; where another process made the store first, its records stay."""
    from quarl.store import sqlite as store_module

    real_link = store_module.os.link
    appeared = []

    def link(src, dst):
        Store(src, read_only=True)  # refuses a file without quarl's tables
        appeared.append(dst)
        real_link(src, dst)

    monkeypatch.setattr(store_module.os, "link", link)
    Store(tmp_path / "a.sqlite")
    assert appeared == [tmp_path / "a.sqlite"] and results.load(tmp_path / "a.sqlite").empty

    def made_meanwhile(src, dst):
        monkeypatch.setattr(store_module.os, "link", real_link)
        Store(dst).write(make_record("theirs"))  # another process's store, with a record, appears first
        real_link(src, dst)

    monkeypatch.setattr(store_module.os, "link", made_meanwhile)
    Store(tmp_path / "b.sqlite")
    assert list(results.load(tmp_path / "b.sqlite")["cell_key"]) == ["theirs"]
    assert not list(tmp_path.glob(".*.new"))  # no half-made store left beside them


# ----------------------------------------------------------------------- recognised as quarl's, to write


def _other_application(path, tables: bool = True):
    """An SQLite file of another application (its own application_id), with quarl's tables or none."""
    with sqlite3.connect(path) as con:
        con.execute("PRAGMA application_id = 1234")
        if tables:
            con.executescript("CREATE TABLE runs (cell_key TEXT, status TEXT);"
                              "CREATE TABLE episodes (cell_key, episode, seed, reward, length);")
        else:
            con.execute("CREATE TABLE notes (text TEXT)")
    con.close()


@pytest.mark.parametrize("how", ["tables", "application"])
def test_a_foreign_sqlite_file_is_refused_by_name_for_writing_and_left_byte_for_byte(tmp_path, how, caplog):
    from quarl import cli

    path = tmp_path / "foreign.sqlite"
    held = _foreign(path, "tables") if how == "tables" else "its tables: episodes, runs; SQLite application_id 1234"
    if how == "application":
        _other_application(path)
    before = path.read_bytes()
    with pytest.raises(QuarlError) as refused:
        Store(path)
    assert str(refused.value) == (
        f"{path} is not a quarl results store ({held}) and was left as it is: give a quarl store or a new file "
        "(store.path=PATH for run.py, --store PATH for quarl rebuild).")
    write_json(make_record("c1"), tmp_path / "outputs" / "run" / "record.json")
    with caplog.at_level("ERROR"):
        assert cli.main(["rebuild", str(tmp_path / "outputs"), "--store", str(path)]) == 1
        assert cli.main(["results", "--store", str(path)]) == 1  # the read path refuses it too
    assert [r.getMessage().startswith(f"quarl: {path} is not a quarl results store (") for r in caplog.records] == [
        True, True]
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["foreign.sqlite", "outputs"]


def test_a_new_store_carries_quarls_application_id_and_an_older_store_is_still_quarls(tmp_path, monkeypatch):
    from quarl.store import sqlite as store_module

    def application(path):
        with closing(sqlite3.connect(path)) as con:
            return con.execute("PRAGMA application_id").fetchone()[0]

    Store(tmp_path / "new.sqlite")
    monkeypatch.setattr(store_module.os, "link", lambda src, dst: (_ for _ in ()).throw(OSError("no hard links")))
    Store(tmp_path / "in-place.sqlite")  # made where it lies
    (tmp_path / "empty.sqlite").write_bytes(b"")  # an empty database is one to make the store in
    Store(tmp_path / "empty.sqlite")
    made = {application(tmp_path / f"{n}.sqlite") for n in ("new", "in-place", "empty")}
    assert made == {store_module.APPLICATION_ID}
    older = tmp_path / "older.sqlite"  # as a quarl before application_id made it
    with closing(sqlite3.connect(older)) as con:
        con.executescript(store_module.SCHEMA)
    assert application(older) == 0
    Store(older, read_only=True)  # read as quarl's by its tables
    Store(older).write(make_record("c1"))  # and written, now with quarl's id
    assert application(older) == store_module.APPLICATION_ID and list(results.load(older)["cell_key"]) == ["c1"]


def test_run_py_refuses_a_foreign_store_before_anything_is_trained(tmp_path):
    from tests.conftest import FAST, run_quarl

    path = tmp_path / "foreign.sqlite"
    _foreign(path, "tables")
    before = path.read_bytes()
    done = run_quarl(tmp_path, *FAST, "store.path=foreign.sqlite", check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in output, output
    assert "foreign.sqlite is not a quarl results store (its tables: notes, runs) and was left as it is" in output
    assert path.read_bytes() == before


# ------------------------------------------------------------------------ rebuild believes no bad value


def test_rebuild_passes_over_a_record_with_reward_mean_lots_and_rebuilds_the_good_one(tmp_path, caplog):
    from quarl import cli

    root = tmp_path / "outputs"
    write_json(make_record("good"), root / "a" / "record.json")
    bad = make_record("bad")
    bad["run"]["reward_mean"] = "lots"
    write_json(bad, root / "b" / "record.json")
    with caplog.at_level("INFO"):
        assert cli.main(["rebuild", str(root), "--store", str(tmp_path / "r.sqlite")]) == 0
    (passed,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert passed == (f"Passing over {root / 'b' / 'record.json'}: not a quarl record (its run field reward_mean "
                      'is "lots", not a number).')
    assert "Wrote 1 records" in caplog.text and "Traceback" not in caplog.text
    assert list(Store(tmp_path / "r.sqlite", read_only=True).runs()["cell_key"]) == ["good"]


BAD_VALUES = {
    "rel_error": (lambda r: r["run"].update(rel_error="tiny"), 'its run field rel_error is "tiny", not a number'),
    "status": (lambda r: r["run"].update(status="pwned"), 'its run status "pwned" is none of done, running, failed'),
    "seed": (lambda r: r["config"].update(seed="zero"), 'its config seed is "zero", not an integer'),
    "bits": (lambda r: r["config"]["quant"].update(bits="eight"), 'its config quant.bits is "eight", not an integer'),
    "infinite": (lambda r: r["run"].update(reward_mean=1e400), "its run field reward_mean is inf, not a finite number"),
    "nan": (lambda r: r["episodes"][0].update(reward=float("nan")), "its episodes[0] reward is nan, not a finite"),
    "2^63": (lambda r: r["config"]["algo"]["hyperparams"].update(buffer=2**63),
             "its config algo.hyperparams.buffer is 2^63 or more, beyond the 64-bit integers the store holds"),
    "case": (lambda r: r["config"].update(Seed=1), "its names seed and Seed differ only in case"),
    "time": (lambda r: r["run"].update(ended_at="yesterday"), 'its run field ended_at is "yesterday", not an ISO'),
}


def test_rebuild_passes_over_each_record_the_schema_does_not_type_and_keeps_the_rest(tmp_path, caplog):
    root = tmp_path / "outputs"
    write_json(make_record("good"), root / "good" / "record.json")
    for name, (spoil, _) in BAD_VALUES.items():
        record = make_record(f"bad-{name}")
        spoil(record)
        (root / name).mkdir(parents=True)
        (root / name / "record.json").write_text(json.dumps(record))  # 1e400 as JSON's Infinity, NaN as NaN
    with caplog.at_level("INFO"):
        assert rebuild(root, Store(tmp_path / "r.sqlite")) == 1
    passed = {r.getMessage() for r in caplog.records if r.levelname == "WARNING"}
    for name, (_, words) in BAD_VALUES.items():
        (said,) = [m for m in passed if m.startswith(f"Passing over {root / name / 'record.json'}: ")]
        assert words in said and "\n" not in said, (name, said)
    assert list(Store(tmp_path / "r.sqlite").runs()["cell_key"]) == ["good"]


def test_rebuild_keeps_the_newest_record_of_a_cell_and_says_so(tmp_path, caplog):
    root = tmp_path / "outputs"
    done = make_record("cell")
    done["run"].update(ended_at="2026-01-02T00:00:00+00:00")
    failed = make_record("cell")
    failed["run"].update(status="failed", ended_at="2026-01-01T00:00:00+00:00", reward_mean=None)
    write_json(done, root / "a" / "record.json")
    write_json(failed, root / "b" / "record.json")  # sorts last, ended first
    with caplog.at_level("INFO"):
        assert rebuild(root, Store(tmp_path / "r.sqlite")) == 1
    assert list(Store(tmp_path / "r.sqlite").runs()["status"]) == ["done"]
    assert (f"Two records of cell cell: keeping {root / 'a' / 'record.json'} (done, ended 2026-01-02T00:00:00+00:00), "
            f"not {root / 'b' / 'record.json'} (failed, ended 2026-01-01T00:00:00+00:00).") in caplog.text


def test_rebuild_passes_over_records_past_the_column_limit_and_names_differing_in_case_share_one(tmp_path, caplog):
    from quarl.store.sqlite import MAX_TABLE_COLUMNS

    root = tmp_path / "outputs"
    for i in range(6):  # 380 columns each: the sixth would pass SQLite's 2,000
        record = make_record(f"wide{i}")
        record["config"][f"w{i}"] = {f"k{j}": j for j in range(380)}
        write_json(record, root / f"wide{i}" / "record.json")
    upper = make_record("upper")
    upper["config"]["Extra"] = 1
    write_json(upper, root / "upper" / "record.json")
    lower = make_record("lower")
    lower["config"]["extra"] = 2
    write_json(lower, root / "z-lower" / "record.json")
    with caplog.at_level("INFO"):
        assert rebuild(root, Store(tmp_path / "r.sqlite")) == 7
    (passed,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert passed.startswith(f"Passing over {root / 'wide5' / 'record.json'}: The record of cell wide5 would give the "
                             "store's runs table ") and f"more than the {MAX_TABLE_COLUMNS} an SQLite" in passed
    runs = Store(tmp_path / "r.sqlite").runs().set_index("cell_key")
    assert runs.loc["upper", "Extra"] == 1 and runs.loc["lower", "Extra"] == 2  # one column, as SQLite names it
    assert "wide5" not in runs.index and "w4.k379" in runs.columns


def test_rebuild_and_find_records_read_regular_files_only(tmp_path, caplog):
    import os

    root = tmp_path / "outputs"
    write_json(make_record("good"), root / "good" / "record.json")
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "record.json")  # reading it would wait for a writer forever
    with caplog.at_level("INFO"):
        assert [r["run"]["cell_key"] for r in find_records(root)] == ["good"]
        assert rebuild(root, Store(tmp_path / "r.sqlite")) == 1
    assert (f"Passing over {root / 'fifo' / 'record.json'}: not a quarl record (it is not a regular file)."
            in caplog.text)


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_a_folder_given_as_the_store_is_called_a_folder(tmp_path, command, caplog, monkeypatch):
    from quarl import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs").mkdir()
    with caplog.at_level("ERROR"):
        assert cli.main([*command, "--store", "outputs"]) == 1
    assert caplog.records[-1].getMessage() == (
        "quarl: The results store outputs is a folder: give its file, e.g. outputs/results.sqlite.")
