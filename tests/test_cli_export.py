"""`quarl export` after a day of normal use: it picks the one policy the filters mean, at the
record's own precision, and asks in one short sentence only when the filters mean several."""

from __future__ import annotations

import json
import re

import pytest

from quarl import cli
from quarl.app import CONF_DIR
from quarl.deploy.onnx_export import record_precision
from quarl.errors import QuarlError
from quarl.store import listing
from quarl.store import query as results
from quarl.store.sqlite import Store
from quarl.sweeps import run_cell_key
from tests.conftest import FAST, run_quarl
from tests.records import record, write

PONG = {"env.id": "PongNoFrameskip-v4", "env.return_scale": 21.0, "algo.hyperparams.n_steps": 128}
CARTPOLE = {"env.return_scale": 500.0, "algo.hyperparams.n_steps": 32}


def error_of(caplog: pytest.LogCaptureFixture) -> str:
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    return error


def test_several_matches_name_a_few_keys_a_user_sets_and_the_newest_records_filter(tmp_path, caplog):
    path = tmp_path / "r.sqlite"
    recs = [record("ppo", env, "ptq", 8, seed, config=cfg) for seed in (0, 1, 2)
            for env, cfg in (("cartpole", CARTPOLE), ("atari/pong", PONG))]
    recs += [record("ppo", "cartpole", "ptq", 8, 3, steps=None, config=CARTPOLE),  # the most recent
             record("ppo", "cartpole", "ptq", 4, 4, config=CARTPOLE)]
    write(Store(path), recs)
    typed = ["algo=ppo", "quant=ptq", "quant.bits=8"]
    with caplog.at_level("INFO"):
        assert cli.main(["export", "--store", str(path), "--out", str(tmp_path / "x.onnx"), *typed]) == 1
    message = error_of(caplog)
    assert message.startswith("quarl: 7 finished records match algo=ppo quant=ptq quant.bits=8; they differ in ")
    assert "env (atari/pong, cartpole); seed (0, 1, 2, ... (4 values)); train.steps (1000, null)" in message
    for derived in ("env.id", "env.name", "env.return_scale", "algo.hyperparams", "cell_key", "started_at"):
        assert derived not in message
    assert len(message) < 300 and not (tmp_path / "x.onnx").exists()
    suggested = message.split("add e.g. ")[1].removesuffix(" (the most recent record).")
    assert suggested == "env=cartpole seed=3"
    picked = results.load(path, dict(f.split("=", 1) for f in [*typed, *suggested.split()]))
    assert list(picked["seed"]) == [3]  # the suggestion picks the most recent record, and only it


def test_records_that_differ_only_in_how_they_were_evaluated_hold_one_policy(tmp_path):
    path = tmp_path / "r.sqlite"
    write(Store(path), [
        record("ppo", "cartpole", "ptq", 8, 0),
        record("ppo", "cartpole", "ptq", 8, 0, config={"quant.backend": "onnx_int8"},
               run={"started_at": "2026-01-01T00:00:09"}),
        record("ppo", "cartpole", "ptq", 8, 0, episodes=20),
    ])
    df = results.load(path)
    chosen, note = listing.one_record(df, "algo=ppo")
    assert chosen["quant.backend"] == "onnx_int8"  # the most recent
    assert note == (f"3 finished records match algo=ppo; they differ only in eval.episodes, quant.backend, which "
                    f"do not change the policy: exporting the most recent ({chosen['cell_key']}).")
    write(Store(path), [record("ppo", "cartpole", "ptq", 8, 1)])
    with pytest.raises(QuarlError, match=r"4 finished records match algo=ppo; they differ in seed \(0, 1\): add e.g. "):
        listing.one_record(results.load(path), "algo=ppo")


def test_of_several_policies_the_one_run_py_makes_with_the_same_overrides_is_exported(tmp_path):
    """The README's order: `python run.py`, sweeps, a search, then `quarl export algo=ppo quant=ptq
    quant.bits=8`: the cell `python run.py algo=ppo quant=ptq quant.bits=8` makes is the one meant."""
    path = tmp_path / "r.sqlite"
    recs = [record("ppo", "cartpole", "ptq", 8, seed) for seed in (0, 1, 2)]
    write(Store(path), recs)
    chosen, note = listing.one_record(results.load(path), "algo=ppo", run_cell=recs[1]["run"]["cell_key"])
    assert chosen["seed"] == 1 and note.startswith("3 finished records match algo=ppo: exporting the one "
                                                   "`python run.py algo=ppo` makes (cell ")
    with pytest.raises(QuarlError, match="3 finished records match algo=ppo; they differ in seed"):
        listing.one_record(results.load(path), "algo=ppo", run_cell="f" * 16)  # that cell is not stored


