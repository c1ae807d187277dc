"""Whether a failed write ran out of disk space (the store's and the policy cache's writers give no
OS error for it, only a vague message), and whether a folder can be written at all before work is
done for it."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

#: Free bytes below which a failed write is put down to a full disk (torch's writer says only
#: "unexpected pos" or "file write failed", SQLite often "disk I/O error", without the OS error).
NEARLY_FULL = 16 * 2**20


def nearly_full(where: Path) -> bool:
    """Whether the file system holding `where` (or its nearest existing parent) has next to no room."""
    for folder in (where, *where.parents):
        if folder.exists():
            try:
                return shutil.disk_usage(folder).free < NEARLY_FULL
            except OSError:
                return False
    return False


def disk_full(exc: BaseException, where: Path) -> bool:
    """Whether a write under `where` failed for want of space: the OS said so (ENOSPC, EDQUOT), or
    torch's writer failed (it gives no OS error) where next to nothing is free."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    words = ("unexpected pos", "file write failed")
    return isinstance(exc, RuntimeError) and any(w in str(exc) for w in words) and nearly_full(where)


def cannot_write(folder: Path) -> str | None:
    """Why nothing can be made in the existing `folder` ("is read-only", "says: ..."), or None: a
    folder is made and removed there, so permissions, a read-only mount, /proc and a full disk all
    say so (os.access answers yes to root on all of them)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".quarl-probe-", dir=folder))
    except OSError as exc:
        return "is read-only" if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else f"says: {exc.strerror}"
    return None


def cannot_make(path: Path) -> str | None:
    """Why the folder `path` could not be made or written (its nearest existing folder's reason, or a
    file in its way), or None; nothing is left behind."""
    existing = path.expanduser().absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    why = cannot_write(existing)
    return f"{existing} {why}" if why else None
