"""`ledger.py run`: the ledger's next jobs that fit a device call, each under its own timeout, and
what each leaves packed into --out ($OUT) after every job, so that a call cut short still brings
back what was done.

The gate jobs run first (the CUDA smoke); one that fails ends the call. Then, in the ledger's order,
each job that is not done and fits the time left: its cost (measured or estimated), or at least its
min_s for a resumable job, which is given all the time left and resumes from its state folder in
the next call. A job past its timeout gets SIGTERM (a quarl run ends its cell cleanly and keeps its
checkpoint), then SIGKILL after STOP_GRACE_S.

--out receives at most 8 files (the device tool's limit): ledger.json (what ran, how long each took,
how it ended: `ledger.py land` turns it into the run's page and the measured costs), log.txt (every
job's output), records.tar.gz (the record JSONs of every run folder under the jobs' {out}/runs),
files.tar.gz (each job's job.log and its `leaves`) and state.tar.00.. (the resumable jobs' state
folders, in parts of at most 15 MiB: checkpoints, the policy cache, the results store).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ledger_jobs import ROOT, SPENT_FILE, Job, Landed, LedgerError, fill, load, pick

log = logging.getLogger("ledger")

RESERVE_S = 15.0  # kept from the budget for packing what comes back
STOP_GRACE_S = 30.0  # SIGTERM, then SIGKILL this long after
PART_BYTES = 15 * 2**20  # a file back from $OUT is at most 16 MiB
MAX_PARTS = 4  # 8 files back: ledger.json, log.txt, records.tar.gz, files.tar.gz and the state's parts


class Clock:
    """The seconds a call has left."""

    def __init__(self, budget_s: float) -> None:
        self.end = time.monotonic() + budget_s

    def left(self) -> float:
        return self.end - time.monotonic()


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the job's process group, SIGKILL after STOP_GRACE_S."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_job(job: Job, folder: Path, state: Path, timeout_s: float) -> dict[str, Any]:
    """Run one job's command from the repository root, its output in `folder`/job.log; how it went."""
    folder.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    command = fill(job.command, folder, state, sys.executable)
    log.info("%s: running, at most %.0f s", job.name, timeout_s)
    start, cut = time.monotonic(), False
    with (folder / "job.log").open("w") as out:
        out.write(f"$ {command}\n")
        out.flush()
        process = subprocess.Popen(
            ["bash", "-c", command],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            rc = process.wait(timeout=max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            cut = True
            stop(process)
            rc = process.returncode
    seconds = time.monotonic() - start
    ended = f"cut at its {timeout_s:.0f} s timeout" if cut else ("completed" if rc == 0 else f"failed (exit {rc})")
    log.info("%s: %s after %.1f s", job.name, ended, seconds)
    return {
        "name": job.name,
        "seconds": round(seconds, 1),
        "timeout_s": round(timeout_s),
        "rc": rc,
        "ended": ended,
        "completed": rc == 0 and not cut,
        "resumable": job.resumable,
        "gate": job.gate,
    }


def _replace(part: Path) -> None:
    """Move a finished `<name>.part` file onto `<name>`."""
    part.replace(part.with_suffix(""))


def records_tar(work: Path, target: Path) -> int:
    """The record JSONs of every run folder under `work`/<job>/runs as one tar; how many."""
    from quarl.report.build import archive  # quarl names the records as the records folder does

    with tempfile.TemporaryDirectory() as tmp:
        for runs in sorted(work.glob("*/runs")):
            archive(runs, Path(tmp))
        found = sorted(Path(tmp).glob("*.record.json"))
        part = target.with_name(target.name + ".part")
        with tarfile.open(part, "w:gz") as tar:
            for path in found:
                tar.add(path, arcname=path.name)
    _replace(part)
    return len(found)


def files_tar(work: Path, jobs: dict[str, Job], target: Path) -> None:
    """Each job's job.log and its `leaves`, under <job>/, as one tar."""
    part = target.with_name(target.name + ".part")
    with tarfile.open(part, "w:gz") as tar:
        for name, job in jobs.items():
            folder = work / name
            for pattern in ["job.log", *job.leaves]:
                for path in sorted(folder.glob(pattern)):
                    if path.is_file():
                        tar.add(path, arcname=f"{name}/{path.relative_to(folder)}")
    _replace(part)


def state_parts(state_root: Path, names: list[str], out: Path) -> str:
    """The resumable jobs' state folders as state.tar.00, .01, ... (PART_BYTES each) in `out`."""
    for old in out.glob("state.tar.*"):
        old.unlink()
    folders = [state_root / n for n in names if (state_root / n).is_dir()]
    if not folders:
        return "none"
    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp) / "state.tar"
        with tarfile.open(whole, "w") as tar:  # checkpoints are float tensors: gzip would gain little
            for folder in folders:
                tar.add(folder, arcname=folder.name, filter=lambda t: None if t.name.endswith(".lock") else t)
        size = whole.stat().st_size
        if size > PART_BYTES * MAX_PARTS:
            log.error("state of %s is %.0f MiB: over %d parts, not brought back", names, size / 2**20, MAX_PARTS)
            return f"not brought back: {size / 2**20:.0f} MiB"
        with whole.open("rb") as f:
            index = 0
            while chunk := f.read(PART_BYTES):
                (out / f"state.tar.{index:02d}").write_bytes(chunk)
                index += 1
    return f"{index} part(s), {size / 2**20:.1f} MiB"


def pack(out: Path, work: Path, state_root: Path, summary: dict[str, Any], jobs: dict[str, Job]) -> None:
    """Everything the call has to bring back, written into `out` (again after each job)."""
    out.mkdir(parents=True, exist_ok=True)
    part = out / "log.txt.part"
    with part.open("w") as text:
        for entry in summary["jobs"]:
            text.write(f"\n===== {entry['name']}: {entry['ended']} after {entry['seconds']} s =====\n")
            job_log = work / entry["name"] / "job.log"
            text.write(job_log.read_text(errors="replace") if job_log.exists() else "(no output)\n")
    _replace(part)
    try:
        summary["records"] = records_tar(work, out / "records.tar.gz")
    except Exception as exc:  # quarl missing or a broken record: the rest still comes back
        log.error("records not packed: %s: %s", type(exc).__name__, exc)
        summary["records"] = f"not packed: {exc}"
    files_tar(work, jobs, out / "files.tar.gz")
    summary["state"] = state_parts(state_root, [n for n, j in jobs.items() if j.resumable], out)
    part = out / "ledger.json.part"
    part.write_text(json.dumps(summary, indent=1) + "\n")
    _replace(part)


def add_spent(state: Path, seconds: float) -> None:
    """Add a call's seconds to a resumable job's spent time (its state folder's SPENT_FILE)."""
    path = state / SPENT_FILE
    try:
        before = json.loads(path.read_text())
    except (OSError, ValueError):
        before = {"spent_s": 0.0, "calls": 0}
    path.write_text(json.dumps({"spent_s": round(before["spent_s"] + seconds, 1), "calls": before["calls"] + 1}))


def run_call(a: argparse.Namespace) -> int:
    """`ledger.py run`: the gates, then the next jobs that fit; 1 when a gate or a job failed."""
    overrides = {}
    for item in a.var:
        if "=" not in item:
            raise LedgerError(f"--var {item!r}: write NAME=VALUE")
        key, value = item.split("=", 1)
        overrides[key] = value
    ledger = load(a.ledger, overrides)
    landed = Landed.read(a.records, ROOT, a.state)
    only = {ledger.job(name).name for name in a.only} if a.only else None  # an unknown name is refused
    before = a.spent_s if a.spent_s is not None else ledger.overhead_s
    clock = Clock(a.budget_s - before - RESERVE_S)
    work: Path = a.work
    shutil.rmtree(work, ignore_errors=True)
    info = a.device_info.read_text(errors="replace") if a.device_info and a.device_info.exists() else ""
    summary: dict[str, Any] = {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": info.strip(),
        "budget_s": a.budget_s,
        "overhead_s": a.spent_s,
        "vars": overrides,
        "jobs": [],
    }
    ran: dict[str, Job] = {}
    failed = False

    def one(job: Job, timeout_s: float) -> dict[str, Any]:
        entry = run_job(job, work / job.name, a.state / job.name, timeout_s)
        ran[job.name] = job
        summary["jobs"].append(entry)
        if job.resumable:
            add_spent(a.state / job.name, entry["seconds"])
        pack(a.out, work, a.state, summary, ran)
        return entry

    for gate in ledger.jobs:
        if gate.gate and (only is None or gate.name in only):
            if clock.left() < gate.cost_s or not one(gate, min(clock.left(), 3 * gate.cost_s + 30))["completed"]:
                log.error("gate %s did not pass: no other job runs", gate.name)
                summary["ended"] = "the gate did not pass"
                pack(a.out, work, a.state, summary, ran)
                return 1
    while (job := pick(ledger, clock.left() - STOP_GRACE_S, landed, set(ran), only)) is not None:
        left = clock.left() - STOP_GRACE_S
        entry = one(job, left if job.resumable else min(left, 1.5 * job.cost_s + 30))
        failed |= not entry["completed"] and not (job.resumable and entry["ended"].startswith("cut"))
    summary["ended"] = f"{clock.left():.0f} s of the budget left"
    pack(a.out, work, a.state, summary, ran)
    log.info("ran %s; %s", ", ".join(ran) or "nothing", summary["ended"])
    return 1 if failed else 0
