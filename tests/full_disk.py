"""A real full file system for tests: a small tmpfs mounted in a user namespace (`unshare -rm`), a
Python script run inside it, and the lines that fill it up. Skipped where namespaces or mounts are
not allowed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ENV, ROOT

#: Script lines that take every block of the current folder's file system (a file named `filler`).
FILL = """
fd = os.open("filler", os.O_WRONLY | os.O_CREAT)
for size in (4096, 1):  # every block of the file system taken
    try:
        while True:
            os.write(fd, b"x" * size)
    except OSError:
        pass
os.close(fd)
"""
_MOUNT = 'mount -t tmpfs -o size={size} tmpfs "$1" || exit 77; cd "$1" && shift && exec "$@"'


def run_on_a_small_disk(folder: Path, size: str, script: str) -> subprocess.CompletedProcess:
    """`script` (Python, run from `folder` on a fresh `size` tmpfs, quarl and tests importable);
    pytest skips where no such mount can be made. A script that prints 'refused:' counts as run."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1): cannot mount a small file system without root")
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [unshare, "-rm", "sh", "-c", _MOUNT.format(size=size), "sh", str(folder), sys.executable, "-c", script],
        capture_output=True, text=True, timeout=300, env={**ENV, "PYTHONPATH": str(ROOT)},
    )
    if done.returncode != 0 and "refused:" not in done.stdout:
        pytest.skip(f"no tmpfs mount here: {done.stderr.strip()[-200:]}")
    return done
