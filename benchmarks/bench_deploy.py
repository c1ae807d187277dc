"""The deployment table, measured side by side in one run: fp32 vs int8 (and fp16, bf16) execution
of the QuaRL policy sizes, batch 1, one thread.

Networks: the three published policy sizes (MLP 3x64, 3x256, 4096-512-1024), the 3x2048 MLP of
ActorQ, and the Nature CNN (4x84x84 frames, SB3's NatureCNN + a linear head). All are PPO policies
trained through quarl's policy cache (trained once, reused by later runs): the MLPs on CartPole-v1
with that actor size (critic 64-64), the CNN on Atari Breakout with rl-zoo3's Atari PPO settings
and a short budget (`CNN_STEPS`, about 11 minutes on one thread of a 2-core x86).

For every backend of `quarl.deploy` (and torch's own `quantize_dynamic` int8 as a reference, not
a quarl backend): median and p90 latency per action (batch 1, one thread, after warm-up), speedup
over fp32 eager torch and over int8 (`onnx_int8`), bytes of the stored tensors, and the reward of
the trained policy executed with that backend. The weight-only backends execute the policy quarl
quantizes for them (column `policy`): `onnx_int4` the PTQ 4-bit policy (quarl's default affine, per
tensor) with its own weights, `onnx_int2` the PTQ 2-bit one, and `auto` is run on the fp32 policy
and on the PTQ 4-bit one (where it may pick `onnx_int4`). Rewards: the same 10 seeded CartPole
episodes for the MLPs, and `--cnn-episodes` seeded Breakout episodes (quarl's evaluation: whole
games, raw score, capped at `--cnn-frames` emulator frames) for the CNN, whose int8 runner is
calibrated on real Breakout frames. `auto` is what quarl runs by default.

The latency ratios depend on the machine's load: on a 2-core x86 (AVX2, no VNNI) the 3x2048 MLP's
int4 ran at 0.8x int8 when the machine was quiet and 1.2x-2.9x int8 while other work loaded both
cores (its 8.4 MB of int8 weights then compete for the cache); note the load beside a table.
benchmarks/bench_int4.py measures the int4 settings of ONNX Runtime (and other int8 layouts) on
the 3x2048 MLP alone.

Full-integer edge rows (quarl.deploy.edge), for every MLP up to EDGE_MAX_WEIGHTS weights and for
two tuned policies (rl-zoo3's PPO CartPole-v1, 64x64, and PPO MountainCarContinuous-v0 with
VecNormalize; trained through quarl's cache): `tflite`, the LiteRT int8 model under ai-edge-litert's
builtin kernels, and `c`, the C policy compiled by the host cc and called through ctypes, both at
batch 1, each calibrated on the states the trained fp32 policy visits in quarl's calibration
episodes (`quarl.quantize.calibration.calibration_seeds`). `c (native)` is the same C policy timed in C,
without the Python call. Their `flash bytes` / `RAM bytes`: the C policy's object for the
SIZES_TARGET target, cortex-m4 (its flags: .text + .rodata, and .data + .bss + stack), the .tflite file and TFLite
Micro's tensor arena; their reward is the executed full-integer policy's. `tflite_16x8` and `c_16x8`
are the same in TFLite's 16x8 scheme (int16 activations).

Microcontroller targets (quarl.deploy.edge.targets, each whose toolchain and QEMU are installed): for
each C policy (`c`, `c_16x8`, int4 packed and Huffman-coded) of every network up to TARGET_MAX_WEIGHTS
weights, a second table gives its linked flash and RAM in the target's minimal firmware (with the
policy minus without it; RAM with policy_act's stack), its executed instructions per action under
QEMU (one instruction per translation block, over TARGET_COUNT_STATES states, start-up excluded; an instruction is not a
cycle) and per multiply-accumulate (every layer's weights), and its actions under QEMU checked against the
integer reference on TARGET_CHECK_STATES states, as an export does. The targets are the registry's
(`TARGETS`): a target module added there gets its rows here.

Last, the goals of issue 58 in one table (benchmarks/deploy_goals.py): per registered target the int8
action of the tuned PPO CartPole 64x64 policy in instructions and per MAC beside CMSIS-NN's
arm_fully_connected_s8 counted on the same harness (benchmarks/deploy_anchors.py), the int4
Huffman-coded policy against int8 on the Cortex-M4, the host C policy against ONNX Runtime int8, and
quarl's evaluator against SB3's evaluate_policy; each with its goal and whether it is met. `--quick`
prints that table alone (a minute or two).

Usage: python benchmarks/bench_deploy.py [--policies DIR] [--episodes 10] [--cnn-episodes 10]
       [--cnn-frames 10000] [--jobs 2] [--no-reward] [--no-edge] [--networks "MLP 3x2048,..."]
       [--quick] [--cmsis-nn PATH] [--eval-repeats 3]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import logging
import os
import platform
import statistics
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

import gymnasium as gym
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from stable_baselines3 import PPO

from quarl.app import CONF_DIR
from quarl.config import schema
from quarl.deploy import ActingNetwork, Runner, acting_network, compile_network, measure
from quarl.deploy.edge import integer_policy
from quarl.deploy.edge.integer import WEIGHT_CODINGS
from quarl.deploy.execution import TorchRunner
from quarl.evaluate.episodes import episode_seeds, evaluate
from quarl.quantize.calibration import calibration_seeds
from quarl.quantize.weights import LAYER_TYPES, fake_quantize
from quarl.rl.envs import make_env, random_observations
from quarl.train.cache import obtain

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the goals' modules beside this one
import deploy_goals  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT.parent / "shared" / "paper" / "deployment_int8.csv"
BACKENDS = ("torch", "onnx", "onnx_int8", "torch_fp16", "torch_bf16", "auto")
# weight-only backends, each on the policy quarl quantized to its bits (PTQ, affine, per tensor),
# and auto on that 4-bit policy
NBITS_ROWS = (("onnx_int4", 4), ("onnx_int2", 2), ("auto", 4))
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
# The Nature CNN: PPO on Breakout with rl-zoo3's Atari settings (conf/tuned/_atari/ppo.yaml: 8 envs,
# n_steps 128, 4 epochs, linear schedules over the budget), 128k env steps (~11 min on one thread
# here). Breakout, not Pong: Pong is still at the random policy's -21 after so few steps.
CNN = "Nature CNN (4x84x84)"
CNN_ENV = "atari/breakout"
CNN_STEPS = 128_000
# Trained policies for the edge rows: rl-zoo3's tuned PPO settings (quarl's conf/tuned), their own budgets
TUNED: dict[str, list[str]] = {
    "PPO CartPole-v1 (tuned 64x64)": ["env=cartpole"],
    "PPO MountainCarContinuous-v0 (tuned + VecNormalize)": ["env=mountaincar_continuous"],
}
EDGE = ("tflite", "c", "tflite_16x8", "c_16x8")  # int8 activations, then TFLite's 16x8 scheme
EDGE_POLICIES = {"tflite_16x8": "fp32 -> 16x8", "c_16x8": "fp32 -> 16x8",
                 "c [int4 packed]": "fp32 -> full int8, int4 weights packed",
                 "c [int4 huffman]": "fp32 -> full int8, int4 weights Huffman-coded"}  # else: fp32 -> full int8
EDGE_MAX_WEIGHTS = 4_000_000  # larger MLPs get no C source / .tflite rows (MLP 3x2048: 8.4M weights)
TARGET_MAX_WEIGHTS = 150_000  # firmware rows up to MLP 3x256 (133k weights): seconds of QEMU each
TARGET_CHECK_STATES, TARGET_COUNT_STATES = 300, 4  # as `quarl export --format c`
SIZES_TARGET = "cortex-m4"  # the target whose policy.o sizes the latency table's C rows show


def compose_config(overrides: list[str], policies: Path) -> Any:
    """The quarl config of a PPO policy (fp32, seed 0) with `overrides`, cached under `policies`."""
    schema.register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[
            "algo=ppo", "quant=fp32", "seed=0", "train.progress=false", f"store.policies={policies}", *overrides,
        ])


def config(arch: list[int], overrides: list[str], policies: Path) -> Any:
    """The quarl config of a PPO CartPole-v1 policy with actor `arch` (critic 64-64)."""
    net_arch = f"{{net_arch:{{pi:[{','.join(map(str, arch))}],vf:[64,64]}}}}"
    return compose_config(["env=cartpole", f"+algo.hyperparams.policy_kwargs={net_arch}", *overrides], policies)


def cnn_config(policies: Path) -> Any:
    """The quarl config of the Nature-CNN PPO policy on Breakout."""
    return compose_config([f"env={CNN_ENV}", f"train.steps={CNN_STEPS}"], policies)


def network_config(name: str, policies: Path) -> Any:
    """The quarl config of the network `name` (a key of MLPS or TUNED, or CNN)."""
    if name == CNN:
        return cnn_config(policies)
    if name in TUNED:
        return compose_config(TUNED[name], policies)
    arch, overrides = MLPS[name]
    return config(arch, overrides, policies)


def train(name: str, policies: Path) -> tuple[str, float, bool]:
    """Train (or find in the cache) the policy `name`, on one thread; returns (name, seconds, trained)."""
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.WARNING)
    start = time.perf_counter()
    policy = obtain(network_config(name, policies), policies)
    return name, time.perf_counter() - start, policy.trained


def cartpole_obs(n: int = 512, seed: int = 1) -> np.ndarray:
    """CartPole states from random-action episodes (calibration / example observations)."""
    return random_observations("CartPole-v1", n, seed)


def episodes_reward(act, episodes: int, seed: int) -> float:
    """Mean return of `episodes` CartPole-v1 episodes, episode i reset with quarl's evaluation seed
    i (`quarl.evaluate.episodes.episode_seeds`), all stepped side by side through `act` (batched)."""
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


def capped(env_cfg: Any, frames: int) -> Any:
    """A copy of an Atari env config whose episodes end after `frames` emulator frames."""
    env_cfg = OmegaConf.create(OmegaConf.to_container(env_cfg, resolve=True))
    env_cfg.kwargs.max_episode_steps = frames
    return env_cfg


class RandomActions:
    """Uniformly random actions behind SB3's `predict` signature: the random-policy baseline."""

    def __init__(self, env_cfg: Any, seed: int = 0) -> None:
        env = make_env(env_cfg)
        self.space = env.action_space
        env.close()
        self.space.seed(seed)

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> tuple[np.ndarray, None]:
        return np.array([self.space.sample() for _ in range(len(obs))]), None


