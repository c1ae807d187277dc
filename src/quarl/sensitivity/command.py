"""`quarl sensitivity` end to end: the cell, its fp32 policy, the study, the search and the outputs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

from quarl.config import method_registry
from quarl.config.method_registry import fp32_config
from quarl.errors import QuarlError
from quarl.sensitivity.artifacts import run_command, write
from quarl.sensitivity.greedy import search
from quarl.sensitivity.measure import Bound, Probe, check_bits, check_bound, study
from quarl.store.disk import cannot_make

log = logging.getLogger(__name__)


def compose_cell(conf_dir: Path, overrides: list[str]) -> Any:
    """The PTQ cell `python run.py OVERRIDES` would run (quant=ptq unless another quant is chosen), checked."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from quarl.config import schema

    schema.register()
    chosen = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") == "quant"]
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = compose("config", overrides=([] if chosen else ["quant=ptq"]) + list(overrides))
    except HydraException as exc:
        raise QuarlError(f"These overrides do not make a cell: {exc}") from None
    method = method_registry.of(cfg)
    if method.trains_policy or not method.integer:  # it quantizes the fp32 policy's layers to integers
        raise QuarlError(
            f"quarl sensitivity studies post-training quantization: use quant=ptq, not quant={cfg.quant.method}."
        )
    schema.check(cfg)
    return cfg


def run_study(
    conf_dir: Path,
    overrides: list[str],
    bits: list[int] | str,
    min_agreement: float,
    max_error: Optional[float],
    out: Optional[Path],
    search_too: bool = True,
) -> list[Path]:
    """`quarl sensitivity`: obtain the cell's fp32 policy (trained if not cached), study it, search,
    and write the outputs (see `write`) into `out` (default outputs/sensitivity/<algo>-<env>-seed<seed>-<policy>)."""
    from quarl.config.keys import slug
    from quarl.rl.algos import check_action_kind
    from quarl.rl.envs import action_kind
    from quarl.train.cache import obtain

    bits, bound = check_bits(bits), Bound(min_agreement, max_error)
    check_bound(bound)
    unwritable = cannot_make(out) if out is not None else None
    if unwritable:  # before the policy is trained and studied
        raise QuarlError(f"--out {out} cannot be written ({unwritable}): give a folder you may write in.")
    cfg = compose_cell(conf_dir, overrides)
    check_action_kind(cfg.algo.name, cfg.env.id, action_kind(cfg.env), "ptq")
    policy = obtain(fp32_config(cfg), Path(cfg.store.policies), progress=bool(cfg.train.progress))
    out = out or Path("outputs/sensitivity") / slug(f"{cfg.algo.name}-{cfg.env.name}-seed{cfg.seed}-{policy.key}")
    probe = Probe(cfg, policy)
    if (
        max_error is not None
        and probe._relative_error(probe.fp32_reward, probe.fp32_reward, cfg.env.return_scale)[0] is None
    ):
        raise QuarlError(
            f"--max-error {max_error} cannot be checked: E is n/a for this policy (its fp32 reward "
            f"{probe.fp32_reward:.4g} is too close to 0); bound it with --min-agreement only."
        )
    table = study(probe, bits)
    result = search(probe, table, bits, bound) if search_too else None
    command = run_command(overrides, result.layer_bits, max(bits)) if result is not None else None
    title = f"{cfg.algo.name} on {cfg.env.name} (seed {cfg.seed})"
    written = write(out, table, result, title, command)
    if result is not None:
        log.info(
            "Smallest policy with %s: %s, %d bytes (uniform %d-bit %d, fp32 %d); agreement %.4f, reward %.2f "
            "(fp32 %.2f). Run it as a cell: %s",
            result.bound,
            json.dumps(result.layer_bits),
            result.bytes,
            result.uniform_bits,
            result.uniform_bytes,
            result.fp32_bytes,
            result.agreement,
            result.reward,
            result.fp32_reward,
            command,
        )
    return written
