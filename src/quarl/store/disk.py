"""Whether a failed write ran out of disk space: the store's and the policy cache's writers give no
OS error for it, only a vague message."""

from __future__ import annotations

import errno
import shutil
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
