"""Errors that describe a user mistake: shown as one sentence, never as a traceback; and the
signals that end a run as Ctrl-C does."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator


class QuarlError(Exception):
    """A problem the user can fix (bad option, missing file, ...); the message says how."""


class IncompatibleCell(QuarlError):
    """This combination of choices cannot run (the paper's "n/a"); a sweep records it as skipped."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (SLURM's preemption and time limit, `timeout`, systemd, `docker stop`, a
    closed terminal), raised where the signal lands: a run ends as after Ctrl-C, through the same
    cleanup (no `running` marker, no temporary folders, the training checkpoint kept), with one line
    and the shell's exit code for the signal (143, 129)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


#: The signals that end a run like Ctrl-C (SIGINT, Python's KeyboardInterrupt, is the third).
TERMINATING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def ended(exc: KeyboardInterrupt) -> tuple[str, int]:
    """How an interrupted run says it ended, and its exit code: ("Interrupted", 130) for Ctrl-C,
    ("Terminated by SIGTERM", 143) and ("Terminated by SIGHUP", 129)."""
    if isinstance(exc, Terminated):
        return f"Terminated by {exc.name}", exc.exit_code
    return "Interrupted", 130


def raise_terminated(signum: int, frame: Any) -> None:
    """The handler that turns SIGTERM / SIGHUP into `Terminated` in the main thread."""
    raise Terminated(signum)


@contextlib.contextmanager
def ending_like_ctrl_c() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise `Terminated` where they still have their default
    disposition (which ends the process at once, with no cleanup). An ignored SIGHUP (`nohup`) and
    a handler set by someone else (submitit's, which lets a SLURM job train on until KillWait) are
    left as they are; so are threads other than the main one, where Python runs no handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = [s for s in TERMINATING if signal.getsignal(s) == signal.SIG_DFL]
    for signum in taken:
        signal.signal(signum, raise_terminated)
    try:
        yield
    finally:
        for signum in taken:
            if signal.getsignal(signum) is raise_terminated:
                signal.signal(signum, signal.SIG_DFL)
