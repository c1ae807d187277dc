"""The device ledger's jobs (issue 59): loading ledger.yaml, checking it, what has landed, what each job
still needs, and which jobs fit a call. The command line is ledger.py; running and landing are
ledger_run.py and ledger_land.py, which import this module (standard library and PyYAML only)."""

from __future__ import annotations

import csv
import itertools
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LEDGER = HERE / "ledger.yaml"
RECORDS = ROOT / "docs/reproduction/records"
RUNS = ROOT / "docs/reproduction/device_runs"
STATE = HERE / "state"  # resumable jobs' state (checkpoints, stores): git-ignored, carried to the device
MKDOCS = ROOT / "mkdocs.yml"
RUNTIME = ("out", "state", "python")  # placeholders filled when a job runs
JOB_KEYS = {"name", "command", "measured_s", "estimate_s", "leaves", "done_when", "gate", "resumable", "min_s"}
JOB_KEYS |= {"hold", "vars", "land"}
TOP_KEYS = {"overhead_estimate_s", "overhead_measured_s", "vars", "jobs"}
DONE_KINDS = {"records", "files", "csv"}
SPENT_FILE = "ledger_spent.json"  # in a resumable job's state folder: device seconds spent so far

log = logging.getLogger("ledger")


class LedgerError(Exception):
    """A ledger entry that cannot be used, with what is wrong with it."""


@dataclass
class Job:
    """One device job of the ledger."""

    name: str
    command: str  # with only the runtime placeholders ({out}, {state}, {python}) left
    cost_s: float
    measured: bool  # measured_s (a device run took it) or estimate_s
    leaves: list[str] = field(default_factory=list)
    done_when: dict[str, Any] = field(default_factory=dict)
    gate: bool = False
    resumable: bool = False
    min_s: float = 120.0
    hold: str | None = None
    land: dict[str, Any] = field(default_factory=dict)


@dataclass
class Ledger:
    """The jobs in their order, and the overhead a call pays before the first one."""

    path: Path
    overhead_s: float
    overhead_measured: bool
    jobs: list[Job]

    def job(self, name: str) -> Job:
        for job in self.jobs:
            if job.name == name:
                return job
        raise LedgerError(f"{self.path.name} has no job named {name!r}: {', '.join(j.name for j in self.jobs)}")


def expand(text: str, values: dict[str, Any], where: str) -> str:
    """`text` with each {name} of `values` replaced (repeatedly: values may hold placeholders), the
    runtime ones ({out}, {state}, {python}) kept; an unknown name is refused."""
    for _ in range(10):

        def one(m: re.Match[str]) -> str:
            name = m.group(1)
            if name in RUNTIME:
                return m.group(0)
            if name not in values:
                raise LedgerError(f"{where}: the placeholder {{{name}}} is neither a var nor one of {RUNTIME}")
            return str(values[name])

        new = re.sub(r"\{(\w+)\}", one, text)
        if new == text:
            return " ".join(new.split())
        text = new
    raise LedgerError(f"{where}: placeholders that expand into each other without end")


def fill(command: str, out: Path, state: Path, python: str) -> str:
    """A job's command with its runtime placeholders filled."""
    return command.replace("{out}", str(out)).replace("{state}", str(state)).replace("{python}", python)


def _typed(value: Any, values: dict[str, Any], where: str) -> Any:
    """A done_when value with its placeholders expanded (`{seed}` becomes the int 0, not "0")."""
    if isinstance(value, str) and "{" in value:
        return yaml.safe_load(expand(value, values, where))
    if isinstance(value, list):
        return [_typed(v, values, where) for v in value]
    if isinstance(value, dict):
        return {k: _typed(v, values, where) for k, v in value.items()}
    return value


