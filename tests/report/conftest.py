"""The report tests read the ~1,060 committed records many times over: each read rebuilds a SQLite
store from them in a temporary folder, one connection and commit a record (about 26 s on a disk
with its syncs, 8 s on tmpfs). Here that store lives on tmpfs where there is one, and the campaign
read from a folder of records is kept for the test process, keyed by every record file's name and
bytes: a test that reads the same records again (or a copy of them) gets an equal campaign, and an
edited record is read afresh. A whole report is kept the same way (`built_report`), keyed by every
input the build reads."""

from __future__ import annotations

import copy
import hashlib
import shutil
import tempfile
from pathlib import Path

import pytest

from quarl.report import build, campaign

_read = campaign.load_campaign
_campaigns: dict[str, campaign.Campaign] = {}
_build = build.build
_reports: dict[tuple, str] = {}
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


def report_inputs(records: Path, folder: Path, sweeps: Path, figures: bool) -> tuple:
    """A key of every input a report's build reads: the records, the folder's files but the report
    itself and its figures (written, never read), the sweeps, and whether figures are drawn."""
    return contents(records), contents(folder, skip=(campaign.REPORT, campaign.FIGURES)), contents(sweeps), figures


def built_report(records: Path, folder: Path, sweeps: Path, figures: bool = True, fresh: bool = False) -> str:
    """`build.build(...)`, built once for the test process per `report_inputs` (built anew and kept
    with `fresh`): the same inputs, or a copy of them, give the report built before."""
    key = report_inputs(records, folder, sweeps, figures)
    if fresh or key not in _reports:
        _reports[key] = _build(records, folder, sweeps, figures)
    return _reports[key]


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
