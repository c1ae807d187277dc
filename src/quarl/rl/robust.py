"""Training for quantization robustness: policies trained so that they keep their reward once their
weights are quantized (`train.robust`), for any quantization method to quantize afterwards.

Both techniques train at perturbed weights: the loss and its gradient are computed at w + e, and the
optimizer updates w. The perturbation lives in the optimizer (SB3's `optimizer_class`, so SB3's own
training loops run unchanged) and only while the algorithm trains: a callback takes it off before
every rollout, evaluation and checkpoint, and at the end, so the policy acts and is saved at w.

- ``sam``: sharpness-aware minimisation (Foret et al. 2021; QoRL's `--optimize-choice SAM`), e the
  ascent step rho * g / ||g|| over the optimizer's parameters. SAM takes g at w on the same batch, a
  second forward and backward pass SB3's loops do not make; here g is the gradient of the previous
  step (taken at its perturbed weights), as momentum-SAM (Becker et al. 2022) does with its momentum:
  one gradient per step.
- ``noise``: pseudo-quantization noise (Défossez et al. 2022, DiffQ; Fan et al. 2021, Quant-Noise):
  e uniform in half a quantization step of `train.robust_bits` bits, per tensor, drawn anew each step,
  so the policy learns weights whose rounding to that grid does not change what it does.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

from quarl.errors import QuarlError

TECHNIQUES = ("sam", "noise")


class Perturbing:
    """An optimizer mixin: its step restores w, steps, then moves the parameters to w + e."""

    param_groups: list[dict[str, Any]]

    def __init__(self, params: Iterable[Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(params, *args, **kwargs)  # type: ignore[call-arg]
        self.offsets: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.saved: list[torch.Tensor] = []  # w while the parameters are at w + e (restored exactly)

    def parameters(self) -> list[torch.Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    @torch.no_grad()
    def take_off(self) -> None:
        """Move the parameters back to w (before acting, evaluating, saving)."""
        for (p, _), w in zip(self.offsets, self.saved):
            p.copy_(w)
        self.saved = []

    @torch.no_grad()
    def put_on(self) -> None:
        """Move the parameters to w + e (before training steps), where an e was computed."""
        if not self.saved and self.offsets:
            self.saved = [p.detach().clone() for p, _ in self.offsets]
            for p, e in self.offsets:
                p.add_(e)

    def step(self, closure: Any = None) -> Any:
        self.take_off()
        loss = super().step(closure)  # type: ignore[misc]
        with torch.no_grad():
            self.offsets = self.perturbation()
        self.put_on()
        return loss

    def perturbation(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(parameter, e) for the next step."""
        raise NotImplementedError


class SAM(Perturbing):
    """Sharpness-aware minimisation with the previous step's gradient as the ascent direction."""

    def __init__(self, params: Iterable[Any], *args: Any, rho: float = 0.05, **kwargs: Any) -> None:
        super().__init__(params, *args, **kwargs)
        self.rho = rho

    def perturbation(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        grads = [(p, p.grad) for p in self.parameters() if p.grad is not None]
        norm = math.sqrt(sum(float(g.pow(2).sum()) for _, g in grads))
        if norm == 0.0:
            return []
        return [(p, g * (self.rho / norm)) for p, g in grads]


class Noise(Perturbing):
    """Uniform noise of half a quantization step at `bits` bits (per tensor), drawn every step."""

    def __init__(self, params: Iterable[Any], *args: Any, bits: int = 4, **kwargs: Any) -> None:
        super().__init__(params, *args, **kwargs)
        self.bits = bits

    def perturbation(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        offsets = []
        for p in self.parameters():
            step = float(p.max() - p.min()) / (2**self.bits - 1) if p.numel() > 1 else 0.0
            if step > 0.0:
                offsets.append((p, (torch.rand_like(p) - 0.5) * step))
        return offsets


#: The optimizers quarl's algorithms train with (SB3's Adam, A2C's RMSprop, rl-zoo3's Atari RMSprop).
BASES = (torch.optim.Adam, torch.optim.RMSprop, RMSpropTFLike)


def _classes() -> dict[tuple[str, type], type]:
    """A perturbing class per technique and base optimizer, defined in this module (SB3 pickles
    `optimizer_class` into model.zip by name, so a saved policy loads again)."""
    made: dict[tuple[str, type], type] = {}
    for technique, mixin in (("sam", SAM), ("noise", Noise)):
        for base in BASES:
            name = f"{mixin.__name__}{base.__name__}"
            cls = type(name, (mixin, base), {"__module__": __name__, "__qualname__": name})
            globals()[name] = cls
            made[technique, base] = cls
    return made


CLASSES = _classes()


def optimizer(technique: str, base: type, train: Any) -> tuple[type, dict[str, Any]]:
    """The optimizer class that trains like `base` with `technique`, and its extra arguments."""
    if (technique, base) not in CLASSES:
        raise QuarlError(f"train.robust={technique} cannot wrap the optimizer {base.__name__}.")
    extra = {"rho": float(train.robust_rho)} if technique == "sam" else {"bits": int(train.robust_bits)}
    return CLASSES[technique, base], extra


def perturbing(model: Any) -> list[Perturbing]:
    """The perturbing optimizers of an SB3 model (policy, actor, critic)."""
    found = []
    for module in model.policy.modules():
        opt = getattr(module, "optimizer", None)
        if isinstance(opt, Perturbing) and opt not in found:
            found.append(opt)
    return found


class OnlyWhileTraining(BaseCallback):
    """Keeps the perturbation off while the algorithm collects experience, is evaluated or saved."""

    def _on_rollout_start(self) -> None:
        for opt in perturbing(self.model):
            opt.take_off()

    def _on_rollout_end(self) -> None:
        for opt in perturbing(self.model):
            opt.put_on()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        for opt in perturbing(self.model):
            opt.take_off()
