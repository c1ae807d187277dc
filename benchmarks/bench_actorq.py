"""ActorQ in one run: actor steps/s with fp32, fp16 and int8 actors for the published 3x2048 policy,
and time to reward with fp32 vs int8 actors on one task.

1. Actor throughput: quarl's actor loop (`quarl.actorq.actor.run_actor`, one thread) acting in
   DeepMind Control cartpole/balance with the 3x2048 D4PG policy, pulling new weights every
   `--update-periods` steps (communication-heavy 100, computation-heavy 1000) from an in-process link that publishes a fresh version before every pull
   (so each pull pays copy, deserialize and load). The precisions alternate over `--rounds` rounds
   and the median of each column is reported: env steps/s and the per-step breakdown.
2. Time to reward: `python run.py algo=dqn env=cartpole quant=actorq` with fp32 and with int8 actors
   (2 actors, at most `--steps` env steps, the tuned 256x256 Q-network), the wall time until the mean
   return of the last 10 training episodes first reaches `--target` (where `actorq.stop_at_return`
   ends the run), and the ratio.

Usage: python benchmarks/bench_actorq.py [--steps-per-actor 3000] [--rounds 3] [--update-periods 100 1000] [--steps 40000] [--target 150]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd
import torch

from quarl.actorq import params
from quarl.actorq.actor import run_actor
from quarl.actorq.networks import policy_network
from quarl.actorq.replay import Chunk
from quarl.actorq.settings import ActorSpec
from quarl.collate.actorq_timing import smoothed
from quarl.store.sqlite import Store

ROOT = Path(__file__).resolve().parents[1]
HIDDEN = (2048, 2048, 2048)
ENV = {"name": "dmc/cartpole_balance", "id": "dm_control/cartpole-balance-v0", "suite": "dmc", "frame_stack": 1, "kwargs": {}}


class BenchLink:
    """An in-process link: a new weights version at every pull, chunks dropped, stop after `steps`."""

    def __init__(self, packed: np.ndarray, steps: int) -> None:
        self.packed, self.steps, self.version, self.sent = packed, steps, 0, 0

    def pull(self, have: int) -> Optional[tuple[int, np.ndarray]]:
        self.version += 1
        return self.version, self.packed.copy()

    def send(self, chunk: Chunk) -> None:
        self.sent += chunk.steps

    def stopped(self) -> bool:
        return self.sent >= self.steps


def actor_throughput(bits: int, steps: int, update_period: int) -> dict[str, float]:
    spec = ActorSpec(algo="d4pg", env=ENV, obs_dim=5, n_out=1, hidden=HIDDEN, actor_bits=bits, comm_bits=bits,
                     update_period=update_period, chunk_size=64, n_step=5, gamma=0.99, seed=0, total_steps=steps,
                     actors=1, sigma=0.3)
    net = policy_network(spec.obs_dim, HIDDEN, spec.n_out)
    packed = params.ParameterQuantizer(spec.layer_shapes, bits).pack(net).copy()
    t = run_actor(0, spec, BenchLink(packed, steps)).as_dict()
    ms = {k: 1e3 * t[k] / t["steps"] for k in ("inference_s", "env_s", "pull_s", "deserialize_s", "load_s")}
    return {"actor": {8: "int8", 16: "fp16", 32: "fp32"}[bits], "steps/s": t["steps_per_s"],
            "inference ms": ms["inference_s"], "env ms": ms["env_s"], "pull ms": ms["pull_s"],
            "deserialize ms": ms["deserialize_s"], "load ms": ms["load_s"], "MB per publish": packed.nbytes / 1e6}


def time_to_reward(bits: int, steps: int, target: float, seed: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        args = ["algo=dqn", "env=cartpole", "quant=actorq", f"quant.actor_bits={bits}", "actorq.actors=2",
                f"train.steps={steps}", f"actorq.stop_at_return={target}", f"seed={seed}", "eval.episodes=10",
                "hydra.callbacks.collate.enabled=false"]
        subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=tmp, check=True, capture_output=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
        store = Store(Path(tmp) / "outputs/results.sqlite")
        run = store.runs().iloc[0]
        curve = smoothed(store.curves(), run["cell_key"])
    reached = curve[curve["return"] >= target]
    return {"actor": {8: "int8", 32: "fp32"}[bits], "seed": seed,
            "time to reward s": float(reached["wall_s"].iloc[0]) if len(reached) else np.nan,
            "env steps": int(reached["step"].iloc[0]) if len(reached) else np.nan,
            "train s": float(run["train_time_s"]), "actor steps/s": float(run["actor_steps_per_s"]),
            "final reward": float(run["reward_mean"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps-per-actor", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (median reported)")
    ap.add_argument("--update-periods", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--steps", type=int, default=40000)
    ap.add_argument("--target", type=float, default=150.0)
    ap.add_argument("--seeds", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(1)
    cpu = platform.processor() or platform.machine()
    for period in a.update_periods:
        print(f"## ActorQ actors: 3x2048 D4PG policy on dmc/cartpole_balance, one thread, pull every "
              f"{period} steps ({cpu}, {os.cpu_count()} cores, torch {torch.__version__})\n")
        rounds = [[actor_throughput(bits, a.steps_per_actor // a.rounds, period) for bits in (32, 16, 8)]
                  for _ in range(a.rounds)]  # precisions alternate, so drift of the machine hits all alike
        rows = pd.DataFrame([r for one in rounds for r in one]).groupby("actor", sort=False).median().reset_index()
        rows["speedup"] = rows["steps/s"] / rows.loc[rows["actor"] == "fp32", "steps/s"].iloc[0]
        print(rows.to_markdown(index=False, floatfmt=".3g") + "\n")
    print(f"\n## Time to reward: DQN CartPole, 2 actors, {a.steps} env steps, target return {a.target:g} "
          f"(mean of last 10 training episodes)\n")
    ttr = pd.DataFrame([time_to_reward(bits, a.steps, a.target, seed) for seed in range(a.seeds) for bits in (32, 8)])
    print(ttr.to_markdown(index=False, floatfmt=".4g"))
    by = ttr.groupby("actor")["time to reward s"].mean()
    print(f"\nint8 / fp32 time-to-reward speedup: {by['fp32'] / by['int8']:.2f}x")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"\n(benchmark took {time.perf_counter() - t0:.0f} s)")
