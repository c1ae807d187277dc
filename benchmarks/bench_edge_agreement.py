"""Where a full-integer policy's action agreement with fp32 goes: TFLite's int8 scheme applied one
stage at a time to a trained policy, the agreement measured after each.

The policy: quarl's default run's (PPO on CartPole, rl-zoo3's tuned 64x64 Tanh MLP, seed 0, from the
policy cache, trained first if missing), or `--algo dqn` (rl-zoo3's tuned 4-256-256-2 ReLU MLP,
keep-best). The states: the fp32 policy's own greedy episodes (`--episodes`, seeds disjoint from the
calibration episodes).

Stages, each in float64 on top of the previous one, then the integer reference itself:
1. weights int8, symmetric per output channel;
2. the observation on the int8 input grid (per feature, from the calibration states' min-max);
3. each pre-activation requantized to its int8 output scale;
4. each Tanh's output on TFLite's fixed int8 grid (scale 1/128);
5. `quarl.deploy.edge.integer` (what `quant.backend=c|tflite` execute), with min-max and with
   percentile calibration;
6. the same in TFLite's 16x8 scheme (int16 activations: `quant.backend=c_16x8|tflite_16x8`);
7. (PPO) what-if ceilings of int8 activations, float simulations of stages 1-4 with more freedom
   than TFLite's int8 scheme gives (`ceiling`): the input on a decision-aligned basis, the first
   Tanh's output on a calibrated grid, the first layer in int16.

With `--algo dqn` it also sets, for each of `--seeds`, the Q-value gap between the best two actions
beside how far int8 weights (per tensor, as quarl's PTQ default, and per channel) move the Q-values
(where the move is larger than the gap, rounding alone can flip the greedy action), the int8 policy's
action agreement and both policies' greedy returns; `--csv` keeps that table.

Usage: python benchmarks/bench_edge_agreement.py [--algo ppo|dqn] [--episodes 10] [--seeds 0,1,2,3,4 --csv FILE]
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import sys
from datetime import date
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from hydra import compose, initialize_config_dir

from quarl import CONF_DIR
from quarl.config import schema
from quarl.deploy import acting_network
from quarl.deploy.edge.calibrate import calibration_states, visited_states
from quarl.deploy.edge.convert import integer_policy
from quarl.deploy.edge.integer import IntegerPolicy
from quarl.train.cache import obtain

ROOT = Path(__file__).resolve().parents[1]


def staged(net: nn.Module, ip: IntegerPolicy, obs: np.ndarray, stages: int) -> np.ndarray:
    """Greedy actions of the float network with the first `stages` int8 stages applied."""
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    activations = [ip_layer.activation for ip_layer in ip.layers]
    x = ip.normalize(obs).astype(np.float64)
    if stages >= 2:  # the int8 input grid
        x = (ip.quantize_input(obs).astype(np.float64) - ip.input.zero_point) * ip.step + ip.center
    for m, layer, act in zip(linears, ip.layers, activations):
        w, b = m.weight.detach().double().numpy(), m.bias.detach().double().numpy()
        if stages >= 1:
            scale = np.abs(w).max(axis=1, keepdims=True) / 127
            w = np.round(w / scale) * scale
        z = x @ w.T + b
        if stages >= 3:
            q = np.clip(np.round(z / layer.output.scale) + layer.output.zero_point, -128, 127)
            z = (q - layer.output.zero_point) * layer.output.scale
        if act == "tanh":
            z = np.tanh(z)
            if stages >= 4:
                z = np.round(z * 128) / 128
        elif act == "relu":
            z = np.maximum(z, 0)
        x = z
    return x.argmax(axis=1)


def ceiling(net: nn.Module, ip: IntegerPolicy, calibration: np.ndarray, obs: np.ndarray, variant: str) -> np.ndarray:
    """Greedy actions of a float simulation of stages 1-4 changed where TFLite's int8 scheme is tight:
    "rotated": the input grid on a decision-aligned basis (the fp32 logit gap's least-squares direction
    gets an int8 axis of its own: a float rotation before QUANTIZE, folded into the first layer);
    "rotated+tanh": also the first Tanh's output on a calibrated int8 grid (TFLite fixes it at 1/128);
    "int16 first layer": the input, first pre-activation and first Tanh in int16, the rest int8."""
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    weights = [(m.weight.detach().double().numpy(), m.bias.detach().double().numpy()) for m in linears]
    cal, x = ip.normalize(calibration).astype(np.float64), ip.normalize(obs).astype(np.float64)

    def forward(z: np.ndarray, quantized: bool, first_bits: int = 8, first_tanh_step: float = 1 / 128) -> np.ndarray:
        for i, (w, b) in enumerate(weights):
            if quantized:
                scale = np.abs(w).max(axis=1, keepdims=True) / 127
                w = np.round(w / scale) * scale
            z = z @ w.T + b
            if quantized:
                qmax = 32767 if (i == 0 and first_bits == 16) else 127
                step = ip.layers[i].output.scale * 127 / qmax
                z = np.clip(np.round(z / step), -qmax - 1, qmax) * step
            if i < len(weights) - 1:
                z = np.tanh(z)
                step = first_tanh_step if i == 0 else 1 / 128
                z = np.round(z / step) * step if quantized else z
        return z

    def on_grid(z: np.ndarray, basis: np.ndarray, qmax: int) -> np.ndarray:
        zc = cal @ basis.T
        lo, hi = zc.min(axis=0), zc.max(axis=0)
        center, step = (lo + hi) / 2, (hi - lo) / (2 * qmax)
        return (np.clip(np.round((z @ basis.T - center) / step), -qmax, qmax) * step + center) @ np.linalg.inv(basis).T

    if variant == "int16 first layer":
        tanh_range = float(np.tanh(ip.layers[0].output.scale * 127))
        return forward(on_grid(x, np.eye(x.shape[1]), 32767), True, 16, tanh_range / 32767).argmax(axis=1)
    logits = forward(cal, False)
    gap = logits[:, 1] - logits[:, 0]
    direction = np.linalg.lstsq(np.c_[cal, np.ones(len(cal))], gap, rcond=None)[0][:-1]
    basis = np.linalg.qr(np.c_[direction, np.eye(len(direction))[:, :-1]])[0].T  # rows: the direction first
    tanh_step = float(np.tanh(ip.layers[0].output.scale * 127)) / 127 if variant == "rotated+tanh" else 1 / 128
    return forward(on_grid(x, basis, 127), True, 8, tanh_step).argmax(axis=1)


def int8_weights(q_net: nn.Module, granularity: str) -> nn.Module:
    """A copy of `q_net` with every Linear weight rounded to symmetric int8 (per tensor or per channel)."""
    rounded = copy.deepcopy(q_net)
    with torch.no_grad():
        for m in rounded.modules():
            if isinstance(m, nn.Linear):
                w = m.weight
                peak = w.abs().amax(dim=1, keepdim=True) if granularity == "per channel" else w.abs().max()
                m.weight.copy_(torch.round(w / (peak / 127)) * (peak / 127))
    return rounded


def greedy_return(model: object, env_cfg: object, seeds: list[int]) -> float:
    """Mean return of `model`'s greedy episodes on CartPole: one point a step, so an episode's return is
    the number of states it acts on."""
    return len(visited_states(model, env_cfg, seeds)) / len(seeds)


def q_gaps(model: object, states: np.ndarray, env_cfg: object, episodes: list[int]) -> pd.DataFrame:
    """Median abs Q, the gap between the best two Q-values and the Q-value error of int8 weights, with
    the int8 policy's action agreement and both policies' greedy returns."""
    q_net = model.q_net  # type: ignore[attr-defined]
    obs = torch.as_tensor(states)
    fp32_return = greedy_return(model, env_cfg, episodes)
    with torch.no_grad():
        q = q_net(obs).numpy()
    top = np.sort(q, axis=1)
    gap = top[:, -1] - top[:, -2]
    rows = []
    for granularity in ("per tensor", "per channel"):
        rounded = int8_weights(q_net, granularity)
        with torch.no_grad():
            q8 = rounded(obs).numpy()
        error = np.abs(q8 - q).max(axis=1)
        int8 = copy.deepcopy(model)
        int8.q_net = rounded  # type: ignore[attr-defined]
        int8.policy.q_net = rounded  # type: ignore[attr-defined]
        rows.append(
            {
                "int8 weights": granularity,
                "median abs Q": float(np.median(np.abs(q))),
                "median gap": float(np.median(gap)),
                "median Q error": float(np.median(error)),
                "states where error > gap": float((error > gap).mean()),
                "action agreement": float((q8.argmax(axis=1) == q.argmax(axis=1)).mean()),
                "fp32 return": fp32_return,
                "int8 return": greedy_return(int8, env_cfg, episodes),
            }
        )
    return pd.DataFrame(rows)


def policy_of(algo: str, seed: int) -> tuple[object, object]:
    """The composed config and the cached (trained if missing) policy of `algo` on CartPole, `seed`."""
    overrides = [f"algo={algo}", "env=cartpole", "train.progress=false", "quant.bits=8", f"seed={seed}"]
    overrides += ["train.keep_best=true"] if algo == "dqn" else []
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    return cfg, obtain(cfg, ROOT / "outputs/policies")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algo", default="ppo", choices=["ppo", "dqn"])
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--seeds", default="0", help="dqn: the seeds whose Q-value gaps are measured, e.g. 0,1,2,3,4")
    ap.add_argument("--csv", type=Path, help="dqn: also write the per-seed Q-value gaps to this CSV file")
    a = ap.parse_args()
    torch.set_num_threads(1)
    schema.register()
    seeds = [int(s) for s in a.seeds.split(",")]
    cfg, policy = policy_of(a.algo, seeds[0])
    model = policy.load()
    net = acting_network(model, policy.obs_transform())
    calibration = calibration_states(cfg, policy)
    episodes = list(range(10_000, 10_000 + a.episodes))
    states = visited_states(model, cfg.env, episodes, policy.obs_transform())
    fp32 = model.predict(states, deterministic=True)[0]
    ip = integer_policy(net, calibration)
    names = [
        "fp32",
        "1. weights int8 per channel",
        "2. + int8 input grid",
        "3. + int8 pre-activations",
        "4. + Tanh output on 1/128",
    ]
    rows = [
        {"stage": name, "action agreement": float((staged(net.body, ip, states, i) == fp32).mean())}
        for i, name in enumerate(names)
    ]
    for bits, stage in ((8, "5. integer reference"), (16, "6. integer reference, 16x8")):
        for statistic in ("minmax", "percentile"):
            reference = integer_policy(net, calibration, statistic=statistic, activation_bits=bits)
            rows.append(
                {
                    "stage": f"{stage} ({statistic} calibration)",
                    "action agreement": float((reference.act(states) == fp32).mean()),
                }
            )
    if a.algo == "ppo":  # what the int8 scheme could reach with more freedom than TFLite's (float simulations)
        for variant in ("rotated", "rotated+tanh", "int16 first layer"):
            agreement = float((ceiling(net.body, ip, calibration, states, variant) == fp32).mean())
            rows.append({"stage": f"what-if, stages 1-4 with: {variant}", "action agreement": agreement})
    print(
        f"## Action agreement with fp32: {a.algo.upper()} CartPole seed {seeds[0]} ({len(states)} states of "
        f"{a.episodes} fp32 episodes; calibration: {len(calibration)} states)\n"
    )
    print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".4f"))
    if a.algo == "dqn":
        gaps = []
        for seed in seeds:
            model = policy_of(a.algo, seed)[1].load() if seed != seeds[0] else model
            seen = visited_states(model, cfg.env, episodes)
            gaps.append(q_gaps(model, seen, cfg.env, episodes).assign(seed=seed, states=len(seen)))
        table = pd.concat(gaps, ignore_index=True)
        print(f"\n## DQN's Q-value gaps against int8 weights' Q-value error ({a.episodes} fp32 episodes a seed)\n")
        print(table.to_markdown(index=False, floatfmt=".4g"))
        if a.csv:
            command = "python benchmarks/bench_edge_agreement.py " + " ".join(sys.argv[1:])
            cpu = platform.processor() or "cpu"
            machine = f"{date.today()}, {platform.machine()} ({cpu}), torch {torch.__version__}"
            a.csv.write_text(f"# {command}\n# {machine}, policies trained on this machine\n")
            with a.csv.open("a") as out:
                table.to_csv(out, index=False)


if __name__ == "__main__":
    main()
