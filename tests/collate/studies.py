"""Builders shared by the collation tests: the real sweep's grid, a store of hand-made records, the
studies more than one test file collates (two trainings of one task, an activation sweep), and a
one-value SQL query on a store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from quarl.store.sqlite import Store
from tests.records import record
from tests.records import write as write_records

ALGOS, ENVS, BITS, SEEDS = ("a2c", "ppo"), ("cartpole", "mountaincar"), (2, 4, 8), (0, 1)
SWEEP = [
    "-m", f"algo={','.join(ALGOS)}", f"env={','.join(ENVS)}", "quant=ptq,fp16",
    f"quant.bits={','.join(map(str, BITS))}", f"seed={','.join(map(str, SEEDS))}", "train.steps=500", "algo.n_envs=4",
    "eval.episodes=2", "eval.n_envs=2", "hydra.callbacks.collate.formats=[png]",  # its tables are what is compared
]


def query(store: Path, sql: str, *args: object) -> float | None:
    with sqlite3.connect(store) as con:
        return con.execute(sql, args).fetchone()[0]


def stored(tmp_path: Path, records: list[dict], name: str = "r.sqlite") -> Path:
    path = tmp_path / name
    write_records(Store(path), records)
    return path


def two_trainings() -> list[dict]:
    """PPO on CartPole trained twice per seed, as `python run.py` then the README's activation sweep
    leave it: 100k steps (the algorithm's default budget, train.steps null) and train.steps=8192;
    PPO on Acrobot trained once. Each number is known, so any pooling shows."""
    default = {"algo.n_timesteps": 100_000}
    records = []
    for seed in (0, 1):
        records += [
            record("ppo", "cartpole", "fp32", seed=seed, reward=500.0, fp32=500.0, steps=None, config=default),
            record("ppo", "cartpole", "ptq", 8, seed, reward=490.0 + seed, fp32=500.0, steps=None, config=default),
            record("ppo", "cartpole", "fp32", seed=seed, reward=300.0, fp32=300.0, steps=8192, config=default),
            record("ppo", "acrobot", "fp32", seed=seed, reward=-100.0, fp32=-100.0),
            record("ppo", "acrobot", "ptq", 8, seed, reward=-110.0, fp32=-100.0),
        ]
        for act in (4, 32):
            records.append(record("ppo", "cartpole", "ptq", 8, seed, reward=240.0 + act, fp32=300.0, steps=8192,
                                  config={**default, "quant.act_bits": act, "quant.input_bits": 32}))
    return records


def activation_sweep() -> list[dict]:
    """The README's activation sweep shape (weights 4, 8 x activations 4, 8, 32 x inputs 4, 8, 32: 18
    PTQ cells) for PPO on CartPole, three seeds far apart (500, 480, 420): t-intervals run past 500,
    and DQN on Acrobot at 2..8 bits."""
    records = []
    for seed, reward in ((0, 500.0), (1, 480.0), (2, 420.0)):
        records.append(record("ppo", "cartpole", "fp32", seed=seed, reward=reward, fp32=reward))
        records.append(record("dqn", "acrobot", "fp32", seed=seed, reward=-90.0 - seed, fp32=-90.0 - seed))
        for bits in (2, 4, 6, 8):
            records.append(record("dqn", "acrobot", "ptq", bits, seed, reward=-95.0 - seed, fp32=-90.0 - seed,
                                  action_agreement=0.9))
        for bits in (4, 8):
            for act in (4, 8, 32):
                for inp in (4, 8, 32):
                    records.append(record("ppo", "cartpole", "ptq", bits, seed, reward=reward, fp32=reward,
                                          config={"quant.act_bits": act, "quant.input_bits": inp},
                                          action_agreement=1.0 - 0.2 * seed))
    return records
