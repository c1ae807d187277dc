"""Quantization-aware training: fake quantization on the weights and input activations of every
layer the algorithm trains (in a number format, `quant.format`: on the weights only), with a
straight-through gradient; the trained policy is its own."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from omegaconf import DictConfig

from quarl.config.keys import train_steps
from quarl.config.method_registry import QuantConfig, TrainingHook
from quarl.errors import QuarlError
from quarl.methods import _formats
from quarl.methods._integer import check_integer_weights

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

log = logging.getLogger(__name__)

STATE_FILE = "qat_state.pt"  # the fake-quant ranges beside a QAT policy's model.zip


@dataclass
class QATConfig(QuantConfig):
    """Quantization-aware training of every trained layer's weights and input activations."""

    act_bits: int = 8  # activation bits, 2..16, or 32 for fp32 activations
    delay: Optional[int] = None  # env steps before fake quant is on (ranges observed before); null: half the budget
    freeze_after: Optional[int] = None  # env step at which ranges stop moving; null: they move until training ends
    # int (the integer quantizer above), or a number format of quarl.quantize.formats (docs/formats.md):
    # its fake quantization on the weights from quant.delay on, activations in fp32; it implies quant.bits
    format: str = "int"


def delay(cfg: Any) -> int:
    """Env steps before QAT turns fake quantization on: `quant.delay`, or half the budget."""
    return int(cfg.quant.delay if cfg.quant.delay is not None else train_steps(cfg) // 2)


class QATHook(TrainingHook):
    """QAT's fake-quant graph on the model and the schedule that turns it on and freezes it."""

    def __init__(self, model: BaseAlgorithm, cfg: DictConfig) -> None:
        from quarl.quantize import fake_quant as qat

        layers = qat.attach(model, cfg.quant, _formats.weight_formats(cfg.quant))
        self.callback = self.schedule = qat.QATSchedule(layers, delay(cfg), cfg.quant.freeze_after)

    def ready(self) -> bool:
        """A QAT policy is kept only once it was trained with fake quant on."""
        return self.schedule.enabled_at is not None

    def state(self) -> Any:
        return [self.schedule.enabled_at, self.schedule.frozen_at]

    def load_state(self, state: Any) -> None:
        self.schedule.enabled_at, self.schedule.frozen_at = state

    def save(self, model: BaseAlgorithm, folder: Path) -> None:
        import torch

        from quarl.quantize import fake_quant as qat

        torch.save(qat.detach(model), folder / STATE_FILE)


class QAT(_formats.FormatWeights):
    name = "qat"
    config = QATConfig
    trains_policy = True
    result_keys = ("bits", "scheme", "granularity", "quantize_bias", "act_bits", "delay", "freeze_after", "format")

    def spec(self, cfg: DictConfig) -> dict[str, Any]:
        """The QAT keys, a format's as `_formats.format_spec` says (none at `int`)."""
        return _formats.format_spec({**super().spec(cfg), "delay": delay(cfg)})

    def validate(self, cfg: DictConfig) -> None:
        q = cfg.quant
        if not 2 <= q.bits <= 16:
            raise QuarlError(f"quant.bits={q.bits} is out of range for quant=qat: use 2..16.")
        check_integer_weights(q)
        _formats.check_format(q, {"act_bits": QATConfig.act_bits})
        if _formats.implied_bits(q) and q.freeze_after is not None:
            raise QuarlError(
                f"quant.freeze_after freezes integer ranges, which quant.format={q.format} does not have (its "
                "scales come from the current weights at every step): leave quant.freeze_after null."
            )
        if not (2 <= q.act_bits <= 16 or q.act_bits == 32):
            raise QuarlError(f"quant.act_bits={q.act_bits} is out of range: use 2..16, or 32 for fp32 activations.")
        if q.delay is not None and q.delay < 0:
            raise QuarlError(f"quant.delay={q.delay} must be a number of env steps >= 0 (or null for half the budget).")
        if q.freeze_after is not None and q.freeze_after < (q.delay or 0):
            raise QuarlError(
                f"quant.freeze_after={q.freeze_after} comes before quant.delay={q.delay}: ranges must be "
                "observed with fake quant on before they freeze; use a step >= quant.delay, or null."
            )

    def prepare(self, cfg: DictConfig) -> None:
        if _formats.implied_bits(cfg.quant):
            cfg.quant.act_bits = 32  # QAT in a format quantizes weights only (check_format): recorded as run
        if cfg.quant.delay is None:
            cfg.quant.delay = delay(cfg)  # recorded as the step it really switched on
        if delay(cfg) >= train_steps(cfg):
            log.warning(
                "quant.delay=%d is not below the training budget (%d steps): QAT never switches on during training.",
                delay(cfg),
                train_steps(cfg),
            )

    def policy_tag(self, quant: DictConfig) -> str:
        name = _formats.format_name(quant)
        return f"-qat{quant.bits}" if name == _formats.INTEGER else f"-qat-{name}"

    def policy_kind(self, quant: DictConfig) -> str:
        name = _formats.format_name(quant)
        return f"QAT {quant.bits}-bit" if name == _formats.INTEGER else f"QAT {name}"

    def training_hook(self, model: BaseAlgorithm, cfg: DictConfig) -> QATHook:
        return QATHook(model, cfg)

    def restore(self, model: BaseAlgorithm, quant: DictConfig, folder: Path) -> None:
        """The fake-quant graph back on the loaded policy, on and frozen: it comes quantized."""
        import torch

        from quarl.quantize import fake_quant as qat

        states = torch.load(folder / STATE_FILE, weights_only=True)
        qat.restore(model, quant, states, _formats.weight_formats(quant))


METHODS = (QAT(),)
