"""QAT training cost, measured side by side in one run: training-step time with fake quantization
(weights and input activations of every layer) vs fp32, for the same network.

1. A forward + backward + Adam step of an MLP (sizes below), batch 256, fp32 vs QAT on and QAT observing only.
2. `model.learn` of SB3 DQN and PPO on CartPole-v1 for the same env steps, fp32 vs QAT (delay 0).

Usage: python benchmarks/bench_qat.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import pandas as pd
import torch
import torch.nn as nn
from omegaconf import OmegaConf
from stable_baselines3 import DQN, PPO
from stable_baselines3.common.env_util import make_vec_env

from quarl.quantize import fake_quant as qat

QUANT = OmegaConf.create(dict(method="qat", bits=8, act_bits=8, scheme="affine", granularity="per_tensor",
                              quantize_bias=False))


class Holder(nn.Module):
    """Gives a bare MLP the `policy` attribute qat.attach expects."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.policy = nn.Module()
        self.policy.net = net


def mlp(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 8))


def step_time(net: nn.Module, steps: int = 50) -> float:
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    x, y = torch.randn(256, 64), torch.randn(256, 8)
    for _ in range(5):  # warm-up
        opt.zero_grad()
        nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    return (time.perf_counter() - start) / steps


def bench_mlp(repeats: int) -> pd.DataFrame:
    rows = []
    for width in (64, 256, 2048):
        times: dict[str, list[float]] = {"fp32": [], "QAT observing (before delay)": [], "QAT on": []}
        for _ in range(repeats):
            torch.manual_seed(0)
            times["fp32"].append(step_time(mlp(width)))
            for mode, enabled in (("QAT observing (before delay)", False), ("QAT on", True)):
                holder = Holder(mlp(width))
                layers = qat.attach(holder, QUANT)
                qat.set_switches(layers, enabled=enabled)
                times[mode].append(step_time(holder.policy.net))
        base = statistics.median(times["fp32"])
        for mode, t in times.items():
            rows.append({"network": f"MLP 64-{width}-{width}-8, batch 256", "mode": mode,
                         "ms / train step": 1e3 * statistics.median(t), "x fp32": statistics.median(t) / base})
    return pd.DataFrame(rows)


def learn_time(algo: str, use_qat: bool, steps: int) -> float:
    if algo == "dqn":
        model = DQN("MlpPolicy", gym.make("CartPole-v1"), learning_starts=500, train_freq=4, seed=0, device="cpu")
    else:
        model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=0), n_steps=32, batch_size=256,
                    n_epochs=20, seed=0, device="cpu")
    if use_qat:
        qat.set_switches(qat.attach(model, QUANT), enabled=True)
    start = time.perf_counter()
    model.learn(steps)
    return time.perf_counter() - start


def bench_learn(repeats: int, steps: int) -> pd.DataFrame:
    rows = []
    for algo in ("dqn", "ppo"):
        fp32, quant = [], []
        for _ in range(repeats):
            fp32.append(learn_time(algo, False, steps))
            quant.append(learn_time(algo, True, steps))
        for mode, t in (("fp32", fp32), ("QAT on", quant)):
            rows.append({"training": f"{algo.upper()} CartPole-v1, {steps} steps", "mode": mode,
                         "s": statistics.median(t), "x fp32": statistics.median(t) / statistics.median(fp32)})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5000)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    print("## Train step of an MLP\n")
    print(bench_mlp(args.repeats).to_markdown(index=False, floatfmt=".3f"))
    print("\n## SB3 learn()\n")
    print(bench_learn(max(1, args.repeats // 2), args.steps).to_markdown(index=False, floatfmt=".2f"))


if __name__ == "__main__":
    main()
