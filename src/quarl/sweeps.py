"""What a sweep command would run (`quarl plan`) and where a study stands (`quarl status`)."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import DictConfig

from quarl import schema
from quarl.errors import QuarlError
from quarl.keys import cell_key
from quarl.store import Store

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

SHOWN = ("algo", "env", "quant", "quant.bits", "seed")


def expand(conf_dir: Path, args: list[str]) -> list[list[str]]:
    """The override list of every job `python run.py -m ARGS` would launch (named sweeps included)."""
    parser = OverridesParser.create()
    try:
        fixed = [o.input_line for o in parser.parse_overrides(args) if not o.is_sweep_override()]
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            hydra_cfg = compose("config", overrides=fixed, return_hydra_config=True).hydra
        params = [f"{k}={v}" for k, v in (hydra_cfg.sweeper.params or {}).items()]
        batches = BasicSweeper.split_arguments(parser.parse_overrides(params + list(args)), None)
    except HydraException as exc:
        raise QuarlError(f"These overrides do not make a sweep: {exc}") from None
    return [job for batch in batches for job in batch]


def _state(cfg: Any, store: Store) -> tuple[str, str]:
    from quarl.algos import spec  # SB3 and torch: only where a plan needs them
    from quarl.envs import action_kind

    try:
        schema.check(cfg)
    except QuarlError as exc:
        return "invalid", str(exc)
    if action_kind(cfg.env) not in spec(cfg.algo.name).action_kinds:
        return "n/a", f"{cfg.algo.name} cannot act in {cfg.env.id}"
    return store.status(cell_key(cfg)) or "to run", ""


class Composer:
    """Configs of many jobs: the defaults list is composed once per set of group choices, and each
    job's value overrides are applied to a copy, as Hydra applies them after composition."""

    def __init__(self, conf_dir: Path) -> None:
        self.groups = {p.name for p in conf_dir.iterdir() if p.is_dir()}
        self.parser = OverridesParser.create()
        self.composed: dict[tuple[str, ...], DictConfig] = {}

    def _is_group(self, override: Override) -> bool:
        key = override.key_or_group
        return "/" in key or key in self.groups

    def __call__(self, job: list[str]) -> DictConfig:
        try:
            overrides = self.parser.parse_overrides(job)
            choices = tuple(o.input_line for o in overrides if self._is_group(o))
            if choices not in self.composed:
                self.composed[choices] = compose("config", overrides=list(choices))
            cfg = copy.deepcopy(self.composed[choices])
            ConfigLoaderImpl._apply_overrides_to_config([o for o in overrides if not self._is_group(o)], cfg)
        except HydraException as exc:
            raise QuarlError(f"Cell {' '.join(job)} does not compose: {exc}") from None
        return cfg


def finished_jobs(configs: dict[int, DictConfig], cwd: Path) -> dict[int, str]:
    """The stored status of each of a sweep's composed jobs (by index) whose cell is in the store
    already (done or skipped as n/a, force off); `cwd` is the launch folder that relative store paths are against. A job that
    cannot be keyed here is left to run, where it is reported."""
    from quarl.cells import finished

    stores: dict[Path, Store] = {}
    found: dict[int, str] = {}
    for index, cfg in configs.items():
        try:
            path = Path(str(cfg.store.path)).expanduser()
            path = path if path.is_absolute() else cwd / path
            if not path.exists():  # nothing stored yet (and opening would create the file)
                continue
            store = stores[path] if path in stores else stores.setdefault(path, Store(path))
            status = store.status(cell_key(cfg))
            if finished(cfg, status):
                found[index] = str(status)
        except Exception as exc:  # noqa: BLE001 - the job itself reports it, with the context it needs
            log.debug("Job %d is left to run: %s", index, exc)
    return found


def plan(conf_dir: Path, args: list[str], store_path: Path | None = None) -> pd.DataFrame:
    """One row per job of the sweep: its cell, and whether it is done, to run, n/a or invalid."""
    import pandas as pd

    schema.register()
    rows = []
    stores: dict[Path, Store] = {}
    jobs = expand(conf_dir, args)
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        composer = Composer(conf_dir)
        configs = [composer(job) for job in jobs]
    for job, cfg in zip(jobs, configs):
        path = store_path or Path(cfg.store.path)
        store = stores.setdefault(path, Store(path))
        state, why = _state(cfg, store)
        rows.append({"algo": cfg.algo.name, "env": cfg.env.name, "quant": cfg.quant.method,
                     "quant.bits": cfg.quant.bits, "seed": cfg.seed, "state": state, "cell_key": cell_key(cfg),
                     "overrides": " ".join(job), "why": why})
    return pd.DataFrame(rows)


def status(store_path: Path, filters: dict[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A grid of cell states and the failed cells' errors (`quarl.results.status`)."""
    from quarl import results

    return results.status(store_path, filters)