def atari_reward(env_cfg: Any, episodes: int) -> Callable[[Any], float]:
    """Mean raw game score over quarl's `episodes` seeded evaluation episodes of `env_cfg` (seed 0)."""
    return lambda actor: evaluate(actor, env_cfg, episodes, seed=0).mean


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


def ptq(net: ActingNetwork, bits: int) -> ActingNetwork:
    """A copy of `net` with quarl's PTQ at `bits` (its defaults: affine, per tensor, biases kept):
    the weights `quantize_policy` gives the same layers."""
    net = copy.deepcopy(net)
    with torch.no_grad():
        for layer in net.body.modules():
            if isinstance(layer, LAYER_TYPES):
                layer.weight.copy_(fake_quantize(layer.weight, bits))
    return net


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


def edge_runners(net: ActingNetwork, calibration: np.ndarray) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """The full-integer runners of `net` (`tflite` where ai-edge-litert is installed, `c` where a host
    cc is) and their flash / RAM bytes; a missing one is said once, not a failure."""
    from quarl.deploy.edge.targets import target
    from quarl.errors import QuarlError

    runners: dict[str, Any] = {}
    sizes: dict[str, dict[str, float]] = {}
    for backend in EDGE:
        try:
            runners[backend] = compile_network(net, backend, calibration)
        except QuarlError as exc:
            print(f"- no {backend} row: {exc}")
    if "c" in runners:  # the C policy with 4-bit weights, packed two to a byte or Huffman-coded
        from quarl.deploy.edge.runners import CRunner

        for coding in WEIGHT_CODINGS:
            integer = dataclasses.replace(integer_policy(net, calibration, weight_bits=4), weight_coding=coding)
            runners[f"c [int4 {coding}]"] = CRunner(net, integer)
    sized = target(SIZES_TARGET)
    missing = sized.missing()
    if missing is not None and any(name.startswith("c") for name in runners):
        print(f"- no {sized.name} sizes: {missing}")
    for name, runner in runners.items():
        if name.startswith("tflite"):
            from quarl.deploy.edge.tflite import MicroPolicy

            try:
                arena = MicroPolicy(runner.model, runner.integer).arena_bytes
            except QuarlError:
                arena = None
            sizes[name] = {"flash bytes": len(runner.model), "RAM bytes": float("nan") if arena is None else arena}
        elif missing is None:
            footprint = sized.footprint(runner.integer)
            sizes[name] = sizes[native_name(name)] = {"flash bytes": footprint.flash, "RAM bytes": footprint.ram}
    return runners, sizes