def _job(entry: Any, index: int, top: dict[str, Any], overrides: dict[str, str]) -> Job:
    """One ledger entry, checked."""
    if not isinstance(entry, dict):
        raise LedgerError(f"job #{index + 1} is not a mapping: {entry!r}")
    name = entry.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise LedgerError(f"job #{index + 1}: name {name!r} must be lower-case letters, digits, '-' or '_'")
    where = f"job {name!r}"
    unknown = set(entry) - JOB_KEYS
    if unknown:
        raise LedgerError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(JOB_KEYS)})")
    if not isinstance(entry.get("command"), str) or not entry["command"].strip():
        raise LedgerError(f"{where}: no command")
    costs = [k for k in ("measured_s", "estimate_s") if k in entry]
    if len(costs) != 1:
        raise LedgerError(f"{where}: give exactly one of measured_s (a device run took it) or estimate_s (never run)")
    cost = entry[costs[0]]
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost <= 0:
        raise LedgerError(f"{where}: {costs[0]}={cost!r} must be a positive number of seconds")
    values = {**(top.get("vars") or {}), **(entry.get("vars") or {}), **overrides}
    done_when = entry.get("done_when") or {}
    gate, hold = bool(entry.get("gate", False)), entry.get("hold")
    if not isinstance(done_when, dict) or set(done_when) - DONE_KINDS or (not done_when and not gate):
        raise LedgerError(f"{where}: done_when must name one of {sorted(DONE_KINDS)} (only a gate job has none)")
    if hold is not None and (not isinstance(hold, str) or not hold.strip()):
        raise LedgerError(f"{where}: hold must say why the job waits")
    leaves = entry.get("leaves") or []
    if not isinstance(leaves, list) or any(not isinstance(x, str) or ".." in x or x.startswith("/") for x in leaves):
        raise LedgerError(f"{where}: leaves must be a list of paths inside the job's folder")
    return Job(
        name=name,
        command=expand(entry["command"], values, where),
        cost_s=float(cost),
        measured=costs[0] == "measured_s",
        leaves=leaves,
        done_when=_typed(done_when, values, where),
        gate=gate,
        resumable=bool(entry.get("resumable", False)),
        min_s=float(entry.get("min_s", 120.0)),
        hold=" ".join(hold.split()) if hold else None,
        land=entry.get("land") or {},
    )


def load(path: Path = LEDGER, overrides: dict[str, str] | None = None) -> Ledger:
    """The ledger at `path`, every entry checked (a LedgerError says which one and why); `overrides`
    replace vars (a tiny budget for a rehearsal on the CPU: steps=1024 device=cpu)."""
    try:
        top = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise LedgerError(f"{path}: cannot be read: {exc}") from None
    if not isinstance(top, dict) or not isinstance(top.get("jobs"), list):
        raise LedgerError(f"{path}: needs a list of jobs under 'jobs:'")
    unknown = set(top) - TOP_KEYS
    if unknown:
        raise LedgerError(f"{path}: unknown top-level keys {sorted(unknown)} (known: {sorted(TOP_KEYS)})")
    try:
        jobs = [_job(entry, i, top, overrides or {}) for i, entry in enumerate(top["jobs"])]
    except LedgerError as exc:
        raise LedgerError(f"{path.name}, {exc}") from None
    names = [j.name for j in jobs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise LedgerError(f"{path.name}: job names used twice: {twice}")
    measured = "overhead_measured_s" in top
    overhead = top.get("overhead_measured_s" if measured else "overhead_estimate_s", 30)
    return Ledger(path, float(overhead), measured, jobs)


# ----- what has landed -------------------------------------------------------------------------


@dataclass
class Landed:
    """What the repository holds: the records and the folder the file and CSV conditions look in."""

    records: list[dict[str, Any]]
    root: Path = ROOT
    state: Path = STATE

    @classmethod
    def read(cls, records: Path = RECORDS, root: Path = ROOT, state: Path = STATE) -> Landed:
        found = []
        for path in sorted(records.glob("*.record.json")):
            try:
                found.append(json.loads(path.read_text()))
            except (OSError, ValueError) as exc:
                log.warning("%s: not read (%s)", path, exc)
        return cls(found, root, state)


_MISSING = object()


def value_at(record: dict[str, Any], dotted: str) -> Any:
    """The record's value at a dotted path (run.algo, config.quant.bits), or _MISSING."""
    node: Any = record
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def matches(record: dict[str, Any], where: dict[str, Any]) -> bool:
    return all(value_at(record, k) == v and value_at(record, k) is not _MISSING for k, v in where.items())


def cells(each: Any) -> list[dict[str, Any]]:
    """The cells a records condition needs: the product of `each`'s lists, or `each` as a list."""
    if isinstance(each, list):
        return [dict(c) for c in each]
    if not each:
        return [{}]
    keys = list(each)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(each[k] for k in keys))]


