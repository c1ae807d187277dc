"""Environment and evaluation throughput, measured side by side in one run on one thread.

1. Env steps/s per suite, one representative env each (random actions, auto-reset): the raw
   Gymnasium env (`gym.make(id)`) vs quarl's `make_env` with the suite's preprocessing, and their
   ratio (the cost of the preprocessing). The two are measured in alternating rounds so that drift
   of a shared machine hits both alike. On Atari a quarl step is 4 emulator frames (frame skip),
   so the table also gives the ratio per emulator frame.
2. Evaluation episodes/s with `quarl.evaluate.episodes.evaluate` (4 episodes stepped side by side, batched
   inference) for fp32 SB3 `predict`, PTQ 8-bit fake quantization (SB3 `predict` on quantized
   weights), real int8 execution (`onnx_int8`) and quarl's default backend (`auto`), on
   (a) a PPO CartPole-v1 policy from quarl's policy cache (trained once, 50k steps; it balances
   for all 500 steps, so every episode is equally long) and (b) an untrained PPO CnnPolicy on
   Atari Pong with episodes capped (`env.kwargs.max_episode_steps`, in emulator frames).
   Backends alternate round by round, as in 1.

Only ratios are meaningful: absolute rates depend on the machine and its load.

Usage: python benchmarks/bench_envs.py [--steps 5000] [--episodes 10] [--atari-episodes 4] [--atari-frames 2000]
       [--rounds 3] [--policies DIR]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import contextlib
import copy
import logging
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import gymnasium as gym
import numpy as np
import pandas as pd
import torch
from hydra import compose, initialize_config_dir
from stable_baselines3 import PPO

from quarl.app import CONF_DIR
from quarl.config import schema
from quarl.deploy import compile_policy
from quarl.evaluate.episodes import evaluate
from quarl.quantize.weights import quantize_policy
from quarl.rl.envs import make_env, random_observations, require_suite
from quarl.train.cache import obtain

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("bench_envs")

# suite -> its representative env config
REPRESENTATIVES: dict[str, str] = {
    "classic": "cartpole",
    "box2d": "box2d/bipedalwalker",
    "atari": "atari/pong",
    "bullet": "bullet/halfcheetah",
    "mujoco": "mujoco/halfcheetah",
    "dmc": "dmc/cheetah_run",
}
ATARI_FRAME_SKIP = 4  # emulator frames per quarl Atari step (SB3's AtariWrapper)
CARTPOLE_PPO = ["algo=ppo", "env=cartpole", "train.steps=50000"]

Actor = Any  # an SB3 model or a quarl Runner: both have predict(obs, deterministic=...)


def config(*overrides: str) -> Any:
    """The quarl config `python run.py OVERRIDES` would run (seed 0, no progress bars)."""
    schema.register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=["seed=0", "train.progress=false", *overrides])


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one), with the core count."""
    name = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    return f"{name}, {os.cpu_count()} cores"


# ---------------------------------------------------------------- 1. env steps/s


def random_steps(env: gym.Env, steps: int) -> float:
    """Seconds taken by `steps` random-action steps of `env` (reset whenever an episode ends)."""
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    return time.perf_counter() - start


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Silence what C code writes straight to file descriptor 1 (PyBullet prints its build time and
    'argv[0]=' there), so the tables stay clean."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def seeded(env: gym.Env, seed: int) -> gym.Env:
    """`env`, reset and with its action space seeded."""
    env.action_space.seed(seed)
    env.reset(seed=seed)
    return env


def env_row(suite: str, env_name: str, steps: int, rounds: int) -> dict[str, Any]:
    """Steps/s of the raw and the quarl env of one suite, measured in alternating rounds."""
    env_cfg = config(f"env={env_name}").env
    with quiet_stdout():
        require_suite(env_cfg)  # registers the suite's ids for the raw gym.make
        envs = {"raw": seeded(gym.make(env_cfg.id), 0), "quarl": seeded(make_env(env_cfg), 0)}
    seconds = {name: 0.0 for name in envs}
    for _ in range(rounds):
        for name, env in envs.items():
            seconds[name] += random_steps(env, steps)
    for env in envs.values():
        env.close()
    raw, quarl = (steps * rounds / seconds[name] for name in ("raw", "quarl"))
    frames = ATARI_FRAME_SKIP if suite == "atari" else 1
    return {"suite": suite, "env": env_cfg.id, "raw steps/s": raw, "quarl steps/s": quarl,
            "quarl / raw": quarl / raw, "raw steps per quarl step": frames,
            "quarl / raw per raw step": quarl * frames / raw}


def env_table(steps: int, rounds: int) -> pd.DataFrame:
    """`env_row` for every suite's representative env."""
    rows = []
    for suite, env_name in REPRESENTATIVES.items():
        log.info("Stepping %s", env_name)
        rows.append(env_row(suite, env_name, steps, rounds))
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- 2. evaluation episodes/s


