"""Foundation benchmarks: the study loop's speed, every row a ratio measured side by side in one run
(absolute times drift on shared machines; the ratios are what to compare).

1. Evaluation: quarl's evaluator (the acting network, one observation per call, with the default
   `eval.workers`: worker processes for image observations) vs SB3's `evaluate_policy` with the
   same 4 envs, PPO on CartPole-v1 (and a DQN Nature-CNN on Pong where ale-py is installed, also
   against SB3 with the envs in a SubprocVecEnv), with whether quarl's rewards equal SB3's
   `predict` path on the same seeded episodes (each episode stepped with `predict`, one
   observation per call).
2. Sweep overhead: `run.py -m algo=dqn,a2c,ppo quant.bits=2,4,8` vs the same trainings and
   evaluations written by hand in one script (same torch thread count).
3. The same sweep again, every cell done: seconds per skipped cell.
4. A 72-cell sweep (`+sweep=ptq_classic seed=0,1,2`, tiny budgets) run again when done: skipped
   cells per second.
5. Two cells side by side vs one after the other (`train.threads`: 1 by default; torch's own
   default, one thread per core, for contrast).
6. A training checkpoint of SAC on Hopper with rl-zoo3's 1M-transition replay buffer, 1,000 and
   10,000 transitions in: quarl's (the filled rows) vs SB3's pickled buffer, seconds and bytes.

Usage: python benchmarks/bench_foundation.py [--steps 10000] [--episodes 10] [--repeats 3] [--quick]
       [--parts eval,sweep,skips,side,checkpoint]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pandas as pd
import torch
from omegaconf import OmegaConf
from stable_baselines3 import DQN, PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

from quarl.config.schema import EnvConfig
from quarl.evaluate.episodes import default_workers, evaluate
from quarl.evaluate.fastenvs import exact_env
from quarl.rl.envs import make_env
from quarl.store import query as results

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = OmegaConf.structured(EnvConfig(name="cartpole", id="CartPole-v1"))
PONG = OmegaConf.structured(EnvConfig(name="atari/pong", id="PongNoFrameskip-v4", suite="atari", frame_stack=4,
                                      kwargs={"max_episode_steps": 4000}))
ENV = {**os.environ, "HYDRA_FULL_ERROR": "1"}
QUIET = ["hydra.callbacks.collate.enabled=false", "train.progress=false", "eval.progress=false"]

BY_HAND = textwrap.dedent(
    """
    import sys, time, torch
    from hydra import compose, initialize_config_dir
    from quarl.rl import algos
    from quarl.config import schema
    from quarl.app import CONF_DIR
    from quarl.rl.envs import training_envs
    from quarl.evaluate.episodes import default_workers, evaluate
    from quarl.quantize.weights import quantize_policy

    steps, episodes = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(1)  # as a cell runs (train.threads)
    schema.register()
    learn_s = 0.0
    for algo in ("dqn", "a2c", "ppo"):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[f"algo={algo}"])
        venv = training_envs(cfg.env, cfg.algo.n_envs, seed=0)
        model = algos.build(cfg.algo, venv, seed=0, device="cpu", total_steps=steps)
        start = time.perf_counter()
        model.learn(total_timesteps=steps)
        learn_s += time.perf_counter() - start
        model.save(f"{algo}.zip")  # as the policy cache keeps it
        evaluate(model, cfg.env, episodes=episodes, seed=0)
        for bits in (2, 4, 8):
            q = type(model).load(f"{algo}.zip", device="cpu")
            quant = cfg.quant.copy()
            quant.bits = bits
            quantize_policy(q, quant)
            evaluate(q, cfg.env, episodes=episodes, seed=0)
    print(f"learn_s={learn_s}")
    """
)


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _predict_path(model, cfg, seeds: list[int]) -> list[float]:
    """Each seeded episode stepped with SB3's predict, one observation per call."""
    rewards = []
    for seed in seeds:
        env = make_env(cfg)
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, term, trunc, _ = env.step(model.predict(obs[None], deterministic=True)[0][0])
            total, done = total + float(reward), term or trunc
        env.close()
        rewards.append(total)
    return rewards


