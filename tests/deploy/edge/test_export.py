"""From a stored PTQ record to a .tflite file and a C policy, the way `quarl export --format
tflite|c` does it: the record's config, its cached fp32 policy, its own calibration states."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from quarl.config.method_registry import policy_config
from quarl.deploy.edge import calibration_states
from quarl.deploy.edge.export import export_edge
from quarl.errors import QuarlError
from quarl.quantize.calibration import calibration_seeds
from quarl.quantize.weights import quantize_policy
from quarl.store import query as results
from quarl.train.cache import cached
from tests.conftest import FAST, run_quarl


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory, shared_policies: Path) -> Path:
    """A launch folder holding the default PTQ cell's record (FAST budget): the tests below read it
    and export from it, each into its own folder, and none writes into it."""
    folder = tmp_path_factory.mktemp("stored")
    run_quarl(folder, *FAST, policies=shared_policies)
    return folder


def _cli(cwd: Path, monkeypatch, caplog, *args: str) -> int:
    """`quarl ARGS` in `cwd`, in this process (for refusals: they end before any export is written)."""
    from quarl.cli import main

    monkeypatch.chdir(cwd)
    caplog.clear()
    with caplog.at_level("INFO"):
        return main(list(args))


def _record(stored: Path):
    df = results.load(stored / "outputs/results.sqlite", quant="ptq")
    cfg = OmegaConf.create(json.loads(df.iloc[0]["config"]))
    policy = cached(policy_config(cfg), Path(cfg.store.policies))
    model = policy.load()
    quantize_policy(model, cfg.quant)
    return cfg, policy, model


def test_a_records_calibration_states_are_its_fp32_policys_calibration_episodes(stored):
    cfg, policy, _ = _record(stored)
    states = calibration_states(cfg, policy)
    assert states.shape[1:] == (4,) and len(states) >= 5 * 8  # five CartPole episodes
    seeds = calibration_seeds(int(cfg.seed), int(cfg.quant.calibration_episodes), int(cfg.eval.episodes))
    import gymnasium as gym

    first, _ = gym.make("CartPole-v1").reset(seed=seeds[0])
    assert np.array_equal(states[0], first)  # the first calibration episode's first state


@pytest.mark.parametrize("fmt", ["c", "tflite"])
def test_export_from_a_record_writes_a_checked_policy(fmt, scratch, stored):
    if fmt == "tflite":
        pytest.importorskip("ai_edge_litert", reason="ai-edge-litert is not installed: pip install 'quarl[edge]'")
    cfg, policy, model = _record(stored)
    states = calibration_states(cfg, policy)
    out = scratch / ("policy.tflite" if fmt == "tflite" else "policy")
    report = export_edge(
        model,
        out,
        fmt,
        obs_transform=policy.obs_transform(),
        calibration_obs=states,
        statistic=cfg.quant.calibration,
        metadata={"env_id": cfg.env.id},
    )
    assert out.exists() and all(v == 0 for v in report.checked.values()) and report.checked
    text = report.text()
    assert str(out) in text and "identical to the integer reference" in text


@pytest.mark.parametrize("fmt", ["c", "tflite"])
def test_quarl_export_format_writes_from_the_store_and_refuses_an_existing_path(
    fmt, scratch, stored, monkeypatch, caplog, capsys
):
    from tests.conftest import quarl_cli

    if fmt == "tflite":
        pytest.importorskip("ai_edge_litert", reason="ai-edge-litert is not installed: pip install 'quarl[edge]'")
    out = scratch / ("policy.tflite" if fmt == "tflite" else "policy")
    args = ["export", "quant=ptq", "--format", fmt, "--out", str(out)]
    done = quarl_cli(stored, *args)
    assert done.returncode == 0, done.stderr
    assert "identical to the integer reference on 10000 states" in done.stdout  # record's states, then random
    assert out.exists()
    before = sorted(p.name for p in out.parent.iterdir())
    assert _cli(stored, monkeypatch, caplog, *args) == 1 and "already exists" in caplog.text
    assert "Traceback" not in capsys.readouterr().err and sorted(p.name for p in out.parent.iterdir()) == before


def _counted(row) -> None:
    """The executed policy's agreement is a count over the states the record says it compared on."""
    agreeing = row["backend_action_agreement"] * row["agreement_states"]
    assert row["agreement_states"] > 0 and agreeing == pytest.approx(round(agreeing), abs=1e-6)


def test_a_record_without_activation_ranges_executes_on_the_c_backend(scratch, shared_policies):
    """The default PTQ cell (weights only) has no activation ranges: the pipeline calibrates the
    full-integer policy on the states its fp32 policy visits."""
    from quarl.deploy.edge.toolchain import available

    missing = available("cc")
    if missing:
        pytest.skip(missing)
    run_quarl(scratch, *FAST, "quant.backend=c", policies=shared_policies)
    row = results.load(scratch / "outputs/results.sqlite", quant="ptq").iloc[0]
    assert row["backend"] == "c" and row["backend_reward"] == pytest.approx(row["reward_mean"], rel=0.3)
    _counted(row)


