"""Mixed-precision DQN training on Pong with the paper's three policy sizes: fp32 vs `train.amp`
(torch.autocast in bfloat16) vs float16 autocast with a GradScaler (`quarl.train.fp16.FP16DQN`, the
paper's kind of mixed precision), measured side by side in one run.

The policies (QuaRL's mixed-precision study, `quarl/data/mixed_precision_training.csv`): three
convolutions with the Nature DQN's kernels and strides (8x8/4, 4x4/2, 3x3/1) of 128, 512 or 1024
filters each, then a fully connected layer of 128, 512 or 2048 units, then one Q-value per action,
as SB3's DQN `CnnPolicy` with that features extractor.

1. Learner updates per second: SB3's own `DQN.train` (batch 32, Adam, Huber loss, target network)
   on a replay buffer of Pong frames collected by a random policy, fp32, bf16 and fp16 (FP16DQN's
   `train`: the same update with loss scaling) alternating over `--rounds` rounds on the same
   batches (the buffer's sampler reseeded alike) and the same model, after one untimed update
   in each; median per round.
2. End-to-end env steps per second: a short SB3 DQN training on Pong (`--train-steps` env steps,
   learning from step 500, an update every 4 steps), fp32, with quarl's `train.amp` callback, and
   as FP16DQN.

fp16 updates the scaler skipped (an inf or a nan in the scaled gradients; the scale then halves)
are counted in both parts. Prints the table with the paper's speedup beside each size (the paper
ran fp16 with loss scaling: compare it with the fp16 columns), and writes it as CSV with `--csv`
(the columns of older runs unchanged: `update speedup` and `end-to-end speedup` are bf16's).
`--tiny` shrinks the networks to 4/8/16 filters and part 1's buffer to TINY_FILL frames (a CPU
rehearsal of the script, not a measurement).

Usage: python benchmarks/bench_amp.py [--device cuda] [--updates 100] [--rounds 3] [--train-steps 2000] [--csv F]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from importlib import resources
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from stable_baselines3 import DQN
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

from quarl.train.amp import DTYPE, AutocastWhileTraining
from quarl.train.fp16 import FP16DQN

SIZES = {"Policy A": (128, 128), "Policy B": (512, 512), "Policy C": (1024, 2048)}  # filters, FC units
TINY = {"Policy A": (4, 16), "Policy B": (8, 32), "Policy C": (16, 64)}
BUFFER = 2000  # Pong transitions in the replay buffer of part 1
TINY_FILL = 64  # --tiny: frames collected into it (two batches of 32), instead of BUFFER // 2
PRECISIONS = ("fp32", "bf16", "fp16")


class PaperCNN(BaseFeaturesExtractor):
    """The study's convolutional trunk: three convolutions of `filters` each and an FC layer of `features_dim`."""

    def __init__(self, observation_space: gym.spaces.Box, filters: int = 128, features_dim: int = 128) -> None:
        super().__init__(observation_space, features_dim)
        channels = observation_space.shape[0]
        self.cnn = nn.Sequential(
            nn.Conv2d(channels, filters, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(filters, filters, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(filters, filters, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.cnn(torch.zeros(1, *observation_space.shape)).shape[1]
        self.linear = nn.Sequential(nn.Linear(flat, features_dim), nn.ReLU())

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.linear(self.cnn(observations))


def pong_env() -> Any:
    """quarl's training Pong (Atari wrappers, 4 frames stacked), one env."""
    from hydra import compose, initialize_config_dir

    from quarl import CONF_DIR
    from quarl.config import schema
    from quarl.rl.envs import training_envs

    schema.register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["algo=dqn", "env=atari/pong"])
    return training_envs(cfg.env, 1, 0)


def model(env: Any, size: tuple[int, int], device: str, learning_starts: int, fp16: bool = False) -> DQN:
    """SB3's DQN with the study's policy; FP16DQN (the same, its `train` in fp16 with a GradScaler) with `fp16`."""
    filters, fc = size
    return (FP16DQN if fp16 else DQN)(
        "CnnPolicy",
        env,
        buffer_size=BUFFER,
        batch_size=32,
        learning_starts=learning_starts,
        train_freq=4,
        target_update_interval=1000,
        optimize_memory_usage=False,
        policy_kwargs={
            "features_extractor_class": PaperCNN,
            "features_extractor_kwargs": {"filters": filters, "features_dim": fc},
            "net_arch": [],
            "normalize_images": True,
        },
        device=device,
        seed=0,
    )


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def train(dqn: FP16DQN, precision: str, updates: int, device: str) -> None:
    """`updates` of FP16DQN's update (fp16), or of SB3's own under bf16 autocast or none."""
    if precision == "fp16":
        dqn.train(gradient_steps=updates, batch_size=32)
    else:
        with torch.autocast(torch.device(device).type, dtype=DTYPE, enabled=precision == "bf16"):
            DQN.train(dqn, gradient_steps=updates, batch_size=32)


def updates_per_s(
    env: Any, size: tuple[int, int], device: str, updates: int, rounds: int, fill: int = BUFFER // 2
) -> tuple[dict[str, float], int]:
    """SB3's DQN update in fp32, under bf16 autocast, and FP16DQN's with loss scaling, on the same
    batches of one model; median updates/s per precision, and the fp16 updates the scaler skipped."""
    dqn = model(env, size, device, learning_starts=BUFFER, fp16=True)
    dqn.learn(fill)  # a replay buffer of real Pong frames, no update yet
    assert isinstance(dqn, FP16DQN)
    for precision in PRECISIONS:  # one untimed update each: the optimizer's state built, the kernels warm
        train(dqn, precision, 1, device)
    skipped = dqn.skipped_steps
    timings: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    for _ in range(rounds):
        for precision in PRECISIONS:
            np.random.seed(0)  # the buffer samples with numpy's global generator: the same batches
            sync(device)
            t0 = time.perf_counter()
            train(dqn, precision, updates, device)
            sync(device)
            timings[precision].append(updates / (time.perf_counter() - t0))
    return {p: statistics.median(v) for p, v in timings.items()}, dqn.skipped_steps - skipped


def env_steps_per_s(env: Any, size: tuple[int, int], device: str, steps: int, precision: str) -> tuple[float, int]:
    """A short DQN training on Pong in fp32, with quarl's train.amp callback (bf16), or as FP16DQN:
    env steps per second, and the updates FP16DQN's scaler skipped."""
    dqn = model(env, size, device, learning_starts=min(500, steps // 2), fp16=precision == "fp16")
    sync(device)
    t0 = time.perf_counter()
    dqn.learn(steps, callback=AutocastWhileTraining() if precision == "bf16" else None)
    sync(device)
    return steps / (time.perf_counter() - t0), getattr(dqn, "skipped_steps", 0)


def parameters(env: Any, size: tuple[int, int]) -> int:
    return sum(p.numel() for p in model(env, size, "cpu", 0).q_net.parameters())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--updates", type=int, default=100, help="updates per timed round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--train-steps", type=int, default=2000)
    ap.add_argument("--tiny", action="store_true", help="tiny networks: a rehearsal, not a measurement")
    ap.add_argument("--csv", help="also write the table here")
    a = ap.parse_args()
    torch.set_num_threads(1 if a.device == "cpu" else torch.get_num_threads())
    env = pong_env()
    paper = pd.read_csv(resources.files("quarl").joinpath("data/mixed_precision_training.csv").open())
    device = torch.cuda.get_device_name() if a.device == "cuda" else platform.processor() or platform.machine()
    rows = []
    for (name, size), arch in zip((TINY if a.tiny else SIZES).items(), paper["architecture"]):
        fill = TINY_FILL if a.tiny else BUFFER // 2
        ups, skipped = updates_per_s(env, size, a.device, a.updates, a.rounds, fill)
        steps = {p: env_steps_per_s(env, size, a.device, a.train_steps, p) for p in PRECISIONS}
        rows.append(
            {
                "policy": name,
                "architecture": arch if not a.tiny else f"3 conv ({size[0]} filters) + FC {size[1]} (tiny)",
                "parameters": parameters(env, size),
                "updates/s fp32": ups["fp32"],
                "updates/s bf16": ups["bf16"],
                "updates/s fp16": ups["fp16"],
                "update speedup": ups["bf16"] / ups["fp32"],
                "update speedup fp16": ups["fp16"] / ups["fp32"],
                "env steps/s fp32": steps["fp32"][0],
                "env steps/s bf16": steps["bf16"][0],
                "env steps/s fp16": steps["fp16"][0],
                "end-to-end speedup": steps["bf16"][0] / steps["fp32"][0],
                "end-to-end speedup fp16": steps["fp16"][0] / steps["fp32"][0],
                "speedup (paper)": float(paper.loc[paper["policy"] == name, "speedup"].iloc[0]),
                "fp16 skipped (timed)": skipped,
                "fp16 skipped (end to end)": steps["fp16"][1],
                "device": device,
            }
        )
        if a.csv:  # a row per size as it lands: a run stopped early keeps the sizes it measured
            pd.DataFrame(rows).to_csv(a.csv, index=False)
    table = pd.DataFrame(rows)
    print(
        f"## Mixed-precision DQN on Pong: fp32 vs bf16 autocast vs fp16 with a GradScaler ({device}, torch "
        f"{torch.__version__}; updates: median of {a.rounds} rounds of {a.updates}; end to end: {a.train_steps} env "
        "steps)\n"
    )
    shown = table.drop(columns="device").rename(
        columns={"update speedup": "update speedup bf16", "end-to-end speedup": "end-to-end speedup bf16"}
    )
    print(shown.to_markdown(index=False, floatfmt=".3g"))
    timed = len(table) * a.rounds * a.updates
    trained = len(table) * max(0, a.train_steps - min(500, a.train_steps // 2)) // 4
    print(
        "\nThe paper's speedup is whole-training runtime in fp32 over mixed precision on its GPU, and its mixed "
        "precision was fp16 with loss scaling: compare it with the fp16 columns (bf16 needs no loss scaling)."
        f"\nfp16 updates the GradScaler skipped (an inf or a nan in the scaled gradients): "
        f"{int(table['fp16 skipped (timed)'].sum())} of {timed} timed, "
        f"{int(table['fp16 skipped (end to end)'].sum())} of about {trained} end to end."
    )


if __name__ == "__main__":
    main()