def spent_s(job: Job, state: Path) -> float:
    """Device seconds a resumable job has spent so far (from its state folder)."""
    try:
        return float(json.loads((state / job.name / SPENT_FILE).read_text())["spent_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def needs(job: Job, landed: Landed) -> str | None:
    """What the job still needs before it is done, or None when what landed says it is done."""
    if job.gate:
        return "runs first in every call"
    spec = job.done_when
    if "records" in spec:
        where, each = spec["records"].get("where", {}), spec["records"].get("each", {})
        wanted = cells(each)
        missing = [c for c in wanted if not any(matches(r, {**where, **c}) for r in landed.records)]
        if missing:
            shown = "; ".join(" ".join(f"{k.split('.')[-1]}={v}" for k, v in c.items()) for c in missing[:3])
            more = f" (+{len(missing) - 3} more)" if len(missing) > 3 else ""
            return f"{len(missing)} of {len(wanted)} record cells: {shown}{more}"
    if "files" in spec:
        count = len(list(landed.root.glob(spec["files"]["glob"])))
        if count < int(spec["files"].get("count", 1)):
            return f"{spec['files'].get('count', 1) - count} more landed {spec['files']['glob']}"
    if "csv" in spec:
        c = spec["csv"]
        groups = set()
        try:
            with (landed.root / c["path"]).open(newline="") as f:
                for row in csv.DictReader(f):
                    if all(row.get(k) == str(v) for k, v in c.get("where", {}).items()):
                        groups.add(tuple(row.get(k) for k in c.get("distinct", [])))
        except OSError:
            pass
        if len(groups) < int(c.get("count", 1)):
            return f"{int(c.get('count', 1)) - len(groups)} more runs in {c['path']} ({c.get('where', {})})"
    return None


def remaining_s(job: Job, landed: Landed) -> float:
    """Seconds the job still costs: its cost, less what a resumable one has spent (at least min_s)."""
    if not job.resumable:
        return job.cost_s
    return max(job.min_s, job.cost_s - spent_s(job, landed.state))


# ----- choosing and showing ----------------------------------------------------------------------


def pick(ledger: Ledger, left_s: float, landed: Landed, ran: set[str], only: set[str] | None = None) -> Job | None:
    """The first job in the ledger's order that is not done, held, gated or run already in this call,
    and fits `left_s`: its cost (a resumable one: at least its min_s, it takes what is left)."""
    for job in ledger.jobs:
        if job.gate or job.hold or job.name in ran or (only is not None and job.name not in only):
            continue
        if needs(job, landed) is None:
            continue
        if (job.min_s if job.resumable else job.cost_s) <= left_s:
            return job
    return None


def plan(ledger: Ledger, budget_s: float, landed: Landed, only: set[str] | None = None) -> list[tuple[Job, float]]:
    """The jobs a call of `budget_s` would run and the seconds each is given, at their ledger costs."""
    left = budget_s - ledger.overhead_s
    chosen: list[tuple[Job, float]] = []
    for gate in ledger.jobs:
        if gate.gate and (only is None or gate.name in only):
            if gate.cost_s > left:
                return []
            chosen.append((gate, gate.cost_s))
            left -= gate.cost_s
    ran: set[str] = set()
    while (job := pick(ledger, left, landed, ran, only)) is not None:
        given = left if job.resumable else job.cost_s
        chosen.append((job, given))
        ran.add(job.name)
        left -= given
    return chosen


def status_table(ledger: Ledger, landed: Landed) -> str:
    """The ledger as a Markdown table: job, cost, where the cost comes from, done, what it still needs."""
    rows = ["| job | cost (s) | cost from | done | still needs |", "| --- | ---: | --- | --- | --- |"]
    for job in ledger.jobs:
        need = needs(job, landed)
        if job.hold and need:
            need = f"held: {job.hold}"
        if job.resumable and need:
            need += f"; ~{remaining_s(job, landed):.0f} s of device time left ({spent_s(job, landed.state):.0f} spent)"
        done = "gate" if job.gate else ("yes" if need is None else "no")
        how = "measured" if job.measured else "estimate"
        rows.append(f"| {job.name} | {job.cost_s:.0f} | {how} | {done} | {need or ''} |")
    how = "measured" if ledger.overhead_measured else "estimate"
    rows.append(f"| (install, start-up) | {ledger.overhead_s:.0f} | {how} | every call | |")
    return "\n".join(rows)
