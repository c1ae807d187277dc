"""quarl's Optuna sweeper (`hydra/sweeper=optuna`): a search over Hydra's override grammar whose
trials are ordinary cells, launched through the configured launcher and judged from their records.

Keys and grammar are those of Hydra's own Optuna sweeper (`n_trials`, `n_jobs`, `sampler`,
`direction`, `study_name`, `storage`, `params`); quarl adds `search.objective` (record fields),
`search.seeds` (each trial's value is the mean over that many seeds, one cell each) and `pruner`
(a trial's training reports its return to the trial and stops when pruned: quarl.train.pruning). The study lives
in an RDB storage (default `optuna.db` beside the results store): running the same command again
resumes it, and `n_trials` counts every finished trial of the study. Cells already in the store are
skipped as by quarl's sweeper (QuarlSweeper), so a trial whose cells are stored is told from them.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.quarl_sweeper import search_results, search_space
from hydra_plugins.quarl_sweeper.quarl_sweeper import QuarlSweeper
from hydra_plugins.quarl_sweeper.search_space import Param, SearchSettings
from quarl.store import studies

log = logging.getLogger(__name__)

HEARTBEAT_S = 60  # a running trial's heartbeat; one silent for GRACE_S failed (and retried) by the next search
GRACE_S = 300
INTERRUPTED = "interrupted"  # user attribute of a trial whose cells did not finish (Ctrl-C, SIGTERM)
RETRY_OF = studies.RETRY_OF  # user attribute of a trial that reruns an interrupted one, with its parameters


def _is_search_override(arg: str) -> bool:
    return arg.lstrip("+~").startswith("search.")


class OptunaSweeper(QuarlSweeper):
    """An Optuna study over `params` (Hydra's grammar), `n_trials` in all, `n_jobs` trials a batch."""

    def __init__(
        self,
        n_trials: int = 20,
        n_jobs: int = 1,
        direction: Any = "maximize",
        study_name: str | None = None,
        storage: str | None = None,
        sampler: Any = None,
        params: dict[str, str] | None = None,
        search: Mapping[str, Any] | None = None,
        max_batch_size: int | None = None,
        pruner: Any = None,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        self.n_trials, self.n_jobs, self.direction = n_trials, n_jobs, direction
        self.study_name, self.storage, self.sampler = study_name, storage, sampler
        self.search = dict(search or {})
        self.pruner = pruner  # checked in the search (quarl.store.studies.check_pruner); null: median
        self.pruning: dict[str, Any] | None = None  # the checked pruner settings, where the search prunes
        self.job_index = 0

    # --- settings -------------------------------------------------------------------------------

    def _search_node(self) -> dict[str, Any]:
        """`hydra.sweeper.search`, with the run's `search` node (`search.seeds=2`) over it where set."""
        assert self.config is not None
        merged = dict(OmegaConf.to_container(OmegaConf.create(self.search), resolve=True))  # type: ignore[arg-type]
        top = OmegaConf.select(self.config, "search", default=None)
        if isinstance(top, DictConfig):
            given = OmegaConf.to_container(top, resolve=True)
            assert isinstance(given, dict)
            merged.update({k: v for k, v in given.items() if v is not None})
        return {str(k): v for k, v in merged.items()}

    def _space(self, arguments: list[str]) -> tuple[list[Param], list[str], int]:
        """The searched params, the fixed overrides less `seed`, and the base seed."""
        assert self.hydra_context is not None and self.config is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        given = [f"{key}={value}" for key, value in self.params.items()]
        overrides = parser.parse_overrides([*given, *(a for a in arguments if not _is_search_override(a))])
        params, fixed = search_space.space(overrides)
        seed = int(self.config.seed)
        for item in [f for f in fixed if f.lstrip("+").startswith("seed=")]:
            fixed.remove(item)
            seed = int(item.split("=", 1)[1])
        return params, fixed, seed

    def _storage(self) -> Any:
        import optuna

        assert self.config is not None
        url = studies.storage_url(self.storage, self._store_of(self.config))
        if url.startswith("sqlite:///"):
            Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        kwargs = {"connect_args": {"timeout": 120}} if url.startswith("sqlite") else {}
        return optuna.storages.RDBStorage(
            url, engine_kwargs=kwargs, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S
        )

    def _study(self, search: SearchSettings, params: list[Param], fixed: list[str]) -> Any:
        import optuna
        from hydra.utils import instantiate

        from quarl.errors import QuarlError

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # heartbeats are recorded here, for ask and tell (Optuna warns that it expects optimize);
        # fail_stale_trials is marked experimental
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        assert self.config is not None
        named = OmegaConf.select(self.config, "hydra.runtime.choices.search", default=None)  # +search=NAME
        name = self.study_name or search_space.study_name(params, fixed, search, str(named or "quarl"))
        sampler = self.sampler  # Hydra instantiates the sweeper's config recursively: a sampler, or its config
        if sampler is None:
            sampler = optuna.samplers.TPESampler()
        elif not isinstance(sampler, optuna.samplers.BaseSampler):
            sampler = instantiate(sampler)
        study = optuna.create_study(
            study_name=name, storage=self._storage(), sampler=sampler, directions=search.directions, load_if_exists=True
        )
        wanted = [o.name for o in search.objectives]
        held = study.user_attrs.get("objectives")
        directions = [d.name.lower() for d in study.directions]
        if (held is not None and held != wanted) or directions != search.directions:
            raise QuarlError(
                f"hydra.sweeper.study_name={name} is a study of {held or '?'} ({', '.join(directions)}), not of "
                f"{wanted} ({', '.join(search.directions)}): give another study_name, or the study's objectives."
            )
        study.set_user_attr("objectives", wanted)
        study.set_user_attr("seeds", search.seeds)
        study.set_user_attr("space", {p.name: repr(p.distribution) for p in params})
        study.set_user_attr("fixed", fixed)
        study.set_user_attr(studies.PRUNER, self.pruning)  # the trainings build the same pruner from it
        return study

    # --- the search -----------------------------------------------------------------------------

    def _sweep(self, arguments: list[str]) -> Any:
        from quarl.errors import QuarlError

        assert self.config is not None
        try:
            import optuna  # noqa: F401 - the search needs it; say how to get it before anything runs
        except ImportError:
            raise QuarlError(
                "hydra/sweeper=optuna needs optuna: pip install -c constraints.txt optuna (quarl's test extra has it)."
            ) from None
        n_trials = search_space.positive("n_trials", self.n_trials)
        n_jobs = search_space.positive("n_jobs", self.n_jobs)
        store = self._store_of(self.config)
        search = search_space.settings(self._search_node(), self.direction, search_results.numeric_columns(store))
        params, fixed, seed = self._space(arguments)
        self.pruning, why = search_space.pruning(self.pruner, search)
        study = self._study(search, params, fixed)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        if self.pruning is not None:
            log.info("Pruner %s", studies.describe_pruner(self.pruning))
        else:
            log.info("No pruning: %s", why)
        log.info(
            "Study %s (%s): %d of %d trials finished, %s a trial, %s",
            study.study_name, ", ".join(f"{d} {o.name}" for o, d in zip(search.objectives, search.directions)),
            _finished(study), n_trials, f"{search.seeds} seed(s)", studies.storage_url(self.storage, store),
        )  # fmt: skip
        returns = []
        while True:
            _retry_interrupted(study)
            todo = n_trials - _finished(study) - _running(study)
            if todo <= 0:
                break
            batch = [
                study.ask(fixed_distributions={p.name: p.distribution for p in params})
                for _ in range(min(n_jobs, todo))
            ]
            returns.append(self._run_batch(study, batch, params, fixed, seed, search))
        self._report(study, search, params, fixed, sweep_dir)
        return returns

    def _run_batch(
        self, study: Any, batch: list[Any], params: list[Param], fixed: list[str], seed: int, search: SearchSettings
    ) -> Any:
        """Launch the cells of a batch of trials (a job per trial and seed) and tell each trial its
        values read from the store; an interrupted batch's trials are told failed, to be retried."""
        import optuna

        jobs: list[list[str]] = []
        for trial in batch:
            chosen = [p.override(trial.params[p.name]) for p in params]
            jobs += [[*fixed, *chosen, f"seed={seed + i}"] for i in range(search.seeds)]
        results: Any = []
        configs = self._compose(jobs)
        if self.pruning is not None:  # each trial lists its trainings, which find it by them
            for index, trial in enumerate(batch):
                trial.set_user_attr(studies.TRAINS, _trainings(configs, index, search.seeds))
        try:
            with _heartbeats(study, batch):
                pending = self._pending(jobs)
                if pending:
                    results = self._launch(pending, self.job_index)
                    self.job_index += len(pending)
            for result in results:
                try:
                    _ = result.return_value
                except Exception as exc:  # noqa: BLE001 - the trial is judged from the store below
                    log.error("A job of this batch failed: %s", exc)
        except BaseException:
            for trial in batch:
                trial.set_user_attr(INTERRUPTED, True)
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            raise
        cells = [(self._store_of(configs[i]), _cell_key(configs[i])) for i in range(len(jobs))]
        rows = search_results.records(cells)
        seeds = [seed + i for i in range(search.seeds)]
        held = {t.number: t for t in study.get_trials(deepcopy=False)} if self.pruning is not None else {}
        for index, trial in enumerate(batch):
            own = rows[index * search.seeds : (index + 1) * search.seeds]
            got = search_results.outcome(seeds, own, search)
            for key, value in got.attrs.items():
                trial.set_user_attr(key, value)
            if _was_pruned(held.get(trial.number), own):
                frozen = study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                log.info("Pruned %s", search_results.describe(frozen, search))
                continue
            if got.values is None:
                trial.set_user_attr(search_results.FAILED_CELLS, got.why)
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                log.error("Trial %d failed: %s", trial.number, got.why)
                continue
            frozen = study.tell(trial, got.values)
            log.info("Finished %s", search_results.describe(frozen, search))
        return results

    def _report(self, study: Any, search: SearchSettings, params: list[Param], fixed: list[str], folder: Path) -> None:
        """Log the best trial (or the Pareto front) and write the search's files into the sweep dir."""
        written = search_results.write_all(folder, study, params, fixed, search)
        if search_results.complete(study):  # not pruned ones: they hold their last training return as value
            best = study.best_trials if len(search.objectives) > 1 else [study.best_trial]
            title = "Pareto front" if len(search.objectives) > 1 else "Best"
            for trial in best:
                log.info("%s %s", title, search_results.describe(trial, search))
        log.info("Study %s: %d trials finished; wrote %s", study.study_name, _finished(study),
                 ", ".join(str(p) for p in written))  # fmt: skip


def _cell_key(cfg: DictConfig) -> str:
    from quarl.config.keys import cell_key

    return cell_key(cfg)


def _trainings(configs: Mapping[int, DictConfig], trial_index: int, seeds: int) -> dict[str, list[int]]:
    """{policy key: [seed index, stage]} of the trainings the trial's cells may run (a cell that
    cannot be keyed is left out: it is refused, or fails, before it trains)."""
    listed: dict[str, list[int]] = {}
    for seed_index in range(seeds):
        try:
            keys = search_results.trainings(configs[trial_index * seeds + seed_index])
        except Exception as exc:  # noqa: BLE001 - the cell itself says what is wrong with it
            log.debug("No policy keys for a cell of this trial: %s", exc)
            continue
        for key, stage in keys.items():
            listed.setdefault(key, [seed_index, stage])
    return listed


def _was_pruned(held: Any, rows: Sequence[dict[str, Any] | None]) -> bool:
    """Whether a trial was pruned: its training said so (the `pruned` user attribute), or one of its
    cells stopped because a trial it shares a policy with was (its record is `pruned`)."""
    if held is not None and studies.PRUNED in held.user_attrs:
        return True
    return any(row is not None and row.get("status") == "pruned" for row in rows)


def _finished(study: Any) -> int:
    """Trials that count towards n_trials: complete, pruned, or failed for a reason a rerun repeats."""
    import optuna

    state = optuna.trial.TrialState
    return sum(
        1
        for t in study.get_trials(deepcopy=False)
        if t.state in (state.COMPLETE, state.PRUNED)
        or (t.state == state.FAIL and search_results.FAILED_CELLS in t.user_attrs)
    )


def _running(study: Any) -> int:
    """Trials running elsewhere (another job sharing the study); one silent for GRACE_S is failed first."""
    import optuna

    optuna.storages.fail_stale_trials(study)
    return sum(1 for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.RUNNING)


def _retry_interrupted(study: Any) -> None:
    """Queue the parameters of each trial that was interrupted (or went silent) once more: its cells
    that finished are read from the store, the others run (a training resumes its checkpoint)."""
    import optuna

    trials = study.get_trials(deepcopy=False)
    retried = {t.user_attrs.get(RETRY_OF) for t in trials}
    for trial in trials:
        again = trial.state == optuna.trial.TrialState.FAIL and search_results.FAILED_CELLS not in trial.user_attrs
        if again and trial.params and trial.number not in retried:
            log.info("Trial %d was interrupted: its parameters run again", trial.number)
            study.enqueue_trial(trial.params, user_attrs={RETRY_OF: trial.number})


@contextmanager
def _heartbeats(study: Any, trials: Sequence[Any]) -> Iterator[None]:
    """Record the trials' heartbeats while their cells run, so other jobs count them as running."""
    storage = study._storage  # noqa: SLF001 - Optuna's ask/tell API has no public heartbeat
    stop = threading.Event()

    def beat() -> None:
        while True:
            for trial in trials:
                try:
                    storage.record_heartbeat(trial._trial_id)  # noqa: SLF001
                except Exception as exc:  # noqa: BLE001 - a missed beat only risks a retry
                    log.debug("No heartbeat for trial %d: %s", trial.number, exc)
            if stop.wait(HEARTBEAT_S):
                return

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
