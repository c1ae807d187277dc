"""Progress a user can see wherever the output goes: a tqdm bar on a terminal, a log line every
`interval_s` seconds otherwise (a pipe, a log file, a SLURM job).

    with Progress(total=100_000, desc="Training fp32 ppo", unit="step") as progress:
        for ...:
            progress.update(n_envs, **{"return": 212.4})

logs, when stderr is not a terminal, lines such as
`Training fp32 ppo: 51200/100000 steps (51%), 1830 steps/s, return 212.4, 28 s elapsed, ~27 s left`.

    with activity("Compiling the onnx_int8 policy"):
        ...

says what a long silent stretch is doing: a line when it starts, `... still running (30 s)` every
`interval_s` seconds from a timer thread when not on a terminal, and its time when it ends.

    with Steps("Collating 744 records", total=3) as steps:
        steps.next("sweet-spot plots")
        ...

names the steps of a long piece of work (collation, the report) as they run: the step in a bar's
postfix on a terminal, `Collating 744 records: sweet-spot plots (1/3)` and `... done in 47 s` off one.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from types import TracebackType
from typing import Any, Iterator, Optional

from tqdm.auto import tqdm

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 30.0


def is_terminal() -> bool:
    """Whether progress goes to a terminal (stderr is a TTY): bars there, log lines otherwise."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def duration(seconds: float) -> str:
    """A short human duration: 42 s, 3 min 5 s, 2 h 07 min."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e-2 and value != 0 else f"{value:.1f}"
    return str(value)


class Progress:
    """Progress of a task of `total` units (None: unknown), shown as a tqdm bar when `interactive`
    (default: stderr is a terminal), else as a log line every `interval_s` seconds (0: none).

    `update(n, **info)` adds `n` done units; `info` (a recent return, a loss, ...) is shown in the
    bar's postfix and in the log lines, the latest value of each key. `initial` units were done
    before (a resumed run): they count towards the total, not towards the rate.
    """

    def __init__(
        self,
        total: Optional[int],
        desc: str,
        *,
        unit: str = "step",
        interval_s: float = DEFAULT_INTERVAL_S,
        interactive: Optional[bool] = None,
        enabled: bool = True,
        initial: int = 0,
        logger: logging.Logger = log,
    ) -> None:
        self.total, self.desc, self.unit, self.interval_s = total, desc, unit, interval_s
        self.interactive = is_terminal() if interactive is None else interactive
        self.enabled, self.initial, self.done, self.logger = enabled, initial, initial, logger
        self.info: dict[str, Any] = {}
        self.start = self.last_line = time.perf_counter()
        self.bar = tqdm(
            total=total,
            initial=initial,
            desc=desc,
            unit=unit,
            leave=False,
            dynamic_ncols=True,
            disable=not (enabled and self.interactive),
        )

    @property
    def logging(self) -> bool:
        """Whether this progress is shown as log lines."""
        return self.enabled and not self.interactive and self.interval_s > 0

    def update(self, n: int = 1, **info: Any) -> None:
        """`n` more units done; `info` replaces the shown values of its keys."""
        self.done += n
        if info:
            self.info.update(info)
        if not self.enabled:
            return
        if self.interactive:
            if info:
                self.bar.set_postfix({k: _shown(v) for k, v in self.info.items()}, refresh=False)
            self.bar.update(n)
            return
        now = time.perf_counter()
        if self.logging and now - self.last_line >= self.interval_s:
            self.last_line = now
            self.logger.info("%s", self.line(now))

    def line(self, now: Optional[float] = None) -> str:
        """The progress line as logged: done/total, percentage, rate, info, elapsed and time left."""
        elapsed = (time.perf_counter() if now is None else now) - self.start
        rate = (self.done - self.initial) / elapsed if elapsed > 0 else 0.0
        parts = [
            f"{self.done}/{self.total} {self.unit}s ({100 * self.done / self.total:.0f}%)"
            if self.total
            else f"{self.done} {self.unit}s",
            f"{rate:.3g} {self.unit}s/s" if rate < 10 else f"{rate:.0f} {self.unit}s/s",
        ]
        parts += [f"{k} {_shown(v)}" for k, v in self.info.items()]
        parts.append(f"{duration(elapsed)} elapsed")
        if self.total and rate > 0 and self.done < self.total:
            parts.append(f"~{duration((self.total - self.done) / rate)} left")
        return f"{self.desc}: " + ", ".join(parts)

    def close(self) -> None:
        """Close the bar (a finished task's line is the caller's to log)."""
        self.bar.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, kind: Optional[type], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()


@contextlib.contextmanager
def activity(
    desc: str, interval_s: float = DEFAULT_INTERVAL_S, interactive: Optional[bool] = None, logger: logging.Logger = log
) -> Iterator[None]:
    """Say what a long step without its own progress is doing: `desc ...` when it starts, then, when
    not on a terminal, `desc: still running (N s)` every `interval_s` seconds, and `desc: done in N s`."""
    start = time.perf_counter()
    logger.info("%s ...", desc)
    stop = threading.Event()
    beat = None
    if not (is_terminal() if interactive is None else interactive) and interval_s > 0:

        def heartbeat() -> None:
            while not stop.wait(interval_s):
                logger.info("%s: still running (%s)", desc, duration(time.perf_counter() - start))

        beat = threading.Thread(target=heartbeat, name="quarl-activity", daemon=True)
        beat.start()
    try:
        yield
    finally:
        stop.set()
        if beat is not None:
            beat.join()
    logger.info("%s: done in %s", desc, duration(time.perf_counter() - start))


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