def _sb3_evaluate(model, venv, episodes: int) -> None:
    """SB3's evaluate_policy on `venv`, closed afterwards (a SubprocVecEnv's processes end)."""
    try:
        evaluate_policy(model, venv, n_eval_episodes=episodes, deterministic=True)
    finally:
        venv.close()


def _eval_rows(name: str, model, cfg, sb3_env: Callable[[], object], episodes: int, repeats: int,
               sb3_subproc: Optional[Callable[[], object]] = None) -> list[dict]:
    """quarl's evaluate as a cell runs it (`eval.workers` at its default), SB3's evaluate_policy with
    the same 4 envs (and in a SubprocVecEnv where given), quarl's old batched-predict path, and where
    quarl steps an exact env of its own (CartPole), quarl's evaluate on Gymnasium's envs."""
    workers = default_workers(model)
    ours = lambda: evaluate(model, cfg, episodes=episodes, seed=0, n_envs=4, workers=workers)  # noqa: E731
    theirs = lambda: _sb3_evaluate(model, sb3_env(), episodes)  # noqa: E731
    before = lambda: evaluate(model, cfg, episodes=episodes, seed=0, n_envs=4, engine="predict")  # noqa: E731
    cases = {"SB3 evaluate_policy, 4 envs": theirs, f"quarl evaluate, 4 envs, {workers} worker(s)": ours,
             "quarl before (batched predict), 4 envs": before}
    if exact_env(cfg) is not None:  # the same episodes on Gymnasium's own envs (quarl.evaluate.fastenvs)
        cases[f"quarl evaluate on Gymnasium's envs, 4 envs, {workers} worker(s)"] = lambda: evaluate(  # noqa: E731
            model, cfg, episodes=episodes, seed=0, n_envs=4, workers=workers, env_engine="gymnasium")
    if sb3_subproc is not None:
        cases["SB3 evaluate_policy, 4 envs in SubprocVecEnv"] = lambda: _sb3_evaluate(  # noqa: E731
            model, sb3_subproc(), episodes)
    times: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(repeats):  # interleaved, so drift hits every case alike
        for label, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - start)
    result = ours()
    same = result.rewards == _predict_path(model, cfg, result.seeds)
    base = statistics.median(times["SB3 evaluate_policy, 4 envs"])
    return [{"what": f"{name}: {label}", "episodes/s": episodes / statistics.median(t),
             "ratio to SB3": base / statistics.median(t),
             "rewards = predict path": ("yes" if same else "NO") if label.startswith("quarl evaluate") else ""}
            for label, t in times.items()]


def bench_evaluator(episodes: int, repeats: int, atari: bool) -> pd.DataFrame:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=0), seed=0, device="cpu",
                n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0)
    model.learn(30_000)
    rows = _eval_rows(f"PPO CartPole-v1, {episodes} episodes", model, CARTPOLE,
                      lambda: make_vec_env("CartPole-v1", n_envs=4, seed=0), episodes, repeats)
    if atari:
        cnn = DQN("CnnPolicy", make_env(PONG), seed=0, device="cpu", buffer_size=1000)

        def pong_env():
            return DummyVecEnv([lambda: make_env(PONG)] * 4)  # each env stacks its own frames, as quarl's do

        def pong_subproc():
            return SubprocVecEnv([lambda: make_env(PONG)] * 4)

        rows += _eval_rows("DQN Nature CNN, Pong (untrained), 4 episodes", cnn, PONG, pong_env, 4, repeats,
                           pong_subproc)
    return pd.DataFrame(rows)


def _timed(cmd: list[str], cwd: Path) -> float:
    return _timed_output(cmd, cwd)[0]


def _timed_output(cmd: list[str], cwd: Path) -> tuple[float, str]:
    cwd.mkdir(exist_ok=True)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=ENV)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start, done.stdout


