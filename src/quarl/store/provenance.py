"""Where a record came from: code version, packages, host and time."""

from __future__ import annotations

import functools
import platform
import socket
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

PACKAGES = ("quarl", "torch", "stable-baselines3", "gymnasium", "numpy", "hydra-core")
SOURCE_DIR = Path(__file__).resolve().parent


def now() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@functools.lru_cache(maxsize=None)
def _versions() -> tuple[tuple[str, str], ...]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return tuple(found.items())


def versions() -> dict[str, str]:
    """Versions of Python and of the packages that shape results (read once per process)."""
    return dict(_versions())


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=SOURCE_DIR, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.lru_cache(maxsize=None)
def git_state() -> tuple[str | None, bool | None]:
    """Commit of quarl's source tree and whether tracked files differ from it (None outside git),
    read once per process: the code a process runs is the code it imported when it started."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return None, None
    return commit, bool(_git("status", "--porcelain", "--untracked-files=no"))


@functools.lru_cache(maxsize=None)
def host() -> str:
    """The machine's name."""
    return socket.gethostname()