def spread(states: np.ndarray, k: int) -> np.ndarray:
    """At most `k` of `states`, evenly spaced."""
    return states[np.unique(np.linspace(0, len(states) - 1, min(k, len(states))).astype(int))]


def multiply_accumulates(integer: Any) -> int:
    """Multiply-accumulates of one action of an integer policy: every layer's weights (64x64 CartPole:
    4 x 64 + 64 x 64 + 64 x 2 = 4,480)."""
    return sum(int(np.prod(layer.weight.shape)) for layer in integer.layers)


def firmware_rows(label: str, policies: dict[str, Any], states: np.ndarray) -> list[dict[str, Any]]:
    """Each C policy of `policies` (name: integer policy) in the minimal firmware of every registered
    microcontroller target (`TARGETS`) whose tools are installed: linked flash and RAM, instructions per
    action and per multiply-accumulate under QEMU, its actions checked on `states`."""
    from quarl.deploy.edge.targets import TARGETS

    rows = []
    for target in TARGETS.values():
        missing = target.missing()
        if missing is not None:
            print(f"- no {target.name} row: {missing}")
            continue
        check, count = spread(states, TARGET_CHECK_STATES), spread(states, TARGET_COUNT_STATES)
        for name, integer in policies.items():
            firmware = target.firmware(integer, check, count)
            same = np.all((np.asarray(firmware.actions) == integer.act(check)).reshape(len(check), -1), axis=1)
            rows.append({"network": label, "C policy": name, "target": target.title,
                         "float arithmetic": target.float_note, "flash B": firmware.flash, "RAM B": firmware.ram,
                         "instructions / action": round(firmware.instructions),
                         "instructions / MAC": round(firmware.instructions / multiply_accumulates(integer), 2),
                         "actions as the reference under QEMU": f"{int(same.sum())} of {len(check)}"})
    return rows


