"""`quarl status` and `quarl results` as a user reads them: lines that fit the terminal, booleans as
true/false, whole numbers as integers, E in percent as the run log prints it."""

from __future__ import annotations

import io

import pandas as pd

from quarl import cli
from quarl.store import listing
from quarl.store.sqlite import Store
from tests.records import record, write

LONG_NET = [2048, 2048, 2048, 1024, 1024, 512, 512, 256]


def wide_store(path):
    """Two seeds of PPO on CartPole with 22 quant settings, a second training with a long
    hyperparameter value, old-style PTQ records that carry an ActorQ key (whose ActorQ records
    differ in it), and a failed cell."""
    recs = []
    net = {"algo.hyperparams.policy_kwargs.net_arch": [64, 64]}
    for seed in (0, 1):
        recs.append(record("ppo", "cartpole", "fp32", seed=seed, config=net))
        for bits in (2, 3, 4, 5, 6, 7, 8):
            for scheme in ("affine", "symmetric", "quarl_code"):
                recs.append(record("ppo", "cartpole", "ptq", bits, seed, scheme=scheme,
                                   config={**net, "quant.act_bits": 32}))
        recs.append(record("ppo", "cartpole", "ptq", 8, seed, config={**net, "quant.act_bits": 8,
                                                                       "quant.actor_bits": 8}))
    recs += [record("dqn", "cartpole", "actorq", seed=0, config={"quant.actor_bits": b}) for b in (8, 32)]
    recs.append(record("ppo", "cartpole", "fp32", seed=0, steps=5000,
                       config={"algo.hyperparams.policy_kwargs.net_arch": LONG_NET}))
    recs.append(record("ppo", "cartpole", "ptq", 4, 1, status="failed", scheme="symmetric", steps=5000,
                       config={"algo.hyperparams.policy_kwargs.net_arch": LONG_NET},
                       run={"message": "RuntimeError: " + "the policy could not be evaluated " * 6, "run_dir": "r/1"}))
    write(Store(path), recs)


def test_status_fits_the_terminal_and_lists_only_what_tells_cells_apart(tmp_path, capsys, monkeypatch):
    path = tmp_path / "r.sqlite"
    wide_store(path)
    grid, _ = listing.status(path)
    assert not [c for c in grid.columns if "actor_bits" in c]  # PTQ records agree on it; ActorQ's show it as bits
    assert {"actorq 8b", "actorq 32b"} <= set(grid.columns)
    assert "ptq 8b act_bits=8 scheme=affine" in grid.columns and "fp32" in grid.columns
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["status", "--store", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    assert "dqn cartpole" in lines and "  done: actorq 8b, actorq 32b" in lines  # its only row: no keys
    at = lines.index("ppo cartpole seed=0 algo.hyperparams.policy_kwargs.net_arch=[64, 64]")  # a block per row
    assert lines[at + 1] == "    train.steps=1000"
    assert "  done: fp32, ptq 2b act_bits=32 scheme=affine," in lines  # settings broken between, not inside
    assert "    algo.hyperparams.policy_kwargs.net_arch=[2048, 2048, 2048, 1024, 1024..." in lines  # long value cut
    assert "1 failed (traceback in each run dir's error.txt):" in lines
    assert "    train.steps=5000 ptq 4b scheme=symmetric" in lines  # the failed cell's row and column
    assert "RuntimeError: the policy could not be evaluated" in out and "in r/1" in out
    monkeypatch.setenv("COLUMNS", "1000")  # a terminal wide enough for the grid: the grid
    assert cli.main(["status", "--store", str(path)]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.split()[:5] == ["fp32", "actorq", "8b", "actorq", "32b"]


def test_results_shows_true_false_integers_and_e_in_percent_and_csv_keeps_raw_values(tmp_path, capsys):
    path = tmp_path / "r.sqlite"
    write(Store(path), [
        record("ppo", "cartpole", "ptq", 8, seed=0, steps=20000, reward=98.77, fp32=100.0,
               config={"train.keep_best": True, "quant.quantize_bias": True}),
        record("ppo", "cartpole", "ptq", 8, seed=1, steps=50000, reward=103.0, fp32=100.0,
               config={"train.keep_best": False}),
    ])
    assert cli.main(["results", "--store", str(path)]) == 0
    table = pd.read_fwf(io.StringIO(capsys.readouterr().out), dtype=str)
    assert list(table["train.keep_best"]) == ["true", "false"]
    assert list(table["quant.quantize_bias"]) == ["true", "false"]
    assert list(table["train.steps"]) == ["20000", "50000"]
    assert list(table["rel_error"]) == ["1.23%", "-3.00%"]  # as the run log prints E
    assert cli.main(["results", "--store", str(path), "--all"]) == 0  # every column, shown the same way
    everything = capsys.readouterr().out
    assert "1.23%" in everything and "0.0123" not in everything and "2e+04" not in everything
    assert cli.main(["results", "--store", str(path), "--csv"]) == 0
    raw = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(raw["rel_error"].round(4)) == [0.0123, -0.03] and list(raw["quant.quantize_bias"]) == [1, 0]


def test_plan_fits_the_terminal_and_gives_each_cut_reason_once_in_full(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    Store(tmp_path / "r.sqlite")  # an empty store: plan refuses a --store that is not there
    args = ["plan", "algo=dqn,ddpg", "env=cartpole", "quant.bits=1,4", "--store", str(tmp_path / "r.sqlite")]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 80, out
    reason = "quant.bits=1 is out of range: use 2..16, or 32 for unchanged weights"
    assert " ".join(out.split()).count(reason) == 1 and out.splitlines()[-1].startswith("4 cells: ")
