"""A training killed 512 env steps after its first checkpoint, for the tests of what a resumed
training keeps (its first curve points past the checkpoint are written, as in a real kill)."""

from __future__ import annotations

import pytest

from quarl.train import checkpoint
from quarl.train import trainer as training


class Killed(Exception):
    pass


class KilledAfterCheckpoint:
    """Patches the next trainings: `saved` notes each checkpoint's env step, and the curve's dump
    raises Killed once the training is 512 steps past the first; `lift()` lets the next one finish."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch, self.saved = monkeypatch, []
        self._save, self._dump = checkpoint.save, training.TrainingLog.dump

        def save_and_note(where, model, extra):
            self._save(where, model, extra)
            self.saved.append(model.num_timesteps)

        def killed_after_checkpoint(log):
            if self.saved and log.num_timesteps >= self.saved[0] + 512:
                raise Killed
            self._dump(log)

        monkeypatch.setattr(checkpoint, "save", save_and_note)
        monkeypatch.setattr(training.TrainingLog, "dump", killed_after_checkpoint)

    def lift(self) -> None:
        self.monkeypatch.setattr(training.TrainingLog, "dump", self._dump)
