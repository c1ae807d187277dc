"""A Hydra callback that collates a sweep into its sweep dir when the sweep ends.

Registered in ``src/quarl/conf/config.yaml`` under ``hydra.callbacks.collate``. It calls `collate` on the
sweep's own cells and logs the equivalent ``quarl collate --sweep DIR`` command: Hydra 1.3.8 does
not call ``on_multirun_end`` when a job failed, and a detached SLURM sweep ends without it, so that
command gives the same output after the fact. It never fails the sweep: any error is logged as a
warning.

A sweep's own cells: `quarl.collate.sweep`.
"""

from __future__ import annotations

import logging
import os
import shlex
from pathlib import Path
from typing import Any, Sequence

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


class CollateCallback(Callback):
    """Collate the sweep's own cells into ``<sweep dir>/<subdir>`` at the end of a multirun."""

    def __init__(
        self, subdir: str = "collate", bits: int = 8, enabled: bool = True, formats: Sequence[str] | None = None
    ) -> None:
        self.subdir, self.bits, self.enabled = subdir, int(bits), bool(enabled)
        self.formats = list(formats) if formats else None  # None: every format
        self._sweep_dir: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Note the sweep dir now (it holds ${now:...}, which must not be resolved again at the end)."""
        try:
            self._sweep_dir = str(config.hydra.sweep.dir)
        except Exception:  # never fail the sweep
            self._sweep_dir = None

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Write the collation; log a warning instead of raising on any problem."""
        if not self.enabled:
            return
        try:
            self._collate(config)
        except Exception as exc:  # a collation problem must never fail a finished sweep
            log.warning(
                "Collation after the sweep failed (%s: %s); the sweep's records are in the store: "
                "run `quarl collate` to try again.",
                type(exc).__name__,
                exc,
            )

    def _collate(self, config: DictConfig) -> None:
        from quarl.collate import collate
        from quarl.collate.sweep import launched_jobs

        cwd = Path(OmegaConf.select(config, "hydra.runtime.cwd", default=None) or os.getcwd())
        sweep_dir = Path(self._sweep_dir or str(config.hydra.sweep.dir))
        sweep_dir = sweep_dir if sweep_dir.is_absolute() else cwd / sweep_dir
        out = sweep_dir / self.subdir
        store = Path(str(config.store.path)).expanduser()
        store = store if store.is_absolute() else cwd / store
        command = shlex.join(
            [
                "quarl",
                "collate",
                "--store",
                str(store),
                "--sweep",
                str(sweep_dir),
                "--out",
                str(out),
                "--bits",
                str(self.bits),
                *(["--formats", ",".join(self.formats)] if self.formats else []),
            ]
        )
        if not launched_jobs(sweep_dir):
            log.info("The sweep launched no job (its cells were done): nothing of its own to collate.")
            return
        written = collate(store, out, bits=self.bits, command=command, sweep=sweep_dir, formats=self.formats)
        log.info("Collated the sweep into %s (%d files); the same output again: %s", out, len(written), command)
