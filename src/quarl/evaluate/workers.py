"""Evaluation episodes run whole in worker processes, for policies whose episodes are expensive.

On Atari, the emulator and its preprocessing take as long as the policy's CNN, so one process
stepping episodes in turn leaves every other core idle. Here each worker, forked from the
evaluating process (so it shares the acting network already built there), makes its own env and
plays whole episodes, episode i reset with its own seed: the same actions, from the same
observations, as `quarl.evaluate.episodes`'s in-process loop, so the rewards do not depend on the number
of workers. Where `fork` is not available, evaluation stays in process.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np
import torch

from quarl.errors import TERMINATING, raise_terminated
from quarl.evaluate.fastenvs import eval_env

Actor = Callable[[list[np.ndarray]], Sequence[Any]]

# What the forked workers play: set just before the fork, read (not pickled) by the workers.
_JOB: dict[str, Any] = {}
_ENV: list[Any] = []  # the worker's env, made on its first episode


def available() -> bool:
    """Whether this platform can fork workers."""
    return "fork" in mp.get_all_start_methods()


def cores() -> int:
    """The cores this process may run on (a launcher's or cgroup's allotment included)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1


def _quiet_end() -> None:
    """A worker ends at the pool's SIGTERM as the signal's default does, at once and silently: the
    run's handler (`quarl.errors.ending_like_ctrl_c`), inherited through the fork, would raise in the
    worker and print its traceback. Other dispositions (an ignored SIGHUP under nohup) stay."""
    for signum in TERMINATING:
        if signal.getsignal(signum) is raise_terminated:
            signal.signal(signum, signal.SIG_DFL)


def _episode(episode: int) -> tuple[int, float, int, list[np.ndarray]]:
    """Play one seeded episode in this worker: (episode, return, length, sampled observations)."""
    if not _ENV:
        torch.set_num_threads(1)
        _ENV.append(eval_env(_JOB["env_cfg"], _JOB["env_engine"]))
    env, act, sample = _ENV[0], _JOB["act"], _JOB["sample"]
    obs = env.reset(seed=_JOB["seeds"][episode])[0]
    total, length, done = 0.0, 0, False
    while not done:
        if sample is not None:
            sample.offer(episode, obs)
        obs, reward, terminated, truncated, _ = env.step(act([obs])[0])
        total, length, done = total + float(reward), length + 1, terminated or truncated
    return episode, total, length, sample.kept[episode] if sample is not None else []


def play(
    act: Actor, env_cfg: Any, seeds: list[int], workers: int, sample: Optional[Any], env_engine: str = "auto"
) -> Iterator[tuple[int, float, int, list[np.ndarray]]]:
    """(episode, return, length, sampled observations) of every seeded episode, as workers finish
    them, on envs from `quarl.evaluate.fastenvs.eval_env`; `sample` is a
    `quarl.evaluate.episodes.StateSample` (its per-episode seeds make the draw the same)."""
    _JOB.update(act=act, env_cfg=env_cfg, seeds=seeds, sample=sample, env_engine=env_engine)
    try:
        with mp.get_context("fork").Pool(workers, initializer=_quiet_end) as pool:
            yield from pool.imap_unordered(_episode, range(len(seeds)))
    finally:
        _JOB.clear()
