"""Evaluation: a fixed set of seeded episodes, stepped side by side.

Every action is computed from its own observation alone, so no number depends on how many episodes
run at once (`eval.n_envs`, not part of a cell's key):

- deterministic SB3 policies (fp32, PTQ, QAT) run their acting network one observation per call
  (`quarl.evaluate.greedy.GreedyActor`: the actions `predict` gives, without `predict`'s overhead);
- a policy that is executed for real (int8 ONNX Runtime, ActorQ actors) is called on one
  observation at a time, as it is deployed: dynamic int8 picks its activation scale per call, so a
  batch would quantize each episode's activations with a scale set by the other episodes;
- stochastic evaluation (`deterministic=False`) samples from `predict` on the batch of episodes in
  flight.

With `workers` > 1, deterministic episodes are played whole in forked worker processes
(`quarl.evaluate.workers`), with the same results: for image observations, where the env costs as
much as the network, `eval.workers` defaults to the cores the cell may use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.preprocessing import is_image_space

from quarl.errors import QuarlError
from quarl.evaluate import workers as eval_workers
from quarl.evaluate.fastenvs import eval_env
from quarl.evaluate.greedy import ENGINES, GreedyActor, greedy_actor
from quarl.progress import Progress
from quarl.rl.seeds import episode_seeds

ObsTransform = Callable[[np.ndarray], np.ndarray]


@dataclass
class Evaluation:
    """Per-episode results of one evaluation, in episode order."""

    rewards: list[float]
    lengths: list[int]
    seeds: list[int]
    wall_s: float
    states: Optional[np.ndarray] = None  # a seeded sample of the observations acted on (keep_states)

    @property
    def mean(self) -> float:
        return float(np.mean(self.rewards))

    @property
    def std(self) -> float:
        return float(np.std(self.rewards))


class StateSample:
    """Up to `per_episode` observations of each episode, drawn by reservoir sampling with a seed of
    their own per episode, so the sample does not depend on how episodes interleave (`n_envs`)."""

    def __init__(self, seed: int, episodes: int, per_episode: int) -> None:
        self.per_episode = per_episode
        self.rngs = [np.random.default_rng([seed, 0x57A7E, e]) for e in range(episodes)]
        self.kept: list[list[np.ndarray]] = [[] for _ in range(episodes)]
        self.seen = [0] * episodes

    def offer(self, episode: int, obs: np.ndarray) -> None:
        seen, kept = self.seen[episode], self.kept[episode]
        self.seen[episode] += 1
        if len(kept) < self.per_episode:
            kept.append(np.array(obs, copy=True))
            return
        slot = int(self.rngs[episode].integers(0, seen + 1))
        if slot < self.per_episode:
            kept[slot] = np.array(obs, copy=True)

    def states(self) -> np.ndarray:
        return np.stack([s for kept in self.kept for s in kept])


Actor = Callable[[list[np.ndarray]], Sequence[Any]]  # the observations of the episodes in flight -> their actions


def _per_observation(model: Any, deterministic: bool, obs_transform: Optional[ObsTransform]) -> Actor:
    def act(observations: list[np.ndarray]) -> list[Any]:
        batches = [obs[None] if obs_transform is None else obs_transform(obs[None]) for obs in observations]
        return [model.predict(batch, deterministic=deterministic)[0][0] for batch in batches]

    return act


def _batched(model: Any, deterministic: bool, obs_transform: Optional[ObsTransform]) -> Actor:
    def act(observations: list[np.ndarray]) -> Any:
        obs = np.stack(observations)
        return model.predict(obs_transform(obs) if obs_transform is not None else obs, deterministic=deterministic)[0]

    return act


def _greedy(actor: GreedyActor) -> Actor:
    def act(observations: list[np.ndarray]) -> list[np.ndarray]:
        return [actor.one(obs) for obs in observations]

    return act


def actor_for(
    model: Any,
    deterministic: bool = True,
    obs_transform: Optional[ObsTransform] = None,
    per_observation: bool = False,
    engine: str = "auto",
) -> Actor:
    """How `evaluate` computes the actions of a batch of raw observations (see the module docstring).

    `engine`: "auto" (GreedyActor's choice), "onnx" or "torch" for deterministic SB3 policies, or
    "predict": SB3's `predict` on the whole batch, as quarl evaluated before (results then depend
    on `n_envs` in the last bits).
    """
    if engine not in (*ENGINES, "predict"):
        raise QuarlError(f"engine={engine} is not known: choose one of {', '.join((*ENGINES, 'predict'))}.")
    if per_observation:
        return _per_observation(model, deterministic, obs_transform)
    if not deterministic or engine == "predict":
        return _batched(model, deterministic, obs_transform)
    actor = greedy_actor(model, obs_transform, engine)
    if actor is not None:
        return _greedy(actor)
    if isinstance(model, BaseAlgorithm):  # a policy the acting network does not cover
        return _per_observation(model, deterministic, obs_transform)
    return _batched(model, deterministic, obs_transform)


def _interleave(
    act: Actor,
    env_cfg: Any,
    seeds: list[int],
    n_envs: int,
    sample: Optional[StateSample],
    rewards: list[float],
    lengths: list[int],
    bar: Progress,
    env_engine: str = "auto",
) -> None:
    """Step up to `n_envs` seeded episodes side by side in this process, filling rewards and lengths."""
    episodes = len(seeds)
    envs = [eval_env(env_cfg, env_engine) for _ in range(min(n_envs, episodes))]
    running: dict[int, tuple[int, Any]] = {}  # env slot -> (episode index, current observation)
    next_episode = 0
    try:
        for slot, env in enumerate(envs):
            running[slot] = (next_episode, env.reset(seed=seeds[next_episode])[0])
            next_episode += 1
        while running:
            slots = list(running)
            observations = [running[slot][1] for slot in slots]
            if sample is not None:
                for slot, ob in zip(slots, observations):
                    sample.offer(running[slot][0], ob)
            for slot, action in zip(slots, act(observations)):
                episode, _ = running[slot]
                ob, reward, terminated, truncated, _ = envs[slot].step(action)
                rewards[episode] += float(reward)
                lengths[episode] += 1
                if not (terminated or truncated):
                    running[slot] = (episode, ob)
                    continue
                bar.update(1, last_return=rewards[episode])
                if next_episode < episodes:
                    running[slot] = (next_episode, envs[slot].reset(seed=seeds[next_episode])[0])
                    next_episode += 1
                else:
                    del running[slot]
    finally:
        for env in envs:
            env.close()


def evaluate(
    model: Any,  # an SB3 model, or anything with its `predict` (a Runner, an ActorQ policy)
    env_cfg: Any,
    episodes: int,
    seed: int,
    n_envs: int = 4,
    deterministic: bool = True,
    obs_transform: Optional[ObsTransform] = None,
    progress: bool = False,
    desc: str = "evaluate",
    per_observation: bool = False,
    keep_states: int = 0,
    engine: str = "auto",
    workers: int = 1,
    env_engine: str = "auto",
) -> Evaluation:
    """Run `episodes` episodes, episode i reset with `episode_seeds(seed, episodes)[i]`.

    Up to `n_envs` episodes run at once; each action is computed from its own observation (SB3
    models through `quarl.evaluate.greedy.GreedyActor`, anything else with `per_observation` one `predict`
    call each), so the results do not depend on `n_envs` for deterministic policies; other objects
    with `predict` (and stochastic evaluation) get the batch of episodes in flight. `progress` shows
    a bar on a terminal and a log line every half minute elsewhere. With
    `keep_states`, about that many of the raw observations acted on are kept (an equal share per
    episode, seeded) in `Evaluation.states`. With `workers` > 1 (deterministic policies), that many
    forked processes play whole episodes instead (`quarl.evaluate.workers`), with the same results.
    `env_engine`: "auto" steps an env that gives Gymnasium's episodes bit for bit faster where there
    is one (`quarl.evaluate.fastenvs`: CartPole), "gymnasium" always Gymnasium's own.
    """
    seeds = episode_seeds(seed, episodes)
    torch.manual_seed(seed)
    act = actor_for(model, deterministic, obs_transform, per_observation, engine)
    sample = StateSample(seed, episodes, -(-keep_states // episodes)) if keep_states else None
    rewards, lengths = [0.0] * episodes, [0] * episodes
    start = time.perf_counter()
    bar = Progress(episodes, desc, unit="episode", enabled=progress)  # a bar on a terminal, else log lines
    try:
        if workers > 1 and episodes > 1 and deterministic and eval_workers.available():
            for episode, total, length, kept in eval_workers.play(
                act, env_cfg, seeds, min(workers, episodes), sample, env_engine
            ):
                rewards[episode], lengths[episode] = total, length
                if sample is not None:
                    sample.kept[episode] = kept
                bar.update(1, last_return=total)
        else:
            _interleave(act, env_cfg, seeds, n_envs, sample, rewards, lengths, bar, env_engine)
    finally:
        bar.close()
    states = sample.states() if sample is not None else None
    return Evaluation(rewards, lengths, seeds, time.perf_counter() - start, states)


def _observes_images(model: Any) -> bool:
    """Whether the policy acts on images (an SB3 model's observation space, a Runner's network)."""
    if isinstance(model, BaseAlgorithm):
        return is_image_space(model.observation_space)
    return len(getattr(getattr(model, "net", None), "obs_shape", ())) == 3


def default_workers(model: Any) -> int:
    """What `eval.workers: null` means: the cores this process may use for a policy acting on
    images (its env costs as much as its network), else 1 (forking costs more than it saves)."""
    return eval_workers.cores() if _observes_images(model) else 1


def eval_workers_of(cfg: Any, model: Any) -> int:
    """`eval.workers`, or where null: `default_workers`."""
    workers = cfg.eval.get("workers")
    return int(workers) if workers is not None else default_workers(model)


def evaluate_cell(model: Any, cfg: Any, obs_transform: Optional[ObsTransform] = None, **kw: Any) -> Evaluation:
    """`evaluate` with a cell's evaluation settings: its env, `eval.episodes` from the cell's seed,
    `eval.n_envs` side by side, `eval.workers` processes, `eval.deterministic` (and
    `+eval.env_engine=gymnasium` to step Gymnasium's own envs, with the same results)."""
    kw.setdefault("workers", eval_workers_of(cfg, model))
    kw.setdefault("env_engine", cfg.eval.get("env_engine", "auto"))
    return evaluate(
        model,
        cfg.env,
        episodes=cfg.eval.episodes,
        seed=cfg.seed,
        n_envs=cfg.eval.n_envs,
        deterministic=cfg.eval.deterministic,
        obs_transform=obs_transform,
        **kw,
    )
