"""A Hydra launcher for tests: records the override list of each job it is given and runs none.

Chosen with `hydra.launcher._target_=hydra_plugins.quarl_recording_launcher.RecordingLauncher` and
tests/plugins on PYTHONPATH (Hydra takes plugins from the hydra_plugins package only).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class RecordingLauncher(Launcher):
    """Appends each job's overrides, one JSON list a line, to launched.jsonl in the launch folder."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        pass

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        with (Path.cwd() / "launched.jsonl").open("a") as out:
            out.writelines(json.dumps(list(job)) + "\n" for job in job_overrides)
        return [JobReturn(overrides=list(job), status=JobStatus.COMPLETED) for job in job_overrides]
