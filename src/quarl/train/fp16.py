"""float16 mixed precision for DQN: SB3's `DQN.train` with its update under fp16 autocast and a
`torch.amp.GradScaler`, the loss scaling the paper's mixed-precision study used.

float16 has 5 exponent bits: small gradients underflow to zero unless the loss is scaled up before
backward. SB3's `DQN.train` has no hook for that, so `FP16DQN` overrides it, step for step as in SB3
2.9.2 (the target network's greedy 1-step TD target, the Huber loss, gradient-norm clipping, the
logged loss and update count), with four changes: the forward passes run under fp16 autocast, the
loss is scaled before backward, the gradients are unscaled before clipping (so clipping sees the
true gradients), and `scaler.step` skips an update whose gradients hold an inf or a nan, after which
`scaler.update` lowers the scale. Skipped updates are counted in `skipped_steps` and logged.

Works on the CPU too (fp16 autocast and `GradScaler("cpu")`), where it is a test, not a speedup.
The parameters, the optimizer state and the saved policy stay float32; the scaler's state is not
saved (a loaded model starts again from `init_scale`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from stable_baselines3 import DQN

DTYPE = torch.float16


class FP16DQN(DQN):
    """SB3's DQN whose gradient updates run in float16 autocast with loss scaling.

    `init_scale` and `growth_interval` are the GradScaler's (its defaults); everything else is DQN's.
    """

    def __init__(self, *args: Any, init_scale: float = 2.0**16, growth_interval: int = 2000, **kwargs: Any) -> None:
        self.init_scale = init_scale
        self.growth_interval = growth_interval
        self.skipped_steps = 0
        super().__init__(*args, **kwargs)

    def _setup_model(self) -> None:
        super()._setup_model()
        self.scaler = torch.amp.GradScaler(
            self.device.type, init_scale=self.init_scale, growth_interval=self.growth_interval
        )

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "scaler"]

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        """SB3 2.9.2's `DQN.train` with fp16 autocast and the scaler around its optimizer step."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        optimizer = self.policy.optimizer
        losses = []
        for _ in range(gradient_steps):
            replay_data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)  # type: ignore[union-attr]
            discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma
            with torch.autocast(self.device.type, dtype=DTYPE):
                with torch.no_grad():
                    next_q_values, _ = self.q_net_target(replay_data.next_observations).max(dim=1)
                    next_q_values = next_q_values.reshape(-1, 1).float()
                    target_q_values = replay_data.rewards + (1 - replay_data.dones) * discounts * next_q_values
                current_q_values = self.q_net(replay_data.observations)
                current_q_values = torch.gather(current_q_values, dim=1, index=replay_data.actions.long())
            # the Huber loss in float32, outside autocast
            loss = F.smooth_l1_loss(current_q_values.float(), target_q_values)
            losses.append(loss.item())

            optimizer.zero_grad()
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(optimizer)  # clipping sees the true gradients
            torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
            scale = self.scaler.get_scale()
            self.scaler.step(optimizer)  # skipped where the gradients hold an inf or a nan
            self.scaler.update()
            self.skipped_steps += int(self.scaler.get_scale() < scale)  # the scale backs off only on a skip

        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/loss", np.mean(losses))
        self.logger.record("train/grad_scale", self.scaler.get_scale())
        self.logger.record("train/skipped_steps", self.skipped_steps)
