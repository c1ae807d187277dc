"""Per-layer sensitivity and the mixed-precision search, on a real (tiny) trained policy, from the
command line to a run.py cell that meets the bound on its own evaluation."""

import json
import shlex
import sqlite3

import pytest

from quarl.errors import QuarlError
from quarl.sensitivity.artifacts import run_command
from quarl.sensitivity.measure import Bound, Measure, check_bits, check_bound
from tests.conftest import quarl_cli, run_quarl

CELL = ["algo=ppo", "env=cartpole", "train.steps=8192", "eval.episodes=3", "eval.n_envs=3", "seed=0",
        "train.progress=false", "eval.progress=false"]


def quarl(cwd, *args):
    return quarl_cli(cwd, *args, timeout=1200)


def test_bound_and_bits():
    bound = Bound(0.99, 0.01)
    assert bound.met(Measure(100.0, 0.995, 0.005)) and not bound.met(Measure(100.0, 0.98, 0.0))
    assert not bound.met(Measure(100.0, 1.0, 0.02)) and not bound.met(Measure(100.0, 1.0, None))
    assert Bound(0.99).met(Measure(0.0, 0.99, None))
    assert check_bits([8, 2, 4, 4]) == [2, 4, 8]
    with pytest.raises(QuarlError, match=r"--bits 1 is out of range: use bit widths in 2\.\.16"):
        check_bits([1, 8])
    with pytest.raises(QuarlError, match=r"--min-agreement 1\.5 is out of range: use a fraction in \(0, 1\]"):
        check_bound(Bound(1.5))
    command = run_command(["algo=dqn", "quant.bits=4", "seed=1"], {"q_net.q_net.0": 4, "q_net.q_net.2": 8}, 8)
    assert command == ("python run.py algo=dqn seed=1 quant=ptq quant.bits=8 "
                       "'quant.layer_bits={q_net.q_net.0:4,q_net.q_net.2:8}'")


def test_bad_bits_write_nothing(scratch):
    done = quarl(scratch, "sensitivity", *CELL, "--bits", "1,8")
    assert done.returncode == 1 and "--bits 1 is out of range" in done.stderr and "Traceback" not in done.stderr
    assert not (scratch / "outputs").exists()


def test_study_and_search_on_a_trained_policy_and_the_found_cell(scratch):
    done = quarl(scratch, "sensitivity", *CELL, "--bits", "3,4,6,8", "--min-agreement", "0.95", "--out", "sens")
    assert done.returncode == 0, done.stderr
    out = scratch / "sens"
    assert {p.name for p in out.iterdir()} >= {"sensitivity.csv", "ranking.md", "heatmap.png", "search.json",
                                               "search.md"}
    rows = (out / "sensitivity.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 * 4  # 3 layers and the input, 4 widths each
    result = json.loads((out / "search.json").read_text())
    assert result["met"] and result["agreement"] >= 0.95
    assert result["bytes"] < result["uniform_bytes"] < result["fp32_bytes"]  # smaller than uniform 8-bit
    assert set(result["layer_bits"]) == {"mlp_extractor.policy_net.0", "mlp_extractor.policy_net.2", "action_net"}
    assert result["evaluations"] <= 4 * 4 + 1 + 3 * 3  # study, the start, at most layers x (widths - 1) steps
    args = shlex.split(result["command"])[2:]  # python run.py ...
    run_quarl(scratch, *args)
    con = sqlite3.connect(scratch / "outputs" / "results.sqlite")
    bytes_, agreement, reward = con.execute(
        "SELECT policy_bytes, action_agreement, reward_mean FROM runs WHERE quant = 'ptq' AND status = 'done'"
    ).fetchone()
    assert bytes_ == result["bytes"] and agreement >= 0.95  # the cell meets the bound on its own evaluation
    assert agreement == pytest.approx(result["agreement"]) and reward == pytest.approx(result["reward"])
