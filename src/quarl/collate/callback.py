"""A Hydra callback that collates a sweep into its sweep dir when the sweep ends.

Registered in ``conf/config.yaml`` under ``hydra.callbacks.collate``. It only calls `collate` with
filters taken from the sweep's own overrides (``algo=dqn,ppo env=cartpole train.steps=5000``), and
logs the equivalent ``quarl collate`` command: Hydra 1.3.8 does not call ``on_multirun_end`` when a
job failed, and a detached SLURM sweep ends without it, so that command gives the same output
after the fact. It never fails the sweep: any error is logged as a warning.

Quant settings (``quant=...``, ``quant.bits=...``) are not turned into filters, so the fp32
baselines and fp16 cells of the same policies are collated with the sweep's quantized cells.
"""

from __future__ import annotations

import logging
import os
import shlex
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

#: Override keys that are not filters: how to run, not what ran (or quant settings, see above).
NOT_FILTERS = ("quant", "hydra", "sweep", "store", "force", "train.progress", "eval.progress", "eval.n_envs",
               "train.device")


def _is_filter_key(key: str) -> bool:
    return not any(key == k or key.startswith(f"{k}.") or key.startswith(f"{k}/") for k in NOT_FILTERS)


def sweep_filters(overrides: list[str], params: dict[str, Any] | None = None) -> dict[str, str]:
    """Filters equivalent to a sweep's overrides and sweeper params: ``{"algo": "dqn,ppo", ...}``.

    Config groups (``algo``, ``env``) filter the column of the same name; a nested option
    (``env=atari/breakout``) also matches its last part. Values a filter cannot express
    (intervals, tagged sweeps) are left out.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    items = [f"{k}={v}" for k, v in (params or {}).items()] + list(overrides)  # the command line wins
    parsed = OverridesParser.create().parse_overrides(items)
    filters: dict[str, str] = {}
    for o in parsed:
        key = o.key_or_group
        if o.is_delete() or not _is_filter_key(key) or o.package:
            continue
        try:
            values = [str(v) for v in o.sweep_string_iterator()] if o.is_sweep_override() else [o.get_value_element_as_str()]
        except Exception:  # interval sweeps and the like: no finite list of values
            continue
        if key in ("algo", "env"):
            values += [v.rsplit("/", 1)[-1] for v in values if "/" in v]
        filters[key] = ",".join(dict.fromkeys(values))
    return filters


class CollateCallback(Callback):
    """Collate the sweep's records into ``<sweep dir>/<subdir>`` at the end of a multirun."""

    def __init__(self, subdir: str = "collate", bits: int = 8, enabled: bool = True) -> None:
        self.subdir, self.bits, self.enabled = subdir, int(bits), bool(enabled)
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
            log.warning("Collation after the sweep failed (%s: %s); the sweep's records are in the store: "
                        "run `quarl collate` to try again.", type(exc).__name__, exc)

    def _collate(self, config: DictConfig) -> None:
        from quarl.collate import collate

        cwd = Path(OmegaConf.select(config, "hydra.runtime.cwd", default=None) or os.getcwd())
        sweep_dir = Path(self._sweep_dir or str(config.hydra.sweep.dir))
        out = (sweep_dir if sweep_dir.is_absolute() else cwd / sweep_dir) / self.subdir
        store = Path(str(config.store.path)).expanduser()
        store = store if store.is_absolute() else cwd / store
        overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
        params = OmegaConf.to_container(config.hydra.sweeper.params, resolve=True) if OmegaConf.select(
            config, "hydra.sweeper.params", default=None) else {}
        filters = sweep_filters(overrides, params)  # type: ignore[arg-type]
        command = shlex.join(["quarl", "collate", "--store", str(store), "--out", str(out), "--bits", str(self.bits),
                              *(f"{k}={v}" for k, v in filters.items())])
        written = collate(store, out, filters, bits=self.bits, command=command)
        log.info("Collated the sweep into %s (%d files); the same output again: %s", out, len(written), command)
