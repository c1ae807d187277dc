"""What a read command takes from a stored record: trust is decided on the command line of the command
that runs, so a record made with (or edited to) `policy.trust=true` lets no read command run code
from the cached policy it names; where the policy is (its `policy_dir`) is taken, from any folder."""

from __future__ import annotations

import json
from pathlib import Path

from quarl import cli
from quarl.store.sqlite import Store
from tests.conftest import FAST, run_quarl
from tests.train.test_untrusted_policy import _craft_model


def test_a_records_trust_lets_neither_export_nor_collate_run_code(tmp_path: Path, caplog) -> None:
    run_quarl(tmp_path, *FAST, "algo=a2c", "quant=ptq", "quant.bits=8")  # the fp32 policy and its 8-bit cell
    (policy,) = (tmp_path / "outputs" / "policies").glob("*/model.zip")
    marker = tmp_path / "ran"
    _craft_model(policy, marker)  # a :serialized: entry whose unpickling runs os.system
    store = tmp_path / "trusting.sqlite"
    for path in tmp_path.rglob("record.json"):  # each record as if its run had said policy.trust=true
        record = json.loads(path.read_text())
        record["config"]["policy"]["trust"] = True
        record["config"]["store"]["policies"] = str(policy.parent.parent)
        Store(store).write(record)

    out = tmp_path / "exp.onnx"
    with caplog.at_level("INFO"):
        assert cli.main(["export", "--store", str(store), "--out", str(out), "algo=a2c", "quant=ptq"]) == 1
    assert not marker.exists() and not out.exists()
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert error.startswith(f"quarl: {policy} holds a pickled Python object in its data (payload, naming posix.system)")
    assert error.endswith("quarl's read commands never run code from a file; if you trust where it came from, load "
                          "it once, trusted, with `python run.py <the cell's overrides> policy.trust=true`).")
    assert "Traceback" not in caplog.text and len(error.splitlines()) == 1

    caplog.clear()
    with caplog.at_level("INFO"):
        cli.main(["collate", "--store", str(store), "--out", str(tmp_path / "collated"), "algo=a2c"])
    assert not marker.exists()


def test_export_finds_the_policy_where_its_run_found_it_from_any_folder(tmp_path: Path, monkeypatch, caplog) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    run_quarl(work, *FAST, "algo=a2c", "quant=ptq", "quant.bits=8")
    monkeypatch.chdir(elsewhere)  # no outputs/policies here: the record's policy_dir says where it is
    out = tmp_path / "exp.onnx"
    store = work / "outputs" / "results.sqlite"
    with caplog.at_level("INFO"):
        assert cli.main(["export", "--store", str(store), "--out", str(out), "algo=a2c", "quant=ptq"]) == 0, caplog.text
    assert out.is_file() and not (elsewhere / "outputs").exists()
