"""quarl's sweeper: Hydra's basic sweeper (the same jobs, in the same order and batches), but a cell
already in the results store is passed over before a job is launched for it (no Hydra job set-up,
no SLURM job), and each set of config-group choices is composed once, for the store check and the
launcher alike, instead of every job in full (quarl.sweeps.SweepConfigs).

Chosen in quarl's config.yaml (`hydra.sweeper._target_`). A skipped cell's config is still written
to `<sweep dir>/<override dirname>/.hydra/config.yaml`, as its job would have, so collating the
sweep (`quarl collate --sweep`, the end-of-sweep callback) counts it.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


class QuarlSweeper(Sweeper):
    """Hydra's basic sweeper (`hydra.sweeper.params` and the command line's sweeps, as a cartesian
    product, in batches of `max_batch_size`) that launches only the cells the store does not hold yet."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__()
        self.max_batch_size = max_batch_size
        self.params = dict(params or {})
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.configs: Any = None  # quarl.sweeps.SweepConfigs, made in setup
        self.launcher: Launcher | None = None
        self.invalid: list[str] = []  # "overrides: why" of every job refused before launch
        self.launched: list[tuple[Path, str]] = []  # (store, cell key) of the batch being launched

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from quarl.app import CONF_DIR
        from quarl.sweeps import SweepConfigs

        self.hydra_context, self.config = hydra_context, config
        # one composition per set of group choices, shared by the store check and the launcher
        self.configs = SweepConfigs(hydra_context.config_loader, CONF_DIR)
        launching = HydraContext(config_loader=self.configs, callbacks=hydra_context.callbacks)  # type: ignore[arg-type]
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=launching,
                                                                task_function=task_function, config=config)

    def _compose(self, batch: Sequence[Sequence[str]]) -> dict[int, DictConfig]:
        """Each job's config as the launcher composes it (Hydra raises its own error for an invalid job)."""
        assert self.configs is not None and self.config is not None
        return {index: self.configs.load_sweep_config(self.config, list(job)) for index, job in enumerate(batch)}

    def _record_skipped(self, job: Sequence[str], cfg: DictConfig) -> None:
        """Write the job's config where its job dir would be (collation reads the sweep's cells there)."""
        from quarl.sweeps import override_dirname

        assert self.config is not None
        names = self.config.hydra.job.config.override_dirname
        overrides = OverridesParser.create().parse_overrides(list(job))
        subdir = override_dirname(overrides, list(names.exclude_keys), names.item_sep, names.kv_sep)
        folder = Path(str(self.config.hydra.sweep.dir)) / subdir / ".hydra"
        folder.mkdir(parents=True, exist_ok=True)
        config = OmegaConf.to_container(cfg, resolve=False)
        assert isinstance(config, dict)
        config.pop("hydra", None)  # as Hydra writes a job's config.yaml
        # JSON is YAML, and writes in a fraction of the time (OmegaConf.load reads it back as it is)
        (folder / "config.yaml").write_text(json.dumps(config, indent=1))

    def _refused(self, batch: Sequence[Sequence[str]], configs: dict[int, DictConfig]) -> set[int]:
        """The jobs whose cell is invalid (a value out of range, an unknown key): logged and kept in
        `self.invalid`, never launched. An n/a cell (an algorithm that cannot act in the env) is valid:
        its job records it as skipped."""
        from quarl.config import schema
        from quarl.errors import QuarlError

        refused = set()
        for index, cfg in configs.items():
            try:
                schema.check(cfg)
                schema.check_overrides(cfg, list(batch[index]))
            except QuarlError as exc:
                refused.add(index)
                self.invalid.append(f"{' '.join(batch[index])}: {exc}")
                log.error("Not running %s: %s", " ".join(batch[index]), exc)
        return refused

    def _pending(self, batch: Sequence[Sequence[str]]) -> list[Sequence[str]]:
        from quarl.config.cells import log_skip
        from quarl.config.keys import cell_key
        from quarl.sweeps import finished_jobs

        assert self.config is not None
        tic = time.perf_counter()
        configs = self._compose(batch)
        refused = self._refused(batch, configs)
        configs = {index: cfg for index, cfg in configs.items() if index not in refused}
        done = finished_jobs(configs, Path(str(self.config.hydra.runtime.cwd)))
        for index, status in sorted(done.items()):
            log_skip(configs[index], status)
            self._record_skipped(batch[index], configs[index])
        log.debug("Checked %d jobs in %.2f s", len(batch), time.perf_counter() - tic)
        pending = [index for index in range(len(batch)) if index not in done and index not in refused]
        self.launched = [(self._store_of(configs[index]), cell_key(configs[index])) for index in pending]
        return [batch[index] for index in pending]

    def _store_of(self, cfg: DictConfig) -> Path:
        assert self.config is not None
        path = Path(str(cfg.store.path)).expanduser()
        return path if path.is_absolute() else Path(str(self.config.hydra.runtime.cwd)) / path

    def _launch(self, pending: list[Sequence[str]], initial_job_idx: int) -> Any:
        """Launch a batch. A launcher that runs the cells elsewhere (submitit, SLURM) is silent until
        all end: a bar on a terminal (a log line off one) counts the cells the store has recorded."""
        from hydra._internal.core_plugins.basic_launcher import BasicLauncher

        assert self.launcher is not None
        if isinstance(self.launcher, BasicLauncher):  # in this process: each cell logs its own progress
            return self.launcher.launch(pending, initial_job_idx=initial_job_idx)
        stop = threading.Event()
        counter = threading.Thread(target=_count_recorded, args=(list(self.launched), stop), daemon=True)
        counter.start()
        try:
            return self.launcher.launch(pending, initial_job_idx=initial_job_idx)
        finally:
            stop.set()
            counter.join()

    def _batches(self, arguments: list[str]) -> list[list[list[str]]]:
        """The sweep's jobs (quarl.sweeps.jobs) in batches of `max_batch_size` (null: one batch)."""
        from quarl.errors import QuarlError
        from quarl.sweeps import jobs

        assert self.hydra_context is not None
        if self.max_batch_size is not None and self.max_batch_size <= 0:
            raise QuarlError(f"hydra.sweeper.max_batch_size is {self.max_batch_size}; it must be a positive "
                             "number of jobs, or null for all jobs in one batch.")
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        params = [f"{key}={value}" for key, value in self.params.items()]
        every = jobs(parser.parse_overrides([*params, *arguments]))
        size = self.max_batch_size or len(every)
        return [every[start:start + size] for start in range(0, len(every), size)]

    def sweep(self, arguments: list[str]) -> Any:
        """Launch the sweep's pending cells; a user mistake (a bad sweep setting, invalid cells once
        the valid ones ran) ends it with one sentence and exit code 1."""
        from quarl.errors import QuarlError

        try:
            returns = self._sweep(arguments)
            if self.invalid:
                more = len(self.invalid) - 3
                shown = "; ".join(self.invalid[:3]) + (f"; and {more} more" if more > 0 else "")
                raise QuarlError(f"{len(self.invalid)} of this sweep's cells are invalid and were not run: {shown}")
        except QuarlError as exc:
            log.error("%s", exc)
            sys.exit(1)
        return returns

    def _sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.launcher is not None
        batches = self._batches(arguments)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        returns, initial_job_idx = [], 0
        for batch in batches:
            pending = self._pending(batch)
            if not pending:
                continue
            results = self._launch(pending, initial_job_idx)
            for result in results:
                _ = result.return_value  # raises if the job failed, as Hydra's basic sweeper does
            initial_job_idx += len(pending)
            returns.append(results)
        return returns


POLL_S = 2.0  # seconds between looks at the store while a launcher runs the cells


def _count_recorded(cells: list[tuple[Path, str]], stop: threading.Event) -> None:
    """Until `stop`, count the `cells` (store, key) the store holds as done, skipped or failed."""
    from quarl.progress import Progress
    from quarl.store.sqlite import Store

    counted = 0
    with Progress(len(cells), "Cells of this sweep recorded", unit="cell", logger=log) as progress:
        while not stop.wait(POLL_S):
            try:
                stores = {path: Store(path) for path in {path for path, _ in cells} if path.exists()}
                recorded = sum(1 for path, key in cells if path in stores and stores[path].status(key) not in
                               (None, "running"))
            except Exception as exc:  # noqa: BLE001 - a count for the eye: the cells report their own errors
                log.debug("Could not count recorded cells: %s", exc)
                continue
            progress.update(recorded - counted)
            counted = recorded
