"""Pruning a search's trials on their training curve (`hydra.sweeper.pruner`, docs/sweeps.md#pruning).

A training run under quarl's Optuna sweeper reports its training return to the running trial that
waits for it, and stops when the trial's pruner says so. The job may run in another process or on
another machine (a launcher, SLURM), so it finds its trial through the study storage, not through
its config: before launching, the sweeper writes into each trial's user attribute `trains` the
policy key of every training its cells need, with the seed's index in the trial and the stage (0:
the fp32 policy, 1: the method's own, such as QAT). A training whose policy key a running trial
lists reports to it (the latest such trial, where two ask for one policy).

Only the trial's first seed reports: its training return, the mean of its last RECENT training
episodes, at each `reports`-th of the budget (step `stage * reports + k`, k = 1..reports), and
after each report it asks the pruner. A pruned training raises `Pruned` (nothing is saved into the
policy cache; its checkpoint stays); the cell's record is `pruned`, with the message `Pruned: ...`
(a later run of the cell runs it again).
The other seeds' trainings report nothing and stop as soon as they find their trial pruned.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from stable_baselines3.common.callbacks import BaseCallback

from quarl.config.keys import policy_key, train_steps
from quarl.store import studies
from quarl.train.curves import launch_dir

log = logging.getLogger(__name__)

RECENT = 20  # training episodes averaged into one report


class Pruned(Exception):
    """A training stopped because its trial was pruned (the cell's record says `Pruned: ...`)."""


@dataclass
class PruningTrial:
    """The trial a training reports to, and where the training sits in it."""

    study: Any  # optuna.Study, with the pruner the sweeper stored
    trial: Any  # optuna.trial.Trial
    seed_index: int  # 0: the trial's first seed, which reports
    stage: int  # 0: the fp32 policy; 1: the method's own (QAT)
    spec: dict[str, Any]  # the checked pruner settings, with `sign` (-1 where the objective is negated)

    @property
    def name(self) -> str:
        return f"trial {self.trial.number} of study {self.study.study_name}"


def _storage_of(cfg: Any) -> Optional[str]:
    """The study storage of the Optuna search this job belongs to; None outside one (or before its
    default storage exists)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return None
        sweeper = HydraConfig.get().sweeper
        if not str(sweeper.get("_target_", "")).endswith(".OptunaSweeper"):
            return None
        given = sweeper.get("storage")
    except Exception as exc:  # noqa: BLE001 - Hydra's config without the keys read here: not a search
        log.debug("Not in an Optuna search: %s", exc)
        return None
    store = Path(str(cfg.store.path)).expanduser()
    url = studies.storage_url(given, store if store.is_absolute() else launch_dir() / store)
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).exists():
        return None
    return url


def find_target(cfg: Any) -> Optional[PruningTrial]:
    """The running trial that waits for the training `cfg` describes, where pruning is on."""
    url = _storage_of(cfg)
    if url is None:
        return None
    import optuna

    key = policy_key(cfg)
    storage = studies.open_storage(url)
    running = (optuna.trial.TrialState.RUNNING,)
    found: Optional[tuple[Any, Any, list[int]]] = None
    for summary in storage.get_all_studies():
        if not summary.user_attrs.get(studies.PRUNER):
            continue
        for trial in storage.get_all_trials(summary._study_id, deepcopy=False, states=running):  # noqa: SLF001
            where = (trial.user_attrs.get(studies.TRAINS) or {}).get(key)
            if where is not None and (found is None or trial.number > found[1].number):
                found = (summary, trial, where)
    if found is None:
        return None
    summary, frozen, (seed_index, stage) = found
    spec = dict(summary.user_attrs[studies.PRUNER])
    study = optuna.load_study(study_name=summary.study_name, storage=storage, pruner=studies.build_pruner(spec))
    return PruningTrial(study, optuna.trial.Trial(study, frozen._trial_id), int(seed_index), int(stage), spec)  # noqa: SLF001


class ReportToTrial(BaseCallback):
    """Report the training return to the target trial and stop the training when it is pruned."""

    def __init__(self, target: PruningTrial, steps: int, seed: int) -> None:
        super().__init__()
        self.target: Optional[PruningTrial] = target
        self.steps, self.seed, self.reports = steps, seed, int(target.spec["reports"])
        self.recent: collections.deque[float] = collections.deque(maxlen=RECENT)
        self.next = 1

    def _on_training_start(self) -> None:  # a resumed training reports from where it resumed
        self.next = self.num_timesteps * self.reports // self.steps + 1
        self._at(0, ask=False)

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            if "episode" in info:
                self.recent.append(float(info["episode"]["r"]))
        return True

    def _on_rollout_start(self) -> None:
        k = self.num_timesteps * self.reports // self.steps
        if self.next <= k < self.reports:
            self.next = k + 1
            self._at(k, ask=True)

    def _on_training_end(self) -> None:
        self._at(self.reports, ask=False)

    def _at(self, k: int, ask: bool) -> None:
        """Report k (the first seed), or look whether the trial was pruned (the others); a storage
        that fails ends the reports, not the training."""
        target = self.target
        if target is None:
            return
        try:
            pruned = self._pruned_elsewhere(target) if target.seed_index else self._report(target, k, ask)
        except Exception as exc:  # noqa: BLE001 - the trial ended elsewhere, or its storage is gone: train on
            log.warning("No more reports to %s: %s", target.name, exc)
            self.target = None
            return
        if pruned:
            raise Pruned(f"{target.name} was {pruned}")

    def _pruned_elsewhere(self, target: PruningTrial) -> str:
        """Where the trial was pruned on its first seed ('' where it was not)."""
        attrs = target.study._storage.get_trial_user_attrs(target.trial._trial_id)  # noqa: SLF001
        return f"{studies.pruned_note(attrs)} (this is seed {self.seed})" if studies.PRUNED in attrs else ""

    def _report(self, target: PruningTrial, k: int, ask: bool) -> str:
        """Report the mean recent return as step `stage * reports + k`; where the pruner prunes the
        trial, mark it (for the sweeper and the other seeds) and say where."""
        if k == 0 or not self.recent:
            return ""
        mean = sum(self.recent) / len(self.recent)
        target.trial.report(target.spec.get("sign", 1) * mean, target.stage * self.reports + k)
        if not ask or not target.trial.should_prune():
            return ""
        at = {"seed": self.seed, "report": k, "of": self.reports, "step": self.num_timesteps, "return": mean}
        target.trial.set_user_attr(studies.PRUNED, at)
        note = studies.pruned_note({studies.PRUNED: at})
        log.info("%s is %s: this training stops (its checkpoint stays)", target.name.capitalize(), note)
        return note


def pruning_callback(cfg: Any) -> Optional[ReportToTrial]:
    """The callback that reports this training to its trial; None outside a search that prunes."""
    try:
        target = find_target(cfg)
    except Exception as exc:  # noqa: BLE001 - a storage that cannot be read prunes nothing
        log.warning("Not reporting this training to its search: %s", exc)
        return None
    if target is None:
        return None
    log.info("Reporting the training return to %s (pruner %s)", target.name, studies.describe_pruner(target.spec))
    return ReportToTrial(target, train_steps(cfg), int(cfg.seed))
