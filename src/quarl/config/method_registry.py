"""What a quantization method is, and the registry of them.

A method is one module in `quarl.methods` (the plugins) with a `QuantMethod` subclass listed in its
`METHODS`, found when the registry is built, and a `conf/quant/<name>.yaml` that selects its
settings (docs/methods.md). The interface says its typed settings, the keys that change its result,
how it is validated, which policy it acts with and how it quantizes it. Method modules stay light at
import (no torch): the keys of a sweep's cells are computed without it.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional

from omegaconf import MISSING, DictConfig, OmegaConf, open_dict

from quarl.config.plugins import discover
from quarl.errors import QuarlError

if TYPE_CHECKING:
    import torch
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.callbacks import BaseCallback

SCHEMES = ("affine", "symmetric", "quarl_code", "published")
GRANULARITIES = ("per_tensor", "per_channel")

Calibrate = Callable[["BaseAlgorithm"], Any]


@dataclass
class QuantConfig:
    """Settings every method has. `scheme`, `granularity` and `quantize_bias` describe the integer
    weight quantizer (PTQ, QAT); float methods carry them unused, so that a sweep may set them
    across methods (quant=fp16,ptq quant.scheme=symmetric)."""

    method: str = MISSING
    bits: int = 8  # weight bits
    # affine (clamped, zero point) | symmetric | quarl_code (QuaRL's code) | published (the paper's formula)
    scheme: str = "affine"
    granularity: str = "per_tensor"  # per_tensor | per_channel (one range per output channel)
    quantize_bias: bool = False
    backend: str = "fake"  # fake = quantize-dequantize only; auto or one of quarl.deploy.CHOICES also execute it


def one_of(field_name: str, value: Any, allowed: tuple) -> None:
    """Raise a QuarlError naming `field_name` and what is allowed unless `value` is in `allowed`."""
    if value not in allowed:
        shown = ", ".join(str(a) for a in allowed if a is not None)
        raise QuarlError(f"{field_name}={value} is not allowed: choose one of {shown}.")


class QuantMethod:
    """One quantization method. Subclasses set the class attributes and override what differs."""

    name: ClassVar[str]
    config: ClassVar[type[QuantConfig]] = QuantConfig
    #: trains a policy of its own (QAT, ActorQ) instead of quantizing the cell's shared fp32 policy
    trains_policy: ClassVar[bool] = False
    #: the `quant.*` keys, beyond `method`, that change its result (and so the cell key)
    result_keys: ClassVar[tuple[str, ...]] = ()
    #: weights become integers: executable by the integer backends (onnx_int8, onnx_int4, ...)
    integer: ClassVar[bool] = False
    #: what quant.backend=auto executes the quantized policy with
    auto_backend: ClassVar[str] = "auto"
    #: the algorithms it trains (None: every SB3 algorithm)
    algos: ClassVar[Optional[tuple[str, ...]]] = None
    #: the algorithms no other method trains (its own learners, not SB3's)
    own_algos: ClassVar[tuple[str, ...]] = ()
    #: the fp32 baseline itself: its cell is the baseline record
    baseline: ClassVar[bool] = False
    #: a float method (weights cast to a float type, no bit width of its own): its weights' width
    #: (fp16: 16), what `used_bits` returns and what stores and tables show for it; None otherwise
    float_width: ClassVar[Optional[int]] = None

    def node(self) -> QuantConfig:
        """The settings `conf/quant/<name>.yaml` composes (Hydra's ConfigStore node)."""
        return self.config(method=self.name)

    def validate(self, cfg: DictConfig) -> None:
        """Reject settings of this method a type cannot (QuarlError naming the field)."""

    def spec(self, cfg: DictConfig) -> dict[str, Any]:
        """The quant settings that change the result (part of the cell key)."""
        return {"method": self.name, **{k: cfg.quant[k] for k in self.result_keys if k in cfg.quant}}

    def shown_settings(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Of the settings that tell this method's records apart in collation (name -> value), those
        that apply to one record, for its label: all of them by default."""
        return settings

    def describe(self, quant: DictConfig) -> str:
        """How the log names this quantization of a cell."""
        return self.name

    def used_bits(self, quant: DictConfig) -> Optional[int]:
        """The weight width this method really uses where that is not `quant.bits` (fp16: 16);
        None where `quant.bits` is its setting. By default, its `float_width`."""
        return self.float_width

    def number_format(self, quant: DictConfig) -> str:
        """The number format of the values the cell quantizes to (`quant.format`; `int` for integers
        and for plain floats, whose width `used_bits` gives)."""
        return str(quant.get("format") or "int")

    def implies_bits(self, quant: DictConfig) -> bool:
        """Whether `used_bits` follows another setting of the cell (PTQ's quant.format), which
        `validate` checked quant.bits against: settled without a warning."""
        return False

    def prepare(self, cfg: DictConfig) -> None:
        """Resolve derived settings in place before the cell runs (recorded as run)."""

    def own_cell(self, ctx: Any) -> Any:
        """Run the whole cell itself and return what it measured (`quarl.store.records.Measured`),
        which the pipeline records like every cell; None (default) leaves the cell to the pipeline."""
        return None

    def quantize(self, model: BaseAlgorithm, quant: DictConfig, calibrate: Optional[Calibrate] = None) -> None:
        """Quantize the loaded policy's inference layers in place."""

    def tensor_bytes(self, t: torch.Tensor, quant: DictConfig, granularity: str, bits: int) -> int:
        """Bytes of one quantized weight tensor when stored."""
        return 4 * t.numel()

    def quantizes_bias(self, quant: DictConfig) -> bool:
        """Whether biases are stored quantized too."""
        return False

    def record_fields(self, model: BaseAlgorithm, quant: DictConfig) -> dict[str, Any]:
        """Further fields of a quantized cell's record, from its quantized model (none by default)."""
        return {}

    # Training a policy of its own (trains_policy): hooks of quarl.train.trainer and the policy cache.

    def policy_tag(self, quant: DictConfig) -> str:
        """What a policy folder's name adds for this method ('' for the shared fp32 policy)."""
        return ""

    def policy_kind(self, quant: DictConfig) -> str:
        """How the log calls a policy this method trains."""
        return "fp32"

    def training_hook(self, model: BaseAlgorithm, cfg: DictConfig) -> Optional[TrainingHook]:
        """A callback that shapes the training (QAT's fake-quant schedule), or None."""
        return None

    def restore(self, model: BaseAlgorithm, quant: DictConfig, folder: Path) -> None:
        """Give a loaded policy what its training hook saved beside it."""


class TrainingHook:
    """What a method's training callback offers the training loop besides being a callback."""

    callback: BaseCallback  # what the training loop runs

    def ready(self) -> bool:
        """Whether a keep-best evaluation may keep the model now."""
        return True

    def state(self) -> Any:
        """JSON-able state a checkpoint keeps."""
        return None

    def load_state(self, state: Any) -> None:
        """Resume from `state()`."""

    def save(self, model: BaseAlgorithm, folder: Path) -> None:
        """Save what `QuantMethod.restore` needs beside the trained model."""


BASELINE = "fp32"
PLUGINS = "quarl.methods"  # the package whose modules are the methods

log = logging.getLogger(__name__)


def _discover() -> dict[str, QuantMethod]:
    """Every method of every plugin module (`quarl.config.plugins`), the baseline's module first."""
    return discover(PLUGINS, "METHODS", QuantMethod, first="floats")


_REGISTRY: dict[str, QuantMethod] = {}


def registry() -> dict[str, QuantMethod]:
    """Every method by name, the plugins imported on first use (not at import: they use this module)."""
    if not _REGISTRY:
        _REGISTRY.update(_discover())
    return _REGISTRY


def __getattr__(name: str) -> Any:
    """`REGISTRY` (every method by name) and `NAMES` (their names, the baseline first), built lazily."""
    if name == "REGISTRY":
        return registry()
    if name == "NAMES":
        return tuple(registry())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(name: str) -> QuantMethod:
    """The method called `name` (quant.method)."""
    if name not in registry():
        raise QuarlError(f"quant.method={name} is not allowed: choose one of {', '.join(registry())}.")
    return registry()[name]


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
    if warn and not method.implies_bits(cfg.quant):
        log.warning(
            "quant=%s runs at %d bits: quant.bits=%s does not apply to it, and the record says quant.bits=%d.",
            method.name,
            used,
            cfg.quant.bits,
            used,
        )
    cfg.quant.bits = used


def float_widths() -> dict[str, int]:
    """The float methods (`QuantMethod.float_width`) by name, with their widths, the baseline first."""
    return {name: m.float_width for name, m in registry().items() if m.float_width is not None}


def trained_only_by(algo: str) -> tuple[str, ...]:
    """The methods that alone train `algo` (it has no SB3 learner); () for an SB3 algorithm."""
    return tuple(name for name, method in registry().items() if algo in method.own_algos)


def register_schemas() -> None:
    """Each method's settings as `schema/quant/<name>` in Hydra's ConfigStore (conf/quant/<name>.yaml selects it)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    for name, method in registry().items():
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
