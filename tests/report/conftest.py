"""The report tests read the ~1,060 committed records many times over: each read rebuilds a SQLite
store from them in a temporary folder, one connection and commit a record (about 26 s on a disk
with its syncs, 8 s on tmpfs). Here that store lives on tmpfs where there is one, and the campaign
read from a folder of records is kept for the test process, keyed by every record file's name and
bytes: a test that reads the same records again (or a copy of them) gets an equal campaign, and an
edited record is read afresh."""

from __future__ import annotations

import copy
import hashlib
import shutil
import tempfile
from pathlib import Path

import pytest

from quarl.report import campaign

_read = campaign.load_campaign
_campaigns: dict[str, campaign.Campaign] = {}
TMPFS = Path("/dev/shm")


def contents(folder: Path, skip: tuple[str, ...] = ()) -> str:
    """A digest of every file under `folder` (its relative path and bytes), less the names in `skip`."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder)
        if relative.parts[0] in skip:
            continue
        digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _on_tmpfs(records: Path) -> campaign.Campaign:
    """`load_campaign(records)` with its temporary store on tmpfs, where there is one."""
    if not TMPFS.is_dir():
        return _read(records)
    before = tempfile.tempdir
    tempfile.tempdir = tempfile.mkdtemp(prefix="quarl-report-tests-", dir=TMPFS)
    try:
        return _read(records)
    finally:
        shutil.rmtree(tempfile.tempdir, ignore_errors=True)
        tempfile.tempdir = before


def _load_campaign(records: Path) -> campaign.Campaign:
    if not records.is_dir():
        return _read(records)  # its own error
    key = contents(records)
    if key not in _campaigns:
        _campaigns[key] = _on_tmpfs(records)
    return copy.deepcopy(_campaigns[key])  # a section that changed its frames in place changes no other build


@pytest.fixture(autouse=True)
def _fast_campaigns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(campaign, "load_campaign", _load_campaign)
