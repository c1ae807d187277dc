"""Named steps of a long piece of collation work, shown as they run: a tqdm bar on a terminal (the
step in its postfix), a log line per step off one (a pipe, a log file, a SLURM job).

    with Steps("Collating 744 records", total=3) as steps:
        steps.next("sweet-spot plots")
        ...
        steps.next("error tables")
        ...

logs, when stderr is not a terminal, `Collating 744 records: sweet-spot plots (1/3)`, ... and
`Collating 744 records: done in 47 s`.
"""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import Optional

from quarl.progress import Progress, duration

log = logging.getLogger(__name__)


class Steps:
    """`total` named steps under `desc`; `next(name)` ends the step before and starts `name`."""

    def __init__(self, desc: str, total: int, logger: logging.Logger = log, interactive: Optional[bool] = None) -> None:
        self.desc, self.total, self.logger = desc, total, logger
        self.progress = Progress(total=total, desc=desc, unit="step", interval_s=0, interactive=interactive)
        self.started = 0
        self.start = time.perf_counter()

    def next(self, name: str) -> None:
        """Count the step before as done and say that `name` runs now."""
        if self.started:
            self.progress.update(1)
        self.started += 1
        if self.progress.interactive:
            self.progress.update(0, step=name)
            self.progress.bar.refresh()  # the step that runs now, not at the next update
        else:
            self.logger.info("%s: %s (%d/%d)", self.desc, name, self.started, self.total)

    def close(self) -> None:
        """Close the bar and log how long the steps took."""
        if self.started:
            self.progress.update(1)
        self.progress.close()
        self.logger.info("%s: done in %s", self.desc, duration(time.perf_counter() - self.start))

    def __enter__(self) -> "Steps":
        return self

    def __exit__(self, kind: Optional[type], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if exc is None:
            self.close()
        else:
            self.progress.close()
