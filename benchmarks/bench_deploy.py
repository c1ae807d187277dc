"""The deployment table, measured side by side in one run: fp32 vs int8 (and fp16, bf16) execution
of the QuaRL policy sizes, batch 1, one thread.

Networks: the three published policy sizes (MLP 3x64, 3x256, 4096-512-1024), the 3x2048 MLP of
ActorQ, and the Nature CNN (4x84x84 frames, SB3's NatureCNN + a linear head). The MLPs are PPO
policies trained on CartPole-v1 with that actor size (critic 64-64) through quarl's policy cache
(trained once, reused by later runs); the CNN is an untrained PPO CnnPolicy on synthetic frames
(latency and bytes only: no Atari environment here).

For every backend of `quarl.deploy` (and torch's own `quantize_dynamic` int8 as a reference, not
a quarl backend): median and p90 latency per action (batch 1, one thread, after warm-up), speedup
over fp32 eager torch, bytes of the stored tensors, and for the trained MLPs the reward of the same
10 seeded CartPole episodes executed with that backend. `auto` is what quarl runs by default.

Usage: python benchmarks/bench_deploy.py [--policies DIR] [--episodes 10] [--jobs 2] [--no-reward]
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import platform
import statistics
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Optional

import gymnasium as gym
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from gymnasium import spaces
from hydra import compose, initialize_config_dir
from stable_baselines3 import PPO

from quarl import schema
from quarl.envs import random_observations
from quarl.app import CONF_DIR
from quarl.deploy import ActingNetwork, acting_network, compile_network, measure
from quarl.deploy.backends import TorchRunner
from quarl.evaluate import episode_seeds
from quarl.policies import obtain

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT.parent / "shared" / "paper" / "deployment_int8.csv"
BACKENDS = ("torch", "onnx", "onnx_int8", "torch_fp16", "torch_bf16", "auto")
REFERENCE = "torch.ao int8 (ref.)"

# PPO recipes per actor size, found by trying a few on 2 cores: rl-zoo3's tuned CartPole settings
# solve it with the small actors in 50k steps; the large actors learn faster per step but cost ~50x
# more per gradient step, so they get a smaller learning rate, fewer epochs and 12k steps.
SMALL = ["train.steps=50000"]
LARGE = ["train.steps=12000", "algo.hyperparams.learning_rate=0.0003", "algo.hyperparams.clip_range=0.2",
         "algo.hyperparams.n_epochs=4", "algo.hyperparams.batch_size=64"]
MLPS: dict[str, tuple[list[int], list[str]]] = {
    "MLP 3x64": ([64, 64, 64], SMALL),
    "MLP 3x256": ([256, 256, 256], SMALL),
    "MLP 4096-512-1024": ([4096, 512, 1024], LARGE),
    "MLP 3x2048": ([2048, 2048, 2048], LARGE),
}


def config(arch: list[int], overrides: list[str], policies: Path) -> Any:
    """The quarl config of a PPO CartPole-v1 policy with actor `arch` (critic 64-64)."""
    schema.register()
    net_arch = f"{{net_arch:{{pi:[{','.join(map(str, arch))}],vf:[64,64]}}}}"
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[
            "algo=ppo", "env=cartpole", "quant=fp32", "seed=0", "train.progress=false",
            f"+algo.hyperparams.policy_kwargs={net_arch}", f"store.policies={policies}", *overrides,
        ])


def train(name: str, policies: Path) -> tuple[str, float, bool]:
    """Train (or find in the cache) the policy `name`, on one thread; returns (name, seconds, trained)."""
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.WARNING)
    arch, overrides = MLPS[name]
    start = time.perf_counter()
    policy = obtain(config(arch, overrides, policies), policies)
    return name, time.perf_counter() - start, policy.trained


def cartpole_obs(n: int = 512, seed: int = 1) -> np.ndarray:
    """CartPole states from random-action episodes (calibration / example observations)."""
    return random_observations("CartPole-v1", n, seed)


def episodes_reward(act, episodes: int, seed: int) -> float:
    """Mean return of `episodes` CartPole-v1 episodes, episode i reset with quarl's evaluation seed
    i (`quarl.evaluate.episode_seeds`), all stepped side by side through `act` (batched)."""
    envs = [gym.make("CartPole-v1") for _ in range(episodes)]
    obs = [env.reset(seed=s)[0] for env, s in zip(envs, episode_seeds(seed, episodes))]
    totals, running = [0.0] * episodes, list(range(episodes))
    while running:
        actions = act(np.stack([obs[i] for i in running]))
        still = []
        for i, action in zip(running, actions):
            obs[i], reward, terminated, truncated, _ = envs[i].step(int(action))
            totals[i] += float(reward)
            if not (terminated or truncated):
                still.append(i)
        running = still
    return float(np.mean(totals))


class Frames(gym.Env):
    """Atari-shaped observations: 4 stacked 84x84 grey frames, 6 actions."""

    observation_space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    action_space = spaces.Discrete(6)

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


def nature_cnn() -> tuple[ActingNetwork, np.ndarray]:
    model = PPO("CnnPolicy", Frames(), n_steps=8, batch_size=8, seed=0, device="cpu")
    rng = np.random.default_rng(0)
    # smooth synthetic frames (blurred noise), closer to game screens than white noise
    frames = rng.integers(0, 256, (256, 4, 21, 21)).repeat(4, axis=2).repeat(4, axis=3).astype(np.uint8)
    return acting_network(model), frames


class TorchDynamicInt8(TorchRunner):
    """torch.ao.quantization.quantize_dynamic on the Linear layers: measured for reference only."""

    def __init__(self, net: ActingNetwork) -> None:
        super().__init__(net, "torch")
        self.backend, self.precision = REFERENCE, "int8"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated (pytorch/ao#2259)
            module = copy.deepcopy(net)
            module.body = torch.ao.quantization.quantize_dynamic(module.body, {nn.Linear}, dtype=torch.qint8)
            packed = [m for m in module.body.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
            weights = sum(m.weight().numel() + 8 for m in packed)  # int8 weight + scale, zero point
            biases = sum(4 * m.bias().numel() for m in packed if m.bias() is not None)
        others = sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))
        self.module = module.eval()
        self.nbytes = weights + biases + others


def latency(runners: dict[str, Any], obs: np.ndarray, rounds: int, budget_s: float) -> dict[str, dict[str, float]]:
    """measure() of every runner in interleaved rounds; per runner the median over rounds of the
    round medians (and of the p90s), so a busy moment of a shared machine hits all backends alike."""
    calls = {}
    for name, r in runners.items():
        once = measure(r, obs, warmup=10, calls=10)["median_ms"] / 1e3
        calls[name] = int(min(500, max(30, budget_s / rounds / max(once, 1e-6))))
    results: dict[str, list[dict[str, float]]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, r in runners.items():
            results[name].append(measure(r, obs, warmup=20, calls=calls[name]))
    return {name: {k: statistics.median(m[k] for m in ms) for k in ("median_ms", "p90_ms")} for name, ms in results.items()}


def bench_network(label: str, net: ActingNetwork, example: np.ndarray, reward: Optional[tuple[int, int]],
                  rounds: int, budget_s: float) -> list[dict[str, Any]]:
    logging.getLogger("quarl.deploy.backends").setLevel(logging.ERROR)  # auto's choice is a table column
    runners: dict[str, Any] = {b: compile_network(net, b, example) for b in BACKENDS}
    runners[REFERENCE] = TorchDynamicInt8(net)
    times = latency(runners, example, rounds, budget_s)
    base = times["torch"]["median_ms"]
    fp32_bytes = runners["torch"].nbytes
    rows = []
    for name, r in runners.items():
        row = {
            "network": label,
            "backend": name if name != "auto" else f"auto -> {r.backend}",
            "precision": r.precision,
            "median ms": times[name]["median_ms"],
            "p90 ms": times[name]["p90_ms"],
            "speedup": base / times[name]["median_ms"],
            "bytes": r.nbytes,
            "x smaller": fp32_bytes / r.nbytes,
        }
        if reward is not None:
            row["reward"] = episodes_reward(r, *reward)
        rows.append(row)
    return rows


def published_vs_ours(table: pd.DataFrame) -> Optional[pd.DataFrame]:
    if not PUBLISHED.exists():
        return None
    paper = pd.read_csv(PUBLISHED)
    rows = []
    for _, p in paper.iterrows():
        core = p["network"].replace("3L MLP ", "").replace(" nodes", "").strip("()").replace(" ", "-")
        label = {"64": "MLP 3x64", "256": "MLP 3x256"}.get(core, f"MLP {core}")
        ours = table[table.network == label]
        if ours.empty:
            continue
        fp32 = ours[ours.backend == "torch"].iloc[0]
        int8 = ours[ours.backend == "onnx_int8"].iloc[0]
        rows.append({"policy": p["policy"], "network": label, "paper fp32 ms (RPi 3b)": p["fp32_time_ms"],
                     "paper int8 ms": p["int8_time_ms"], "paper speedup": p["speedup"],
                     "ours fp32 ms": fp32["median ms"], "ours int8 ms": int8["median ms"], "ours speedup": int8["speedup"]})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", type=Path, default=ROOT / "outputs" / "policies", help="quarl policy cache")
    parser.add_argument("--episodes", type=int, default=10, help="seeded CartPole episodes per backend")
    parser.add_argument("--jobs", type=int, default=2, help="policies trained in parallel (one thread each)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved latency rounds")
    parser.add_argument("--budget", type=float, default=1.5, help="seconds of timed calls per backend and network")
    parser.add_argument("--no-reward", action="store_true", help="latency and bytes only: train nothing")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    start = time.perf_counter()

    models: dict[str, Any] = {}
    if not args.no_reward:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for name, seconds, trained in pool.map(train, list(MLPS)[::-1], [args.policies] * len(MLPS)):
                print(f"{name}: {'trained in' if trained else 'loaded from the cache in'} {seconds:.0f} s")
        for name, (arch, overrides) in MLPS.items():
            models[name] = obtain(config(arch, overrides, args.policies), args.policies).load()
    else:
        for name, (arch, _) in MLPS.items():
            models[name] = PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=dict(pi=arch, vf=[64, 64])),
                               seed=0, device="cpu")

    torch.set_num_threads(1)
    example = cartpole_obs()
    rows = []
    for name, model in models.items():
        rows += bench_network(name, acting_network(model), example, None if args.no_reward else (args.episodes, 0),
                              args.rounds, args.budget)
    cnn, frames = nature_cnn()
    rows += bench_network("Nature CNN (4x84x84)", cnn, frames, None, args.rounds, args.budget)
    table = pd.DataFrame(rows)
    if "reward" in table:  # the CNN has no reward: shown as n/a, not nan
        table["reward"] = table["reward"].astype(object).where(table["reward"].notna(), None)

    print(f"\n## Deployment: batch 1, one thread ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, torch {torch.__version__})\n")
    print(table.to_markdown(index=False, floatfmt=".4g", missingval="n/a"))
    published = published_vs_ours(table)
    if published is not None:
        print("\n## Published (Raspberry Pi 3b, ARM A53) vs here (x86, onnx_int8 vs fp32 eager torch)\n")
        print(published.to_markdown(index=False, floatfmt=".4g"))

    print("\n## Checks\n")
    big = table[(table.network == "MLP 3x2048") & (table.backend == "onnx_int8")].iloc[0]
    print(f"- MLP 3x2048 int8 vs fp32 eager: {big['speedup']:.2f}x faster (target >= 3x), "
          f"{big['x smaller']:.2f}x smaller (limit 4x)")
    for _, row in table[table.backend.str.startswith("auto")].iterrows():
        verdict = "ok" if row["speedup"] >= 1 else "SLOWER than fp32 eager"
        print(f"- {row['network']}: default backend {row['backend']} runs at {row['speedup']:.2f}x fp32 eager ({verdict})")
    print(f"\n{time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
