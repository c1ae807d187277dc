"""Foundation benchmarks, measured side by side in one run (absolute times drift on shared machines).

1. Evaluation throughput (episodes/s) of quarl's evaluator vs SB3's `evaluate_policy` on the same
   trained CartPole policy and the same number of episodes.
2. Overhead of the framework: wall time of `python run.py -m algo=dqn,a2c,ppo quant.bits=2,4,8`
   vs the same 3 trainings + 3 fp32 and 9 quantized evaluations written by hand in one script.
   Target: ratio <= 1.15 (the sweep's collation at the end is shown as its own row).

Usage: python benchmarks/bench_foundation.py [--steps 10000] [--episodes 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import pandas as pd
from omegaconf import OmegaConf
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

from quarl.evaluate import evaluate
from quarl.schema import EnvConfig

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = OmegaConf.structured(EnvConfig(name="cartpole", id="CartPole-v1"))

BY_HAND = textwrap.dedent(
    """
    import copy, sys
    from hydra import compose, initialize_config_dir
    from stable_baselines3.common.env_util import make_vec_env
    from quarl import algos, schema
    from quarl.app import CONF_DIR
    from quarl.envs import make_env
    from quarl.evaluate import evaluate
    from quarl.quantize import quantize_policy

    steps, episodes = int(sys.argv[1]), int(sys.argv[2])
    schema.register()
    for algo in ("dqn", "a2c", "ppo"):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[f"algo={algo}"])
        venv = make_vec_env(lambda: make_env(cfg.env), n_envs=cfg.algo.n_envs, seed=0)
        model = algos.build(cfg.algo, venv, seed=0, device="cpu", total_steps=steps)
        model.learn(total_timesteps=steps)
        evaluate(model, cfg.env, episodes=episodes, seed=0)
        for bits in (2, 4, 8):
            q = copy.deepcopy(model)
            quant = cfg.quant.copy()
            quant.bits = bits
            quantize_policy(q, quant)
            evaluate(q, cfg.env, episodes=episodes, seed=0)
    """
)


def bench_evaluator(episodes: int, repeats: int) -> pd.DataFrame:
    model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=0), seed=0, device="cpu",
                n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0)
    model.learn(30_000)

    def sb3(n_envs: int) -> float:
        env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=0) if n_envs > 1 else Monitor(gym.make("CartPole-v1"))
        start = time.perf_counter()
        evaluate_policy(model, env, n_eval_episodes=episodes, deterministic=True)
        return time.perf_counter() - start

    def ours(n_envs: int) -> float:
        return evaluate(model, CARTPOLE, episodes=episodes, seed=0, n_envs=n_envs).wall_s

    cases = {"SB3 evaluate_policy, 1 env": lambda: sb3(1), "SB3 evaluate_policy, 4 envs": lambda: sb3(4),
             "quarl evaluate, 1 env": lambda: ours(1), "quarl evaluate, 4 envs": lambda: ours(4)}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):  # interleaved, so drift hits every case alike
        for name, fn in cases.items():
            times[name].append(fn())
    base = statistics.median(times["SB3 evaluate_policy, 1 env"])
    rows = [{"evaluator": n, "episodes/s": episodes / statistics.median(t), "speed vs SB3 1 env": base / statistics.median(t)}
            for n, t in times.items()]
    return pd.DataFrame(rows)


def _timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def bench_sweep(steps: int, episodes: int) -> pd.DataFrame:
    sweep = [sys.executable, str(ROOT / "run.py"), "-m", "algo=dqn,a2c,ppo", "quant.bits=2,4,8",
             f"train.steps={steps}", f"eval.episodes={episodes}"]
    no_collate = "hydra.callbacks.collate.enabled=false"
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as tmp2:
        hand = _timed([sys.executable, "-c", BY_HAND, str(steps), str(episodes)], Path(tmp))
        bare = _timed([*sweep, no_collate], Path(tmp))
        again = _timed([*sweep, no_collate], Path(tmp))
        full = _timed(sweep, Path(tmp2))
    rows = [("3 trainings + 12 evaluations by hand", hand),
            ("run.py -m algo=dqn,a2c,ppo quant.bits=2,4,8 (collation off)", bare),
            ("same sweep again (all cells done)", again),
            ("the sweep with its end-of-sweep collation (plots, tables)", full)]
    return pd.DataFrame([{"what": w, "wall s": t, "ratio to by hand": t / hand} for w, t in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10_000, help="train.steps per algorithm")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    pd.set_option("display.width", 200)
    print("## Evaluation throughput, PPO CartPole-v1 policy,", args.episodes * 5, "episodes\n")
    print(bench_evaluator(args.episodes * 5, args.repeats).to_markdown(index=False, floatfmt=".2f"))
    print(f"\n## Sweep overhead, CartPole-v1, train.steps={args.steps}, eval.episodes={args.episodes}\n")
    print(bench_sweep(args.steps, args.episodes).to_markdown(index=False, floatfmt=".2f"))


if __name__ == "__main__":
    main()