def _training_s(store: Path) -> float:
    """Seconds the sweep's policies spent training (`train_time_s` of its fp32 records)."""
    runs = results.load(store)
    return float(runs.loc[runs["quant"] == "fp32", "train_time_s"].sum())


def _run(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "run.py"), *args]


def bench_sweep(steps: int, episodes: int, repeats: int) -> pd.DataFrame:
    """By hand and the sweep alternately, `repeats` times each in fresh folders (medians: DQN's
    training time drifts by tens of percent on a shared machine); then the finished sweep again,
    without and with its end-of-sweep collation."""
    sweep = _run("-m", "algo=dqn,a2c,ppo", "quant.bits=2,4,8", f"train.steps={steps}", f"eval.episodes={episodes}",
                 *QUIET)
    hands, sweeps, hand_learn, sweep_learn = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            took, out = _timed_output([sys.executable, "-c", BY_HAND, str(steps), str(episodes)], Path(tmp, f"hand{i}"))
            hands.append(took)
            hand_learn.append(float(out.split("learn_s=")[1]))
            sweeps.append(_timed(sweep, Path(tmp, f"sweep{i}")))
            sweep_learn.append(_training_s(Path(tmp, f"sweep{i}", "outputs/results.sqlite")))
        again = _timed(sweep, Path(tmp, "sweep0"))
        collated = _timed([a for a in sweep if a != QUIET[0]], Path(tmp, "sweep0"))
    hand, bare = statistics.median(hands), statistics.median(sweeps)
    rest_hand = statistics.median(t - learn for t, learn in zip(hands, hand_learn))
    rest_sweep = statistics.median(t - learn for t, learn in zip(sweeps, sweep_learn))
    rows = [(f"3 trainings + 12 evaluations by hand (median of {repeats})", hand, 1.0, "by hand"),
            (f"run.py -m algo=dqn,a2c,ppo quant.bits=2,4,8, collation off (median of {repeats})", bare, bare / hand,
             "by hand"),
            ("  by hand: training (model.learn)", statistics.median(hand_learn), None, ""),
            ("  the sweep: training (train_time_s of its fp32 records)", statistics.median(sweep_learn),
             statistics.median(sweep_learn) / statistics.median(hand_learn), "by hand's training"),
            ("  by hand: everything but training", rest_hand, None, ""),
            ("  the sweep: everything but training", rest_sweep, rest_sweep / rest_hand, "by hand's rest"),
            ("same sweep again, all 9 cells done: s per skipped cell", again / 9, None, ""),
            ("same sweep again, all done, with its end-of-sweep collation", collated, None, ""),
            ("  the collation alone (16 figures, tables)", collated - again, (collated - again) / bare, "the sweep")]
    return pd.DataFrame(rows, columns=["what", "s", "ratio", "ratio to"])


def bench_skips() -> pd.DataFrame:
    sweep = _run("-m", "+sweep=ptq_classic", "seed=0,1,2", "train.steps=300", "eval.episodes=2", *QUIET)
    with tempfile.TemporaryDirectory() as tmp:
        first = _timed(sweep, Path(tmp))
        again = _timed(sweep, Path(tmp))
        start = _timed([sys.executable, "-c", "import quarl.app, hydra_plugins.quarl_sweeper.quarl_sweeper"], Path(tmp))
    return pd.DataFrame([
        {"what": "+sweep=ptq_classic seed=0,1,2 (72 cells), first run, train.steps=300", "s": first,
         "cells/s": 72 / first},
        {"what": "the same again, all 72 done: skipped cells", "s": again, "cells/s": 72 / again},
        {"what": "  of which starting Python and importing quarl", "s": start, "cells/s": None},
        {"what": "  per skipped cell, s (72 cells, start-up included)", "s": again / 72, "cells/s": None},
    ])


