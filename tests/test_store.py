"""The results store: records, filters, JSON copies, rebuild, parallel writers, bad paths."""

import multiprocessing as mp
import sqlite3

import pytest

from quarl import results
from quarl.errors import QuarlError
from quarl.store import Store, find_records, flatten, rebuild, write_json


def make_record(key: str, bits: int = 8, reward: float = 100.0) -> dict:
    config = {"algo": {"name": "dqn", "hyperparams": {"net": [64, 64]}}, "quant": {"method": "ptq", "bits": bits}, "seed": 0}
    return {
        "run": {"cell_key": key, "status": "done", "algo": "dqn", "env": "cartpole", "quant": "ptq",
                "reward_mean": reward, "n_episodes": 2, "versions": {"torch": "x"}},
        "config": config,
        "episodes": [{"episode": 0, "seed": 11, "reward": reward - 1, "length": 9},
                     {"episode": 1, "seed": 12, "reward": reward + 1, "length": 10}],
    }


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


def _writer(path: str, worker: int, count: int) -> None:
    store = Store(path)
    for i in range(count):
        record = make_record(f"w{worker}-{i}", bits=2 + i % 7)
        record["config"][f"only_worker_{worker}"] = i  # new columns appear concurrently too
        store.write(record)


def test_eight_processes_writing_at_once_lose_no_row(tmp_path):
    path = str(tmp_path / "r.sqlite")
    Store(path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 25)) for w in range(8)]
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
    with pytest.raises(QuarlError, match="cannot be opened as a results store"):
        Store(bad)
    assert bad.read_bytes() == b"this is not sqlite" * 100  # left as it was


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


def test_store_is_sqlite_with_wal(tmp_path):
    Store(tmp_path / "r.sqlite")
    with sqlite3.connect(tmp_path / "r.sqlite") as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