@pytest.mark.parametrize("quant, bits, expected", [
    ({"method": "fp32", "bits": 32}, 32, ("fp32", None)),
    ({"method": "ptq", "bits": 8}, 8, ("int8", None)),
    ({"method": "qat", "bits": 6}, 6, ("int8", None)),
    ({"method": "ptq", "bits": 4}, 4, ("int4", None)),
    ({"method": "ptq", "bits": 3}, 3, ("int4", None)),
    ({"method": "ptq", "bits": 2}, 2, ("int2", None)),
    ({"method": "ptq", "bits": 4, "layer_bits": {"q_net.0": 8}}, 8, ("int8", None)),
    ({"method": "fp16", "bits": 8}, 16, ("fp32", "quant=fp16 (16-bit weights) is exported as fp32")),  # an old record
    ({"method": "bf16", "bits": 16}, 16, ("fp32", "quant=bf16 (16-bit weights) is exported as fp32")),
    ({"method": "ptq", "bits": 12}, 12, ("fp32", "quant=ptq (12-bit weights) is exported as fp32")),
    ({"method": "actorq", "bits": 8, "actor_bits": 32}, 32, ("fp32", None)),
])
def test_the_default_precision_is_the_records_own(quant, bits, expected):
    assert results.weight_bits(quant) == bits
    precision, note = record_precision(quant["method"], bits)
    assert precision == expected[0]
    assert (note is None) if expected[1] is None else note.startswith(expected[1])


def test_export_writes_each_record_at_its_own_precision(scratch, shared_policies, caplog):
    import onnx

    run_quarl(scratch, *FAST, policies=shared_policies)  # fp32 baseline and PTQ 8-bit
    run_quarl(scratch, *FAST, "quant=fp16", policies=shared_policies)
    store = scratch / "outputs/results.sqlite"
    # the 8-bit cell again, executed on ONNX Runtime and with more episodes: the same policy
    (ptq,) = [r for r in map(json.loads, (p.read_text() for p in scratch.rglob("record.json")))
              if r["run"]["quant"] == "ptq"]
    assert run_cell_key(CONF_DIR, FAST) == ptq["run"]["cell_key"]  # the cell `quarl export <filters>` prefers
    ptq["config"]["quant"]["backend"], ptq["config"]["eval"]["episodes"] = "onnx_int8", 5
    ptq["run"].update(cell_key="0" * 16, started_at="2999-01-01T00:00:00")
    Store(store).write(ptq)

    def export(*args: str) -> dict[str, str]:
        out = scratch / f"policy{len(list(scratch.glob('*.onnx')))}.onnx"
        with caplog.at_level("INFO"):
            assert cli.main(["export", "--store", str(store), "--out", str(out), "algo=ppo", *args]) == 0, caplog.text
        return {p.key: p.value for p in onnx.load(str(out)).metadata_props}

    assert export("quant=fp32")["quarl.precision"] == "fp32"
    assert "Exported ppo policy (fp32, " in caplog.text
    assert export("quant=ptq")["quarl.precision"] == "int8"  # two records, one policy: no question asked
    assert "differ only in eval.episodes, quant.backend, which do not change the policy" in caplog.text
    assert export("quant=fp16")["quarl.precision"] == "fp32"
    assert "quant=fp16 (16-bit weights) is exported as fp32, which holds its weights exactly" in caplog.text
    assert export("quant=fp32", "--precision", "int8")["quarl.precision"] == "int8"  # asked for: done
    # every file says where it comes from: the record's key, its training, quarl's version
    meta = export("quant=ptq")  # the newest record of the two holding this policy
    assert meta["quarl.cell_key"] == "0" * 16
    assert re.fullmatch(r"algo=ppo env=cartpole seed=0 train\.steps=\d+", meta["quarl.training"])
    assert meta["quarl.version"] and meta["quarl.quant"]
    # a narrower precision than the record's re-rounds its weights: said, not silent; the C sources say where
    # they come from in their first comment
    folder = scratch / "policy_c"
    with caplog.at_level("INFO"):
        args = ["export", "--store", str(store), "--format", "c", "--precision", "int4", "--out", str(folder)]
        assert cli.main([*args, "algo=ppo", "quant=ptq"]) == 0, caplog.text
    assert "--precision int4 re-rounds this record's 8-bit weights to 4 bits" in caplog.text
    header = (folder / "policy.h").read_text()
    assert header.startswith("/* Exported from:") and f"quarl.cell_key: {'0' * 16}" in header
    assert "quarl.precision: int4" in header and "quarl.training: algo=ppo" in (folder / "policy.c").read_text()


