"""Keeping the best model of a training, as rl-zoo3's `EvalCallback` keeps `best_model.zip`.

With `train.keep_best=true` the policy is evaluated every `train.eval_every` env steps (and once at
the end) on `train.eval_episodes` greedy episodes whose seeds are disjoint from the study's
evaluation seeds; the parameters (and the observation-normalisation statistics) of the best
evaluation are kept and become the saved policy. Its step and reward are recorded in the policy's
`meta.json` (`kept`), next to every evaluation (`evaluations`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from typing import Any, Callable, Iterator, Optional, cast

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

from quarl.evaluate.episodes import ObsTransform, episode_seeds, evaluate
from quarl.quantize.fake_quant import QuantLayer

log = logging.getLogger(__name__)

STUDY_SEEDS = 10_000  # the keep-best episodes avoid the first this many study evaluation seeds
EVAL_STREAM = 0xB357  # the random stream the keep-best seed is drawn from


def eval_seed(seed: int, episodes: int) -> int:
    """The seed passed to `quarl.evaluate.episodes.evaluate` for keep-best evaluations of run `seed`: its
    `episodes` episode seeds share none of the study's first STUDY_SEEDS (any eval.episodes up to
    that many) and it is not the run seed itself."""
    study = set(episode_seeds(seed, STUDY_SEEDS))
    candidate = int(np.random.default_rng([seed, EVAL_STREAM]).integers(0, 2**31 - 1))
    while candidate == seed or study.intersection(episode_seeds(candidate, episodes)):
        candidate += 1
    return candidate


@contextlib.contextmanager
def as_saved(model: Any) -> Iterator[None]:
    """A QAT model computes as its saved policy will (fake quant on, ranges frozen, weight ranges from
    the current weights unless frozen on purpose), and evaluating it moves no range; no-op otherwise."""
    layers = [m for m in model.policy.modules() if isinstance(m, QuantLayer)]
    switches = [(fq, fq.enabled.clone(), fq.frozen.clone()) for layer in layers for fq in layer.fake_quants()]
    for layer in layers:
        for fq, tensor in ((layer.weight_fq, layer.layer.weight), (layer.bias_fq, layer.layer.bias)):
            if fq is not None and tensor is not None and not bool(fq.frozen):
                fq.observe(tensor)
    for fq, _, _ in switches:
        fq.enabled.fill_(True)
        fq.frozen.fill_(True)
    try:
        yield
    finally:
        for fq, enabled, frozen in switches:
            fq.enabled.copy_(enabled)
            fq.frozen.copy_(frozen)


class KeepBest(BaseCallback):
    """Evaluates the policy every `every` env steps (when a rollout starts, right after the gradient
    updates) and once when training ends, and keeps the best parameters and normalisation statistics.

    `eligible()` says whether the current model may be kept (QAT: once fake quantization is on);
    `on_eval(step, mean, std)` is told every evaluation (for the curve). The earliest of equal
    rewards is kept, as rl-zoo3 does."""

    def __init__(
        self,
        env_cfg: Any,
        seed: int,
        every: int,
        episodes: int,
        n_envs: int,
        eligible: Callable[[], bool] = lambda: True,
        on_eval: Optional[Callable[[int, float, float], None]] = None,
    ) -> None:
        super().__init__()
        self.env_cfg, self.every, self.episodes, self.n_envs = env_cfg, every, episodes, n_envs
        self.seed = eval_seed(seed, episodes)
        self.eligible, self.on_eval = eligible, on_eval
        self.evaluations: list[dict[str, Any]] = []
        self.best: Optional[dict[str, Any]] = None  # step, reward, std, params, obs_rms, ret_rms
        self.last_eval: Optional[int] = None

    def _on_training_start(self) -> None:
        if self.last_eval is None:
            self.last_eval = self.num_timesteps

    def _on_rollout_start(self) -> None:
        assert self.last_eval is not None  # set when training starts (or by a resumed state)
        if self.num_timesteps - self.last_eval >= self.every:
            self.evaluate_now()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        if not self.evaluations or self.evaluations[-1]["step"] != self.num_timesteps:
            self.evaluate_now()

    def evaluate_now(self) -> None:
        """Evaluate the current model; keep it if it is the best eligible one so far."""
        step = self.num_timesteps
        self.last_eval = step
        if not self.eligible():
            return
        venv = self.model.get_env()
        normalizer = venv if isinstance(venv, VecNormalize) else None
        # SB3 types normalize_obs for dict observations too; on Box observations it maps arrays to arrays
        normalize = cast(ObsTransform, normalizer.normalize_obs) if normalizer is not None else None
        state = np.random.get_state()
        # evaluate() seeds torch: the training's random streams must not move
        with torch.random.fork_rng(devices=[]), as_saved(self.model):
            ev = evaluate(
                self.model,
                self.env_cfg,
                self.episodes,
                self.seed,
                n_envs=self.n_envs,
                deterministic=True,
                obs_transform=normalize,
            )
        np.random.set_state(state)
        self.evaluations.append({"step": step, "reward": ev.mean, "std": ev.std})
        if self.best is None or ev.mean > self.best["reward"]:
            self.best = {
                "step": step,
                "reward": ev.mean,
                "std": ev.std,
                "params": {k: v.detach().cpu().clone() for k, v in self.model.policy.state_dict().items()},
                "obs_rms": copy.deepcopy(normalizer.obs_rms) if normalizer is not None else None,
                "ret_rms": copy.deepcopy(normalizer.ret_rms) if normalizer is not None else None,
            }
        log.info(
            "Evaluation at step %d: %.2f ± %.2f over %d episodes (best %.2f at step %d)",
            step,
            ev.mean,
            ev.std,
            self.episodes,
            self.best["reward"],
            self.best["step"],
        )
        if self.on_eval is not None:
            self.on_eval(step, ev.mean, ev.std)

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (the best so far survives a resume)."""
        return {"evaluations": self.evaluations, "best": self.best, "last_eval": self.last_eval}

    def load_state(self, state: dict[str, Any]) -> None:
        self.evaluations, self.best, self.last_eval = state["evaluations"], state["best"], state["last_eval"]

    def restore_best(self, model: Any) -> None:
        """Put the kept parameters (and its normalisation statistics) into `model` and its env."""
        if self.best is None:
            return
        model.policy.load_state_dict(self.best["params"])
        venv = model.get_env()
        if isinstance(venv, VecNormalize) and self.best["obs_rms"] is not None:
            venv.obs_rms, venv.ret_rms = copy.deepcopy(self.best["obs_rms"]), copy.deepcopy(self.best["ret_rms"])

    def summary(self, final_step: int) -> dict[str, Any]:
        """The `kept` entry of meta.json: the kept step, its reward, how it was evaluated, and the final model's."""
        final = self.evaluations[-1] if self.evaluations and self.evaluations[-1]["step"] == final_step else None
        if self.best is None:
            return {
                "step": final_step,
                "reward": None,
                "std": None,
                "episodes": self.episodes,
                "eval_seed": self.seed,
                "deterministic": True,
                "final_reward": None,
                "reason": "no evaluation was eligible: final model kept",
            }
        return {
            "step": self.best["step"],
            "reward": self.best["reward"],
            "std": self.best["std"],
            "episodes": self.episodes,
            "eval_seed": self.seed,
            "deterministic": True,
            "final_step": final_step,
            "final_reward": final["reward"] if final else None,
        }
