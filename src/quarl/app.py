"""The Hydra application behind `run.py`: one job = one cell."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from quarl import schema
from quarl.errors import QuarlError
from quarl.pipeline import Context, run_cell

log = logging.getLogger("quarl")

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def job(cfg: DictConfig) -> None:
    """Run the cell `cfg`; a user mistake ends the process with one line and exit code 1."""
    hc = HydraConfig.get()
    ctx = Context(
        cfg=cfg,
        run_dir=Path(hc.runtime.output_dir),
        base_dir=Path(hc.runtime.cwd),
        multirun=hc.mode == RunMode.MULTIRUN,
    )
    try:
        run_cell(ctx)
    except QuarlError as exc:
        log.error("%s", exc)
        sys.exit(1)


def main() -> None:
    """Entry point of `python run.py [overrides]`."""
    if not (CONF_DIR / "config.yaml").exists():
        sys.exit(f"quarl: no configs at {CONF_DIR}; install quarl from its source tree (pip install -e .).")
    schema.register()
    hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(job)()