def native_name(name: str) -> str:
    """The table name of a C runner timed in C: "c (native)", "c (native) [int4 huffman]"."""
    base, _, tag = name.partition(" [")
    return f"{base} (native)" + (f" [{tag}" if tag else "")


class NativeC:
    """Stands in for a runner in the table: the C policy timed in C (ns per policy_act call)."""

    def __init__(self, runner: Any, obs: np.ndarray) -> None:
        self.runner, self.obs = runner, obs
        self.backend, self.precision, self.nbytes = f"{runner.backend} (native)", runner.precision, runner.nbytes

    def latency(self, rounds: int) -> dict[str, float]:
        per_call = [self.runner.c.native_ns(self.obs, repeats=200) / 1e6 for _ in range(max(rounds, 3))]
        return {"median_ms": statistics.median(per_call), "p90_ms": max(per_call)}


def bench_network(label: str, net: ActingNetwork, example: np.ndarray, reward: Optional[Callable[[Runner], float]],
                  rounds: int, budget_s: float,
                  calibration: Optional[np.ndarray] = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One table row per backend of `net`: latency (on `example`), bytes and, given `reward`, the
    reward of the policy executed with that backend (`example` also calibrates static int8). With
    `calibration` (the fp32 policy's calibration states), the full-integer edge rows too, and the
    C policies' rows per microcontroller target (`firmware_rows`, second list)."""
    logging.getLogger("quarl.deploy.execution").setLevel(logging.ERROR)  # auto's choice is a table column
    runners: dict[str, Any] = {b: compile_network(net, b, example) for b in BACKENDS}
    runners[REFERENCE] = TorchDynamicInt8(net)
    policies = {name: "fp32" for name in runners}
    quantized = {bits: ptq(net, bits) for bits in {b for _, b in NBITS_ROWS}}
    for backend, bits in NBITS_ROWS:
        name = f"{backend} [{bits}-bit]"
        runners[name], policies[name] = compile_network(quantized[bits], backend, example), f"PTQ {bits}-bit"
    sizes: dict[str, dict[str, float]] = {}
    if calibration is not None:
        edge, sizes = edge_runners(net, calibration)
        runners.update(edge)
        policies.update({name: EDGE_POLICIES.get(name, "fp32 -> full int8") for name in edge})
    targets: list[dict[str, Any]] = []
    if calibration is not None and "c" in runners and weights_of(net) <= TARGET_MAX_WEIGHTS:
        c_policies = {name: runners[name].integer for name in runners if name == "c" or name.startswith(("c_", "c ["))}
        targets = firmware_rows(label, c_policies, calibration)
    times = latency(runners, example, rounds, budget_s)
    for name in [n for n in runners if n == "c" or n.startswith(("c_", "c ["))]:
        native = NativeC(runners[name], calibration[:256] if calibration is not None else example)
        times[native_name(name)], runners[native_name(name)] = native.latency(rounds), native
        policies[native_name(name)] = policies[name]
    base, int8 = times["torch"]["median_ms"], times["onnx_int8"]["median_ms"]
    fp32_bytes = runners["torch"].nbytes
    rows = []
    for name, r in runners.items():
        row = {
            "network": label,
            "policy": policies[name],
            "backend": f"auto -> {r.backend}" if name.startswith("auto") else name.split(" [")[0],
            "precision": r.precision,
            "median ms": times[name]["median_ms"],
            "p90 ms": times[name]["p90_ms"],
            "speedup": base / times[name]["median_ms"],
            "vs int8": int8 / times[name]["median_ms"],
            "bytes": r.nbytes,
            "x smaller": fp32_bytes / r.nbytes,
            "flash bytes": sizes.get(name, {}).get("flash bytes", float("nan")),
            "RAM bytes": sizes.get(name, {}).get("RAM bytes", float("nan")),
        }
        if reward is not None:
            row["reward"] = reward(r.runner if isinstance(r, NativeC) else r)
        rows.append(row)
    return rows, targets


def host_ratio(network: str, here: pd.DataFrame) -> Optional[str]:
    """The int8 C policy against onnx_int8 (batch 1, side by side in this run): timed in C and called from
    Python, with the path the host build takes (AVX2 or the portable C; a CPython function or ctypes)."""
    from quarl.deploy.edge import cavx2, cfast
    from quarl.deploy.edge.toolchain import tool

    wanted = {"c (native)": "fp32 -> full int8", "c": "fp32 -> full int8", "onnx_int8": "fp32"}
    rows = [here[(here.backend == backend) & (here.policy == policy)] for backend, policy in wanted.items()]
    if not all(len(r) for r in rows):
        return None
    native, called, ort = (float(r["median ms"].iloc[0]) * 1e3 for r in rows)
    c = rows[0].iloc[0]
    path = (f"{'AVX2' if cavx2.host_vector(tool('cc')) else 'portable C'}, called "
            f"{'as a CPython function' if cfast.include() else 'through ctypes'}")
    return (f"- {network}: C policy ({path}) {native:.3g} us per action in C, {ort / native:.1f}x onnx_int8's "
            f"{ort:.3g} us through Python; {called:.3g} us called from Python, {ort / called:.1f}x (issue 58's goal: "
            f">= 15x); {float(c['speedup']):.0f}x fp32 eager torch; flash {float(c['flash bytes']):.0f} B, "
            f"RAM {float(c['RAM bytes']):.0f} B")


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
        int8 = ours[(ours.backend == "onnx_int8") & (ours.policy == "fp32")].iloc[0]
        rows.append({"policy": p["policy"], "network": label, "paper fp32 ms (RPi 3b)": p["fp32_time_ms"],
                     "paper int8 ms": p["int8_time_ms"], "paper speedup": p["speedup"],
                     "ours fp32 ms": fp32["median ms"], "ours int8 ms": int8["median ms"], "ours speedup": int8["speedup"]})
    return pd.DataFrame(rows)


def untrained(name: str, policies: Path) -> Any:
    """An untrained PPO policy shaped like the network `name` (latency and bytes only)."""
    if name == CNN:
        return PPO("CnnPolicy", make_env(cnn_config(policies).env), seed=0, device="cpu")
    if name in TUNED:
        return PPO("MlpPolicy", make_env(network_config(name, policies).env), seed=0, device="cpu")
    arch, _ = MLPS[name]
    return PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=dict(pi=arch, vf=[64, 64])), seed=0, device="cpu")


