"""Mixed-precision training (`train.amp=true`): the algorithm's gradient updates run under
`torch.autocast` in bfloat16, SB3's own training loops unchanged.

bfloat16 keeps float32's exponent range, so gradients need no loss scaling (fp16 needs a grad scaler
inside the update: `quarl.train.fp16.FP16DQN`, DQN's update with one, which bench_amp measures).
Matrix products and convolutions run in bfloat16; losses, norms and softmaxes stay float32
(autocast's own lists); the parameters, the optimizer state and the saved policy stay float32.
Acting, evaluation and checkpoints run outside autocast: a callback enters it when a rollout ends
(SB3 trains next) and leaves it when the next rollout starts and when training ends.
"""

from __future__ import annotations

from typing import Optional

import torch
from stable_baselines3.common.callbacks import BaseCallback

DTYPE = torch.bfloat16


class AutocastWhileTraining(BaseCallback):
    """Autocast in bfloat16 on the model's device during the algorithm's updates only."""

    def __init__(self) -> None:
        super().__init__()
        self.context: Optional[torch.autocast] = None

    def _on_rollout_end(self) -> None:
        self.leave()
        self.context = torch.autocast(self.model.device.type, dtype=DTYPE)
        self.context.__enter__()

    def _on_rollout_start(self) -> None:
        self.leave()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self.leave()

    def leave(self) -> None:
        """Leave autocast if inside it (safe to call twice)."""
        if self.context is not None:
            self.context.__exit__(None, None, None)
            self.context = None