def test_a_cnn_policy_is_refused_by_the_full_integer_formats_before_anything_is_loaded(tmp_path, caplog):
    """No policy of this record is in any cache: the refusal comes before loading or calibrating it."""
    from quarl.cli import main
    from quarl.store.sqlite import Store
    from tests.records import record, write

    store = tmp_path / "r.sqlite"
    cnn = {"env.suite": "atari", "algo.policy": "CnnPolicy", "store.policies": str(tmp_path / "none")}
    write(Store(store), [record("ppo", "atari/pong", "ptq", 8, config=cnn)])
    for fmt in ("c", "tflite"):
        assert main(["export", "--store", str(store), "--format", fmt, "--out", str(tmp_path / fmt)]) == 1
        assert f"--format {fmt} runs MLP policies only" in caplog.text and "Traceback" not in caplog.text
    assert not (tmp_path / "c").exists() and not (tmp_path / "tflite").exists()


def test_an_existing_out_is_refused_before_anything_is_loaded(tmp_path, caplog):
    """No policy of this record is in any cache: the refusal comes before loading or calibrating it."""
    from quarl.cli import main
    from quarl.store.sqlite import Store
    from tests.records import record, write

    store = tmp_path / "r.sqlite"
    write(Store(store), [record("ppo", "cartpole", "ptq", 8, config={"store.policies": str(tmp_path / "none")})])
    (tmp_path / "taken").mkdir()
    for fmt in ("c", "onnx"):
        assert main(["export", "--store", str(store), "--format", fmt, "--out", str(tmp_path / "taken")]) == 1
        assert f"Export path {tmp_path / 'taken'} already exists" in caplog.text and "Traceback" not in caplog.text


def test_booleans_in_a_refusal_read_as_a_user_types_them(tmp_path):
    """Two policies apart in a boolean key: the refusal names its values true / false, not 0 / 1."""
    path = tmp_path / "r.sqlite"
    write(Store(path), [record("ppo", "cartpole", "ptq", 8, 0, config={"train.keep_best": keep})
                        for keep in (False, True)])
    with pytest.raises(QuarlError) as refused:
        listing.one_record(results.load(path), "algo=ppo")
    assert "train.keep_best (false, true)" in str(refused.value) and "(0, 1)" not in str(refused.value)


def _policyless_store(tmp_path) -> str:
    """A store of one PTQ 8-bit record whose policy is in no cache: a refusal must come before loading it."""
    store = tmp_path / "r.sqlite"
    write(Store(store), [record("ppo", "cartpole", "ptq", 8, config={"store.policies": str(tmp_path / "none")})])
    return str(store)


def test_an_out_under_a_file_names_that_file_before_anything_is_loaded(tmp_path, caplog):
    """Not the system's "File exists" (about the export path) or "Not a directory", after calibrating."""
    store = _policyless_store(tmp_path)
    (tmp_path / "afile").write_text("")
    for fmt, out in (("onnx", "afile/p.onnx"), ("c", "afile/policy"), ("c", "afile/deeper/policy")):
        caplog.clear()
        assert cli.main(["export", "--store", store, "--format", fmt, "--out", str(tmp_path / out)]) == 1
        assert error_of(caplog) == (f"quarl: Export path {tmp_path / out} cannot be made: {tmp_path / 'afile'} is a "
                                    "file, not a folder; give a path in a folder.")
    assert (tmp_path / "afile").read_text() == ""


@pytest.mark.parametrize("flags, refusal", [
    (["--format", "c", "--precision", "int4", "--activations", "int16"],
     "activations=int16 takes int8 weights (TFLite's 16x8 scheme), not precision=int4."),
    (["--format", "c", "--precision", "fp32"],
     "precision=fp32 is not supported for format=c: choose int8, int4, int2."),
    (["--format", "tflite", "--precision", "int4"], "precision=int4 is not supported for format=tflite: choose int8."),
    (["--format", "tflite", "--weight-coding", "huffman"],
     "weight_coding=huffman is not supported for format=tflite: choose packed."),
    (["--activations", "int16"],
     "--activations chooses the full-integer formats' activations: use --format c or tflite."),
    (["--weight-coding", "huffman"], "--weight-coding chooses how the C policy stores its weights: use --format c."),
])
def test_flags_that_do_not_go_together_are_refused_before_any_warning(flags, refusal, tmp_path, caplog):
    """`--precision int4` of an 8-bit record warns that it re-rounds the weights: not before refusing the pair."""
    store = _policyless_store(tmp_path)
    with caplog.at_level("INFO"):
        assert cli.main(["export", "--store", store, "--out", str(tmp_path / "out"), *flags]) == 1
    said = [r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
    assert said == [f"quarl: {refusal}"] and not (tmp_path / "out").exists()
