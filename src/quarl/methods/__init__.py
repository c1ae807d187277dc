"""Quantization methods as plugins: each module of this package defines one or more `QuantMethod`s
(settings, keys, validation, how a policy is quantized and sized) and lists them in `METHODS`.

Adding a method is adding files: a module here, found when the package is imported, and
`conf/quant/<name>.yaml` selecting `/schema/quant/<name>` (docs/methods.md). Method modules import
only `quarl.methods.base` at import time; what they run on (torch, SB3, quarl's runtime) is imported
where it is used, so the keys of a sweep's cells need none of it.
"""

from __future__ import annotations

import copy
import importlib
import logging
import pkgutil
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from quarl.errors import QuarlError
from quarl.methods.base import QuantConfig, QuantMethod

BASELINE = "fp32"

log = logging.getLogger(__name__)


def _discover() -> dict[str, QuantMethod]:
    """Every method of every module of this package, the baseline first."""
    found: dict[str, QuantMethod] = {}
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: (m.name != "floats", m.name)):
        if module.name != "base":
            for method in importlib.import_module(f"{__name__}.{module.name}").METHODS:
                if method.name in found:
                    raise QuarlError(f"quant method {method.name} is defined twice (quarl.methods.{module.name}).")
                found[method.name] = method
    return found


REGISTRY: dict[str, QuantMethod] = _discover()
NAMES = tuple(REGISTRY)


def get(name: str) -> QuantMethod:
    """The method called `name` (quant.method)."""
    if name not in REGISTRY:
        raise QuarlError(f"quant.method={name} is not allowed: choose one of {', '.join(NAMES)}.")
    return REGISTRY[name]


def of(cfg: Any) -> QuantMethod:
    """The method of a cell's config."""
    return get(cfg.quant.method)


INTEGER_QUANTIZER_KEYS = ("scheme", "granularity", "quantize_bias")  # read by integer methods only


def settle(cfg: DictConfig, warn: bool) -> None:
    """Set the shared settings the cell's method overrides to the values it really uses, so that
    the record stores the truth (quant=fp16 quant.bits=4 runs, and is recorded, at 16 bits). With
    `warn` (a single run: the user typed the value), say so; a sweep over shared settings
    (quant=fp16,ptq quant.bits=4,8) makes one such cell of all its values, silently."""
    method = of(cfg)
    used = method.used_bits(cfg.quant)
    if warn and not method.integer:
        defaults = QuantConfig(method=method.name)
        unused = [f"quant.{k}={cfg.quant[k]}" for k in INTEGER_QUANTIZER_KEYS if cfg.quant[k] != getattr(defaults, k)]
        if unused:
            log.warning("quant=%s has no integer quantizer: %s does not apply to it.", method.name, ", ".join(unused))
    if used is None or cfg.quant.bits == used:
        return
    if warn:
        log.warning(
            "quant=%s runs at %d bits: quant.bits=%s does not apply to it, and the record says quant.bits=%d.",
            method.name,
            used,
            cfg.quant.bits,
            used,
        )
    cfg.quant.bits = used


def trained_only_by(algo: str) -> tuple[str, ...]:
    """The methods that alone train `algo` (it has no SB3 learner); () for an SB3 algorithm."""
    return tuple(name for name, method in REGISTRY.items() if algo in method.own_algos)


def register_schemas() -> None:
    """Each method's settings as `schema/quant/<name>` in Hydra's ConfigStore (conf/quant/<name>.yaml selects it)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    for name, method in REGISTRY.items():
        cs.store(group="schema/quant", name=name, node=method.node())


def settings(name: str) -> DictConfig:
    """The default settings of method `name`, as a typed config."""
    return OmegaConf.structured(get(name).node())


def fp32_config(cfg: DictConfig) -> DictConfig:
    """The same cell with quant=fp32: its baseline, and the config of the fp32 policy it quantizes."""
    fp32 = copy.deepcopy(cfg)
    with open_dict(fp32):
        fp32.quant = settings(BASELINE)
    return fp32


def policy_config(cfg: DictConfig) -> DictConfig:
    """The config of the policy a cell acts with: its own (QAT, ActorQ) or the shared fp32 one."""
    return cfg if of(cfg).trains_policy else fp32_config(cfg)


__all__ = [
    "BASELINE",
    "NAMES",
    "REGISTRY",
    "QuantConfig",
    "QuantMethod",
    "fp32_config",
    "get",
    "of",
    "policy_config",
    "register_schemas",
    "settings",
    "settle",
    "trained_only_by",
]