def actors(model: Any, quant: Any, example: np.ndarray, obs_transform: Any) -> dict[str, tuple[Actor, Any]]:
    """The ways of executing `model` compared, each with the observation transform evaluate applies
    (compiled runners normalise observations themselves)."""
    fake = copy.deepcopy(model)
    quantize_policy(fake, quant)
    auto = compile_policy(model, "auto", example, obs_transform=obs_transform)
    return {
        "fp32 (SB3 predict)": (model, obs_transform),
        f"PTQ {quant.bits}-bit fake quant (SB3 predict)": (fake, obs_transform),
        "int8 (onnx_int8)": (compile_policy(model, "onnx_int8", example, obs_transform=obs_transform), None),
        f"auto -> {auto.backend}": (auto, None),
    }


def eval_rows(label: str, ways: dict[str, tuple[Actor, Any]], env_cfg: Any, episodes: int,
              rounds: int) -> list[dict[str, Any]]:
    """Episodes/s and steps/s of `evaluate` for each way, in alternating rounds (same seeded
    episodes every round), with the ratio to the first way (fp32)."""
    wall = {name: 0.0 for name in ways}
    results: dict[str, Any] = {}
    for _ in range(rounds):
        for name, (actor, transform) in ways.items():
            results[name] = evaluate(actor, env_cfg, episodes, seed=0, obs_transform=transform)
            wall[name] += results[name].wall_s
    rows = []
    for name, ev in results.items():
        rows.append({"policy": label, "execution": name, "episodes/s": episodes * rounds / wall[name],
                     "steps/s": sum(ev.lengths) * rounds / wall[name], "mean reward": ev.mean})
    fp32 = rows[0]["episodes/s"]
    for row in rows:
        row["x fp32"] = row["episodes/s"] / fp32
    return rows


def cartpole_rows(policies: Path, episodes: int, rounds: int) -> list[dict[str, Any]]:
    """Evaluation throughput of the cached PPO CartPole policy (trained now if not cached)."""
    cfg = config(*CARTPOLE_PPO, f"store.policies={policies}")
    cached = obtain(cfg, policies)
    log.info("CartPole PPO policy %s", "trained" if cached.trained else "from the cache")
    transform = cached.obs_transform()
    example = random_observations(cfg.env, 256)
    ways = actors(cached.load(), cfg.quant, example, transform)
    return eval_rows("PPO CartPole-v1 (trained, 64-64)", ways, cfg.env, episodes, rounds)


def atari_rows(episodes: int, rounds: int, frames: int) -> list[dict[str, Any]]:
    """Evaluation throughput of an untrained PPO CnnPolicy on Pong, episodes capped at `frames`."""
    cfg = config("algo=ppo", "env=atari/pong", f"env.kwargs.max_episode_steps={frames}")
    model = PPO("CnnPolicy", make_env(cfg.env), seed=0, device="cpu")
    example = random_observations(cfg.env, 256)
    ways = actors(model, cfg.quant, example, None)
    label = f"PPO CnnPolicy Pong (untrained, {frames} frames/episode)"
    return eval_rows(label, ways, cfg.env, episodes, rounds)


def timed(what: str, fn: Callable[[], Any]) -> Any:
    """`fn()`, logging how long it took."""
    start = time.perf_counter()
    out = fn()
    log.info("%s: %.0f s", what, time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5000, help="env steps per env and round")
    parser.add_argument("--episodes", type=int, default=10, help="evaluation episodes per execution and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--atari-episodes", type=int, default=4, help="Pong evaluation episodes per execution and round")
    parser.add_argument("--atari-frames", type=int, default=2000, help="emulator frames per Pong evaluation episode")
    parser.add_argument("--policies", type=Path, default=ROOT / "outputs" / "policies", help="quarl policy cache")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("quarl.deploy.execution").setLevel(logging.ERROR)  # auto's choice is a table row
    torch.set_num_threads(1)
    start = time.perf_counter()

    envs = timed("env steps", lambda: env_table(args.steps, args.rounds))
    cartpole = timed("CartPole evaluation", lambda: cartpole_rows(args.policies, args.episodes, args.rounds))
    atari = timed("Atari evaluation", lambda: atari_rows(args.atari_episodes, args.rounds, args.atari_frames))

    where = f"{cpu_name()}, one thread, torch {torch.__version__}, gymnasium {gym.__version__}"
    print(f"\n## Env steps/s per suite: random actions, {args.steps} steps x {args.rounds} alternating rounds ({where})\n")
    print(envs.to_markdown(index=False, floatfmt=".4g"))
    print(f"\n## Evaluation throughput: quarl.evaluate.episodes, 4 envs side by side, {args.rounds} alternating rounds "
          f"of {args.episodes} CartPole / {args.atari_episodes} Pong episodes ({where})\n")
    print(pd.DataFrame(cartpole + atari).to_markdown(index=False, floatfmt=".4g"))
    print(f"\n{time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