def bench_side_by_side(steps: int) -> pd.DataFrame:
    """Two single cells (seeds 0 and 1) one after the other, then side by side."""
    def cell(seed: int, extra: list[str]) -> list[str]:
        return _run("algo=dqn", f"seed={seed}", f"train.steps={steps}", "eval.episodes=5", *QUIET, *extra)

    rows = []
    for label, extra in (("train.threads=1 (default)", []), (f"train.threads={os.cpu_count()} (torch's default)",
                                                              [f"train.threads={os.cpu_count()}"])):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            start = time.perf_counter()
            for seed, folder in ((0, a), (1, b)):
                subprocess.run(cell(seed, extra), cwd=folder, check=True, capture_output=True, env=ENV)
            sequential = time.perf_counter() - start
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            start = time.perf_counter()
            procs = [subprocess.Popen(cell(seed, extra), cwd=folder, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, env=ENV) for seed, folder in ((0, a), (1, b))]
            assert all(p.wait() == 0 for p in procs)
            side = time.perf_counter() - start
        rows.append({"what": f"2 DQN cells, {steps} steps, {label}", "one after the other s": sequential,
                     "side by side s": side, "ratio side by side / one after the other": side / sequential})
    return pd.DataFrame(rows)


def bench_checkpoint(repeats: int) -> pd.DataFrame:
    """quarl's checkpoint of an SAC Hopper training against the same with SB3's pickled replay buffer."""
    from stable_baselines3 import SAC

    from quarl.train import checkpoint

    def pickled(model, folder: Path) -> None:  # SB3's whole buffer, as quarl saved it before
        model.save_replay_buffer(folder / checkpoint.PICKLED_REPLAY_FILE)

    rows = []
    model = SAC("MlpPolicy", "Hopper-v5", buffer_size=1_000_000, learning_starts=100_000, seed=0, device="cpu")
    for filled in (1_000, 10_000):
        model.learn(filled - model.num_timesteps, reset_num_timesteps=False)
        row: dict[str, object] = {"what": f"SAC Hopper-v5, 1M-transition buffer, {filled} transitions in"}
        for label, replay in (("SB3 pickle", pickled), ("quarl rows", checkpoint.save_replay)):
            with tempfile.TemporaryDirectory() as tmp:
                row[f"{label} s"] = _median_time(functools.partial(replay, model, Path(tmp)), repeats)
                row[f"{label} MB"] = sum(f.stat().st_size for f in Path(tmp).iterdir()) / 1e6
        row["ratio quarl / SB3 (time)"] = row["quarl rows s"] / row["SB3 pickle s"]  # type: ignore[operator]
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10_000, help="train.steps per algorithm")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3, help="evaluation repeats")
    parser.add_argument("--sweep-repeats", type=int, default=2, help="sweep and by-hand runs, alternately")
    parser.add_argument("--quick", action="store_true", help="skip the Atari row and the side-by-side rows")
    parser.add_argument("--parts", default="eval,sweep,skips,side,checkpoint",
                        help="comma-separated: eval, sweep, skips, side, checkpoint")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    pd.set_option("display.width", 200)
    atari = not args.quick and importlib.util.find_spec("ale_py") is not None
    if "eval" in parts:
        print(f"## Evaluation throughput (torch threads 1; {os.cpu_count()} cores)\n")
        print(bench_evaluator(args.episodes * 5, args.repeats, atari).to_markdown(index=False, floatfmt=".2f"))
    if "sweep" in parts:
        print(f"\n## Sweep overhead, CartPole-v1, train.steps={args.steps}, eval.episodes={args.episodes}\n")
        print(bench_sweep(args.steps, args.episodes, args.sweep_repeats).to_markdown(index=False, floatfmt=".2f"))
    if "skips" in parts:
        print("\n## Skipping finished cells\n")
        print(bench_skips().to_markdown(index=False, floatfmt=".2f"))
    if "side" in parts and not args.quick:
        print("\n## Cells side by side\n")
        print(bench_side_by_side(min(args.steps, 3000)).to_markdown(index=False, floatfmt=".2f"))
    if "checkpoint" in parts:
        print("\n## Training checkpoints: the replay buffer\n")
        print(bench_checkpoint(args.repeats).to_markdown(index=False, floatfmt=".3f"))


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