def test_16x8_and_huffman_from_the_command_line_export_and_backend(scratch, shared_policies, monkeypatch, caplog,
                                                                  capsys):
    """`quarl export --activations int16` writes the 16x8 C policy of a record and refuses ONNX with it;
    `--weight-coding huffman` writes the Huffman-coded C policy and is refused for LiteRT;
    `quant.backend=c_16x8` records the executed 16x8 policy."""
    import subprocess

    from tests.conftest import quarl_cli

    run_quarl(scratch, *FAST, "quant.backend=c_16x8", policies=shared_policies)
    row = results.load(scratch / "outputs/results.sqlite", quant="ptq").iloc[0]
    assert row["backend"] == "c_16x8" and row["backend_precision"] == "16x8"
    assert row["backend_reward"] == pytest.approx(row["reward_mean"], rel=0.3)  # same episodes, integer arithmetic
    _counted(row)
    out = scratch / "policy16"
    def export(*args: str) -> subprocess.CompletedProcess:
        return quarl_cli(scratch, "export", "quant=ptq", "--out", *args)

    done = export(str(out), "--format", "c", "--activations", "int16")
    assert done.returncode == 0, done.stderr
    assert "int16 (16x8) activations" in done.stdout and "identical to the integer reference" in done.stdout
    assert "#define POLICY_ACTIVATION_BITS 16" in (out / "policy.h").read_text()
    def refused(*args: str) -> str:  # in this process: a refusal writes nothing
        assert _cli(scratch, monkeypatch, caplog, "export", "quant=ptq", "--out", *args) == 1
        assert "Traceback" not in capsys.readouterr().err
        return caplog.text

    assert "--activations chooses the full-integer formats' activations" in refused(
        str(scratch / "p.onnx"), "--activations", "int16")
    assert not (scratch / "p.onnx").exists()
    coded = export(str(scratch / "coded"), "--format", "c", "--precision", "int4", "--weight-coding", "huffman")
    assert coded.returncode == 0, coded.stderr
    assert "Huffman-coded stream" in coded.stdout and "identical to the integer reference" in coded.stdout
    assert "HUFF = {" in (scratch / "coded" / "policy.c").read_text() and "coded in pairs" in coded.stdout
    assert "weight_coding=huffman is not supported for format=tflite" in refused(
        str(scratch / "p.tflite"), "--format", "tflite", "--weight-coding", "huffman")
    assert not (scratch / "p.tflite").exists()


# --- a C export runs the policy's firmware on every installed microcontroller target ------------------------


def _c_export(cartpole, out):
    return export_edge(
        cartpole.model_copy(), out, "c", calibration_obs=cartpole.calibration, check_obs=cartpole.states[:2000]
    )


def test_a_c_export_checks_the_firmware_of_every_installed_target_under_qemu(cartpole, tmp_path):
    from quarl.deploy.edge.export import FIRMWARE_CHECK_STATES, FIRMWARE_COUNT_STATES
    from quarl.deploy.edge.targets import TARGETS

    report = _c_export(cartpole, tmp_path / "policy")
    text = report.text()
    for t in TARGETS.values():
        missing = t.missing()
        if missing:
            assert any(note.startswith(f"{t.name}: no firmware check") and missing in note for note in report.notes)
            continue
        key = f"{t.name} firmware under {t.emulator}"
        assert report.checked[key] == 0 and report.checked_on[key] == FIRMWARE_CHECK_STATES
        measured = report.firmware[t.name]
        assert measured["flash"] > 4000 and 0 < measured["ram"] < 1024 and measured["instructions"] > 1000
        assert measured["counted"] == FIRMWARE_COUNT_STATES
        assert f"{key}: actions identical to the integer reference on {FIRMWARE_CHECK_STATES} states" in text
        assert f"{t.name} firmware ({t.float_note}): the policy takes {measured['flash']:,} B flash" in text
    assert "C policy (host cc): actions identical to the integer reference on 2000 states" in text
    assert text.count("(an instruction is not a cycle)") == len(report.firmware)


def test_a_firmware_that_differs_refuses_the_export(cartpole, tmp_path, monkeypatch):
    from quarl.deploy.edge.targets import TARGETS, Target

    installed = [t for t in TARGETS.values() if not t.missing()]
    if not installed:
        pytest.skip(" ".join(t.missing() or "" for t in TARGETS.values()))
    firmware = Target.firmware

    def wrong(self, policy, check, count, folder=None):
        measured = firmware(self, policy, check, count, folder)
        if self.name == installed[-1].name:
            measured.actions = 1 - measured.actions  # every discrete action flipped
        return measured

    monkeypatch.setattr(Target, "firmware", wrong)
    out = tmp_path / "policy"
    with pytest.raises(QuarlError, match=rf"{installed[-1].name} firmware under .* differs on 345 of 345 states"):
        _c_export(cartpole, out)
    assert not out.exists()


def test_a_missing_toolchain_is_a_note_and_the_export_goes_on(cartpole, tmp_path, monkeypatch):
    import shutil

    from quarl.deploy.edge.targets import TARGETS

    cross = {tool for t in TARGETS.values() for tool in t.tools()}
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name in cross else which(name, *a, **k))
    report = _c_export(cartpole, tmp_path / "policy")
    assert (tmp_path / "policy" / "policy.c").exists() and not report.firmware
    assert list(report.checked) == ["C policy (host cc)"]
    for t in TARGETS.values():
        note = next(n for n in report.notes if n.startswith(f"{t.name}: no firmware check"))
        assert f"{t.cc} is not installed" in note and f"Debian's {t.packages[t.cc]}" in note
