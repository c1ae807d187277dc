"""`ledger.py land <files_at>`: what a device call of the ledger brought back, landed here.

- records.tar.gz: the record JSONs into docs/reproduction/records (a name already there is kept);
- files.tar.gz and log.txt: into docs/reproduction/device_runs/<date>_<gpu>/ (a Markdown file there
  gets `.txt` appended: the site builds only the pages its nav names);
- state.tar.NN: the resumable jobs' state folders (checkpoints, policy cache, store) into
  benchmarks/device/state/, carried to the next call; a job now done has its folder moved to
  benchmarks/device/agents/ (git-ignored: the trained agents, kept off the call's carry);
- a job's `land: append_csv` rows into a CSV of the repository (AMP's runs into amp.csv);
- the call's page docs/reproduction/device_runs/<date>_<gpu>.md, named in mkdocs.yml's nav;
- each job that completed gets its measured cost in ledger.yaml (not for a run with --var
  overrides: a rehearsal is no measurement), and the install time becomes overhead_measured_s.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any

from ledger_jobs import ROOT, SPENT_FILE, Landed, LedgerError, load, needs

log = logging.getLogger("ledger")

RECORD_NAME = re.compile(r"[\w.-]+\.record\.json")


def page_stem(summary: dict[str, Any], runs: Path) -> tuple[str, str]:
    """The call's page name (<date>_<gpu>, then _call2, ...) and the GPU's name."""
    date = str(summary.get("started", "unknown"))[:10]
    found = re.search(r"NVIDIA ([A-Z]+\d+[\w ]*?)(?: \(|$)", summary.get("device", ""), re.M)
    gpu = found.group(1).strip() if found else "device"
    stem = f"{date}_{gpu.split()[0].lower()}"
    n, name = 1, stem
    while (runs / f"{name}.md").exists():
        n += 1
        name = f"{stem}_call{n}"
    return name, gpu


def land_records(tar_path: Path, records: Path) -> tuple[int, int]:
    """Record JSONs of the tar into `records`, names already there kept: (new, in the tar)."""
    if not tar_path.exists():
        return 0, 0
    records.mkdir(parents=True, exist_ok=True)
    new = total = 0
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            if not member.isfile() or not RECORD_NAME.fullmatch(member.name):
                continue
            total += 1
            target = records / member.name
            if not target.exists():
                data = tar.extractfile(member)
                assert data is not None  # a regular file
                target.write_bytes(data.read())
                new += 1
    return new, total


def land_files(files_at: Path, folder: Path) -> list[str]:
    """log.txt and files.tar.gz into `folder` (.md gets .txt appended); the paths landed."""
    folder.mkdir(parents=True, exist_ok=True)
    landed = []
    if (files_at / "log.txt").exists():
        shutil.copyfile(files_at / "log.txt", folder / "log.txt")
        landed.append("log.txt")
    if (files_at / "files.tar.gz").exists():
        with tarfile.open(files_at / "files.tar.gz") as tar:
            for member in tar.getmembers():
                if not member.isfile() or member.name.startswith("/") or ".." in Path(member.name).parts:
                    continue
                name = member.name + ".txt" if member.name.endswith(".md") else member.name
                target = folder / name
                target.parent.mkdir(parents=True, exist_ok=True)
                data = tar.extractfile(member)
                assert data is not None
                target.write_bytes(data.read())
                landed.append(name)
    return landed


def land_state(files_at: Path, state_root: Path) -> list[str]:
    """The state parts joined and unpacked into `state_root`, each job's folder replaced; their names."""
    parts = sorted(files_at.glob("state.tar.[0-9][0-9]"))
    if not parts:
        return []
    whole = io.BytesIO(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(fileobj=whole) as tar:
        names = sorted({m.name.split("/")[0] for m in tar.getmembers()})
        for name in names:
            shutil.rmtree(state_root / name, ignore_errors=True)
        state_root.mkdir(parents=True, exist_ok=True)
        tar.extractall(state_root, filter="data")
    return names


def append_csv(source: Path, target: Path, number: str, per: str) -> int:
    """The rows of `source` appended to `target`, numbered (`number`) after the rows of the same `per`."""
    with source.open(newline="") as f:
        new = list(csv.DictReader(f))
    rows: list[dict[str, str]] = []
    header: list[str] = []
    if target.exists():
        with target.open(newline="") as f:
            reader = csv.DictReader(f)
            rows, header = list(reader), list(reader.fieldnames or [])
    for key in [number, *(k for row in new for k in row)]:
        if key not in header:
            header.append(key)
    for kind in {row.get(per, "") for row in new}:
        taken = [int(r[number]) for r in rows if r.get(per, "") == kind and (r.get(number) or "").isdigit()]
        for row in new:
            if row.get(per, "") == kind:
                row[number] = str(max(taken, default=0) + 1)
    with target.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows([*rows, *new])
    return len(new)


def set_cost(text: str, name: str, seconds: float, why: str) -> str:
    """ledger.yaml's text with job `name`'s cost line made `measured_s: <seconds>  # <why>` (the
    comment lines just above it, which said where the old cost came from, removed)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if re.fullmatch(rf"\s*- name: {re.escape(name)}\s*", line)), None)
    if start is None:
        raise LedgerError(f"no job {name!r} in the ledger's text")
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"\s*- name: ", lines[i])), len(lines))
    at = next((i for i in range(start, end) if re.match(r"\s+(measured_s|estimate_s):", lines[i])), None)
    if at is None:
        raise LedgerError(f"job {name!r} has no cost line")
    indent = re.match(r"\s*", lines[at]).group(0)  # type: ignore[union-attr]  # always matches
    first = at
    while first - 1 > start and lines[first - 1].strip().startswith("#"):
        first -= 1
    lines[first : at + 1] = [f"{indent}# {why}", f"{indent}measured_s: {max(1, round(seconds))}"]
    return "\n".join(lines) + "\n"


def update_costs(ledger_path: Path, summary: dict[str, Any], stem: str, state_root: Path) -> list[str]:
    """Measured costs into ledger.yaml for the jobs that completed; what changed."""
    if summary.get("vars"):
        return [f"costs not updated: the call ran with --var {summary['vars']} (a rehearsal)"]
    text, changed = ledger_path.read_text(), []
    for entry in summary.get("jobs", []):
        if not entry.get("completed"):
            continue
        seconds, why = float(entry["seconds"]), f"{stem}: the job's own run by the ledger"
        if entry.get("resumable"):
            try:
                spent = json.loads((state_root / entry["name"] / SPENT_FILE).read_text())
                seconds, why = float(spent["spent_s"]), f"{stem}: {spent['calls']} ledger call(s) in all"
            except (OSError, ValueError, KeyError):
                why += " (its last call only: no spent time found)"
        text = set_cost(text, entry["name"], seconds, why)
        changed.append(f"{entry['name']}: {seconds:.0f} s")
    if isinstance(summary.get("overhead_s"), (int, float)):
        text = re.sub(
            r"(?m)^overhead_(estimate|measured)_s: .*$",
            f"overhead_measured_s: {summary['overhead_s']:.0f}  # {stem}: install and device names",
            text,
        )
        changed.append(f"overhead: {summary['overhead_s']:.0f} s")
    ledger_path.write_text(text)
    load(ledger_path)  # still a ledger
    return changed


def add_to_nav(mkdocs: Path, page: str, title: str) -> bool:
    """The page named in mkdocs.yml's nav after the last device run there; whether it was added."""
    if not mkdocs.exists():
        return False
    lines = mkdocs.read_text().splitlines()
    if any(page in line for line in lines):
        return False
    last = max((i for i, line in enumerate(lines) if "reproduction/device_runs/" in line), default=None)
    if last is None:
        log.warning("%s names no device run: add %s to its nav by hand", mkdocs, page)
        return False
    indent = re.match(r"\s*", lines[last]).group(0)  # type: ignore[union-attr]  # always matches
    lines.insert(last + 1, f'{indent}- "{title}": {page}')
    mkdocs.write_text("\n".join(lines) + "\n")
    return True


def write_page(path: Path, summary: dict[str, Any], gpu: str, facts: list[str]) -> None:
    """The call's page: where it ran, each job's time and ending, and what landed."""
    rows = ["| job | ended | seconds | timeout (s) |", "| --- | --- | ---: | ---: |"]
    rows += [f"| {j['name']} | {j['ended']} | {j['seconds']} | {j['timeout_s']} |" for j in summary.get("jobs", [])]
    overrides = f" with `--var` {summary['vars']} (a rehearsal, not a measurement)" if summary.get("vars") else ""
    text = [
        f"# Device ledger call on {gpu} ({str(summary.get('started', ''))[:10]})",
        "",
        f"`benchmarks/device/ledger.py run` with a budget of {summary.get('budget_s')} s{overrides}, started "
        f"{summary.get('started')}; install and start-up took {summary.get('overhead_s')} s. Ended: "
        f"{summary.get('ended', 'cut short before its end')}.",
        "",
        "```text",
        summary.get("device") or "(no device information)",
        "```",
        "",
        *rows,
        "",
        *[f"- {fact}" for fact in facts],
        "",
    ]
    path.write_text("\n".join(text))


def land(files_at: Path, ledger_path: Path, records: Path, runs: Path, state_root: Path, mkdocs: Path) -> str:
    """Land a call's files (`files_at`: what the device tool brought back); a summary of what landed."""
    if not (files_at / "ledger.json").exists():
        raise LedgerError(f"{files_at} has no ledger.json: not what `ledger.py run` leaves")
    summary = json.loads((files_at / "ledger.json").read_text())
    ledger = load(ledger_path)
    runs.mkdir(parents=True, exist_ok=True)
    mark = f"started {summary.get('started')};"
    for page in sorted(runs.glob("*.md")):
        if mark in page.read_text(errors="replace"):
            raise LedgerError(f"the call started {summary.get('started')} has landed already: {page}")
    stem, gpu = page_stem(summary, runs)
    new, total = land_records(files_at / "records.tar.gz", records)
    files = land_files(files_at, runs / stem)
    states = land_state(files_at, state_root)
    facts = [f"Records: {new} new in `../records/` ({total} in the call's records.tar.gz)."]
    facts.append(f"The call's log and each job's output: `{stem}/` ({len(files)} files).")
    if states:
        facts.append(f"State brought back (checkpoints, policies, store): {', '.join(states)}.")
    names = {j.name: j for j in ledger.jobs}
    for entry in summary.get("jobs", []):
        job = names.get(entry["name"])
        spec = job.land.get("append_csv") if job else None
        source = runs / stem / entry["name"] / spec["file"] if spec else None
        if spec and source and source.exists():
            count = append_csv(
                source,
                ROOT / spec["to"] if not Path(spec["to"]).is_absolute() else Path(spec["to"]),
                spec["number"],
                spec["per"],
            )
            facts.append(f"{entry['name']}: {count} rows appended to `{spec['to']}`.")
    facts += [f"Cost: {c}" for c in update_costs(ledger_path, summary, stem, state_root)]
    landed = Landed.read(records, ROOT, state_root)
    for job in ledger.jobs:
        folder = state_root / job.name
        if job.resumable and folder.is_dir() and needs(job, landed) is None:
            shutil.rmtree(state_root.parent / "agents" / job.name, ignore_errors=True)
            (state_root.parent / "agents").mkdir(parents=True, exist_ok=True)
            folder.replace(state_root.parent / "agents" / job.name)
            facts.append(f"{job.name} is done: its state (the trained agent) moved to agents/{job.name}.")
    write_page(runs / f"{stem}.md", summary, gpu, facts)
    date = str(summary.get("started", ""))[:10]
    added = add_to_nav(mkdocs, f"reproduction/device_runs/{stem}.md", f"{date}, {gpu} (ledger)")
    return "\n".join(
        [
            f"Landed into {runs / stem}.md{' (added to the nav)' if added else ''}:",
            *[f"  {fact}" for fact in facts],
            "Next: python benchmarks/device/ledger.py status; quarl report; commit the records, page and ledger.yaml.",
        ]
    )