def trained_models(names: list[str], policies: Path, jobs: int) -> dict[str, Any]:
    """The policies `names` from quarl's cache, trained first (in `jobs` processes) where missing."""
    with ProcessPoolExecutor(max_workers=jobs) as pool:  # the longest first
        for name, seconds, trained in pool.map(train, names[::-1], [policies] * len(names)):
            print(f"{name}: {'trained in' if trained else 'loaded from the cache in'} {seconds:.0f} s")
    return {name: obtain(network_config(name, policies), policies).load() for name in names}


def obs_transform_of(name: str, policies: Path) -> Any:
    """The cached policy's observation normalisation (VecNormalize's normalize_obs), or None."""
    if name not in TUNED:
        return None
    return obtain(network_config(name, policies), policies).obs_transform()


def weights_of(net: ActingNetwork) -> int:
    return sum(m.weight.numel() for m in net.body.modules() if isinstance(m, LAYER_TYPES))


def calibration_states(model: Any, name: str, policies: Path, transform: Any) -> np.ndarray:
    """The states the fp32 policy visits in quarl's calibration episodes (5, seed 0, disjoint from the
    10 evaluation seeds), as `quant.backend=c|tflite` records calibrate."""
    from quarl.deploy.edge import visited_states

    env_cfg = network_config(name, policies).env
    return visited_states(model, env_cfg, calibration_seeds(0, 5, 10), transform)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", type=Path, default=ROOT / "outputs" / "policies", help="quarl policy cache")
    parser.add_argument("--episodes", type=int, default=10, help="seeded CartPole episodes per backend")
    parser.add_argument("--cnn-episodes", type=int, default=10, help="seeded Breakout episodes per backend")
    parser.add_argument("--cnn-frames", type=int, default=10_000, help="emulator frames per Breakout episode at most")
    parser.add_argument("--jobs", type=int, default=2, help="policies trained in parallel (one thread each)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved latency rounds")
    parser.add_argument("--budget", type=float, default=1.5, help="seconds of timed calls per backend and network")
    parser.add_argument("--no-reward", action="store_true", help="latency and bytes only: train nothing")
    parser.add_argument("--no-edge", action="store_true", help="no full-integer rows (tflite, c)")
    parser.add_argument("--networks", default=",".join([*MLPS, *TUNED, CNN]), help="comma-separated networks")
    deploy_goals.add_arguments(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    start = time.perf_counter()
    if args.quick:  # the goals table alone
        deploy_goals.quick(sys.modules[__name__], args)
        print(f"\n{time.perf_counter() - start:.0f} s in all")
        return

    names = [n.strip() for n in args.networks.split(",")]
    known = [*MLPS, *TUNED, CNN]
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"--networks: {', '.join(unknown)} not known: choose from {', '.join(known)}")
    if args.no_reward:
        models = {name: untrained(name, args.policies) for name in names}
    else:
        models = trained_models(names, args.policies, args.jobs)

    torch.set_num_threads(1)
    cnn_env = cnn_config(args.policies).env
    eval_env = capped(cnn_env, args.cnn_frames)
    cartpole_reward = partial(episodes_reward, episodes=args.episodes, seed=0)
    rows, target_rows = [], []
    for name, model in models.items():
        transform = None if args.no_reward else obs_transform_of(name, args.policies)
        net = acting_network(model, transform)
        if name == CNN:
            example, reward = random_observations(cnn_env, 256), atari_reward(eval_env, args.cnn_episodes)
        elif name in TUNED:
            env_cfg = network_config(name, args.policies).env
            example = random_observations(env_cfg, 512, seed=1)
            reward = partial(lambda runner, env_cfg: evaluate(runner, env_cfg, args.episodes, seed=0).mean,
                             env_cfg=env_cfg)
        else:
            example, reward = cartpole_obs(), cartpole_reward
        calibration = None
        if not args.no_edge and name != CNN and weights_of(net) <= EDGE_MAX_WEIGHTS:
            calibration = (
                calibration_states(model, name, args.policies, transform) if not args.no_reward else example
            )
        network_rows, network_targets = bench_network(name, net, example, None if args.no_reward else reward,
                                                      args.rounds, args.budget, calibration)
        rows, target_rows = rows + network_rows, target_rows + network_targets
    table = pd.DataFrame(rows)

    print(f"\n## Deployment: batch 1, one thread ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, torch {torch.__version__})\n")
    if not args.no_reward:
        print(f"Reward: MLPs, mean return of {args.episodes} seeded CartPole-v1 episodes; Nature CNN, PPO trained "
              f"{CNN_STEPS} steps on {cnn_env.id}, mean game score of {args.cnn_episodes} seeded episodes, each "
              f"capped at {args.cnn_frames} emulator frames (env.kwargs.max_episode_steps), int8 calibrated "
              "on 256 real frames.\n")
    print(table.to_markdown(index=False, floatfmt=".4g"))
    if target_rows:
        print("\n## The C policies on microcontroller targets (linked firmware, QEMU; an instruction is not a "
              "cycle)\n")
        print(pd.DataFrame(target_rows).to_markdown(index=False, floatfmt=".4g"))
    published = published_vs_ours(table)
    if published is not None:
        print("\n## Published (Raspberry Pi 3b, ARM A53) vs here (x86, onnx_int8 vs fp32 eager torch)\n")
        print(published.to_markdown(index=False, floatfmt=".4g"))

    print("\n## Checks\n")
    rows_of = {(r["network"], r["backend"].split(" -> ")[0], r["policy"]): r for r in table.to_dict("records")}
    if "MLP 3x2048" in names:
        int8 = rows_of["MLP 3x2048", "onnx_int8", "fp32"]
        int4 = rows_of["MLP 3x2048", "onnx_int4", "PTQ 4-bit"]
        int2 = rows_of["MLP 3x2048", "onnx_int2", "PTQ 2-bit"]
        print(f"- MLP 3x2048 int8 vs fp32 eager: {int8['speedup']:.2f}x faster (target >= 3x), "
              f"{int8['x smaller']:.2f}x smaller (limit 4x)")
        print(f"- int4 vs int8, 3x2048, batch 1: {int4['vs int8']:.2f}x faster (target >= 1.5x; "
              "benchmarks/bench_int4.py compares ONNX Runtime's settings); vs fp32 eager "
              f"{int4['speedup']:.2f}x faster, {int4['x smaller']:.2f}x smaller (target about 8x, limit 8x)")
        print(f"- MLP 3x2048 int2 vs int4: {int4['median ms'] / int2['median ms']:.2f}x faster; vs int8 "
              f"{int2['vs int8']:.2f}x, {int2['x smaller']:.2f}x smaller than fp32")
    for row in table[table.backend.str.startswith("auto")].to_dict("records"):
        verdict = "ok" if row["speedup"] >= 1 else "SLOWER than fp32 eager"
        print(f"- {row['network']} ({row['policy']} policy): auto runs {row['backend'].split(' -> ')[1]} at "
              f"{row['speedup']:.2f}x fp32 eager ({verdict})")
    if not args.no_reward and CNN in names:
        cnn = table[table.network == CNN].set_index("backend")["reward"]
        random_score = atari_reward(eval_env, args.cnn_episodes)(RandomActions(eval_env))
        print(f"- {CNN} on {cnn_env.id}: reward fp32 {cnn['torch']:.4g}, int8 (onnx_int8) {cnn['onnx_int8']:.4g}, "
              f"random actions {random_score:.4g} (same episodes)")
    natives = table[table.backend.str.endswith("(native)")]
    for network in natives.network.unique():
        here = table[table.network == network]
        line = host_ratio(network, here)
        if line is not None:
            print(line)
        for row in here[(here.backend == "c (native)") & here.policy.str.contains("int4")].to_dict("records"):
            reward = f", reward {row['reward']:.4g}" if "reward" in row else ""
            target = " (target <= 3072 B)" if network.startswith("PPO CartPole") else ""
            print(f"- {network}: C policy, {row['policy'].split(', ')[1]}: flash {row['flash bytes']:.0f} B{target}, "
                  f"RAM {row['RAM bytes']:.0f} B, "
                  f"{row['median ms'] * 1e3:.3g} us per action in C{reward}")
    deploy_goals.run_goals(sys.modules[__name__], table, target_rows, models, args)
    print(f"\n{time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
