"""What a cell writes: its run context, its record (run fields, config, episodes, curve) and where
the record goes (the store and a JSON copy in the run dir)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from quarl.config.keys import MEASUREMENT, cell_key, policy_key, train_steps
from quarl.store import provenance
from quarl.store.record_files import write_json
from quarl.store.sqlite import Store

if TYPE_CHECKING:
    from quarl.evaluate.episodes import Evaluation


@dataclass
class Context:
    """Where a cell runs: its config, run dir, store and whether it is part of a sweep."""

    cfg: DictConfig
    run_dir: Path
    base_dir: Path
    multirun: bool

    def path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.base_dir / p

    @property
    def interactive(self) -> bool:
        return sys.stderr.isatty()


@dataclass
class Measured:
    """What a method that runs its whole cell itself (ActorQ) measured: the pipeline records it."""

    evaluation: Evaluation
    fields: dict[str, Any]  # run fields of the record
    curve: list[dict[str, float]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # further record parts (ActorQ: "actors")


def make_record(cfg: DictConfig, status: str, started: str, run_dir: Path, **fields: Any) -> dict[str, Any]:
    """A cell's record: `fields` become run fields; `evaluation` gives the reward fields and episodes."""
    commit, dirty = provenance.git_state()
    ev: Evaluation | None = fields.pop("evaluation", None)
    curve: list[dict[str, float]] = fields.pop("curve", [])
    config = _budget_resolved(cfg, OmegaConf.to_container(cfg, resolve=True))
    run = {
        "cell_key": cell_key(cfg),
        "status": status,
        "algo": cfg.algo.name,
        "env": cfg.env.name,
        "quant": cfg.quant.method,
        "policy_key": policy_key(cfg),
        "measurement": MEASUREMENT,
        "run_dir": str(run_dir),
        "git_commit": commit,
        "git_dirty": dirty,
        "versions": provenance.versions(),
        "host": provenance.host(),
        "started_at": started,
        "ended_at": provenance.now(),
        **fields,
    }
    episodes = []
    if ev is not None:
        run.update(
            reward_mean=ev.mean,
            reward_std=ev.std,
            reward_min=min(ev.rewards),
            reward_max=max(ev.rewards),
            n_episodes=len(ev.rewards),
            eval_time_s=ev.wall_s,
        )
        episodes = [
            {"episode": i, "seed": s, "reward": r, "length": n}
            for i, (s, r, n) in enumerate(zip(ev.seeds, ev.rewards, ev.lengths))
        ]
    return {"run": run, "config": config, "episodes": episodes, "curve": curve}


def _budget_resolved(cfg: DictConfig, config: Any) -> Any:
    """The stored config with a null `train.steps` as the budget it stands for (the algorithm's tuned
    `algo.n_timesteps`), so a budget has one name in every command; a pretrained policy keeps null."""
    train = config.get("train") if isinstance(config, dict) else None
    trained = cfg.get("policy") is None or cfg.policy.get("source", "train") == "train"
    if isinstance(train, dict) and train.get("steps") is None and trained and cfg.algo.get("n_timesteps") is not None:
        train["steps"] = train_steps(cfg)
    return config


def store_record(store: Store, record: dict[str, Any], json_copy: Path) -> None:
    """Write a record to the store and its JSON copy to the run dir."""
    store.write(record)
    write_json(record, json_copy)
