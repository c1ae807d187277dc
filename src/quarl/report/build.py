"""The reproduction report: QuaRL's published numbers beside quarl's, regenerated from records.

The campaign (`docs/reproduction/campaign.sh`) archives every record it lands as JSON under
`docs/reproduction/records/`. `quarl report` rebuilds a results store from those files in a
temporary folder and writes `docs/reproduction/README.md`: for every published cell the published
value, quarl's mean with its Student-t 95% interval and n, action agreement where it applies, and a
verdict; then the sweet spots, the noise of E against action agreement, QAT vs PTQ, and the
experiments not run here with their commands and costs. Reasons for disagreements that the records
cannot show by themselves (a different quantizer, an env version) live in `reasons.yaml` beside the
report; a disagreement with no reason says so. `quarl report --check` fails when the committed
report differs from what the records give.
"""

from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from quarl.collate import coverage
from quarl.errors import QuarlError
from quarl.progress import Steps
from quarl.report import (
    deployment,
    extensions,
    facts,
    formats,
    mixed_precision,
    ptq_table,
    published_conditions,
    qat_vs_ptq,
    robustness,
    summary,
    sweet_spots,
    time_to_reward,
)
from quarl.report.campaign import REPORT, Inputs, sweep_of
from quarl.report.text import markdown, note
from quarl.store.record_files import find_records

log = logging.getLogger(__name__)


def not_run_here(sweeps: Path, runs: pd.DataFrame) -> str:
    """Every named sweep with the records archived from it so far, its cost and command (read from
    its header)."""
    archived = runs["run_dir"].map(sweep_of).value_counts() if "run_dir" in runs.columns else pd.Series(dtype=int)
    rows = []
    for path in sorted(sweeps.glob("*.yaml")):
        named = facts.sweep(path.stem, sweeps)
        rows.append([f"`{path.stem}`", str(int(archived.get(path.stem, 0))), named.cost, f"`{named.command}`"])
    return markdown(["sweep", "records here", "cost (its header)", "command"], rows)


@dataclass(frozen=True)
class Section:
    """One part of the report: what the progress line says while it runs, and its Markdown."""

    doing: str
    make: Callable[[Inputs], str]


def _headed(heading: str, template: str, body: str) -> str:
    return f"## {heading}\n\n" + note(template) + "\n\n" + body


#: The report, in order: adding a section is a module, a template and one line here.
SECTIONS = [
    Section("the summary", summary.section),
    Section("the PTQ table", ptq_table.section),
    Section("the sweet spots", lambda i: sweet_spots.sweet_section(i.runs, i.algos, i.folder, i.figures)),
    Section("the seed-to-seed noise", lambda i: sweet_spots.noise_section(i.runs)),
    Section("QAT vs PTQ", lambda i: qat_vs_ptq.section(i.runs, i.algos)),
    Section(
        "the extensions",
        lambda i: _headed(
            "Beyond the paper: PTQ sweet spots on tasks QuaRL skipped",
            "extensions",
            extensions.extensions_section(i.runs) + "\n\n" + extensions.extensions_left(i.sweeps, i.runs),
        ),
    ),
    Section("the number formats", formats.section),
    Section(
        "the published conditions",
        lambda i: _headed(
            "The PTQ table under the published conditions",
            "published",
            published_conditions.section(i.runs, i.campaign.published, i.reasons),
        ),
    ),
    Section(
        "training for robustness",
        lambda i: _headed("Trained for robustness", "robust", robustness.section(i.runs, i.campaign.robust)),
    ),
    Section("ActorQ", time_to_reward.section),
    Section(
        "mixed-precision training", lambda i: "## Mixed-precision training\n\n" + mixed_precision.section(i.folder)
    ),
    Section("the deployment", deployment.section),
    Section(
        "the named sweeps",
        lambda i: _headed(
            "Every named sweep: records so far, cost, command", "later", not_run_here(i.sweeps, i.campaign.every)
        ),
    ),
    Section("the wall times", lambda i: "## Wall time of each part on this machine\n\n```\n" + i.wall_times + "\n```"),
]


def build(records: Path, folder: Path, sweeps: Path, figures: bool = True) -> str:
    """The report's Markdown from the records (and its figures, written into `folder` when
    `figures`); each section is shown as it runs (a bar on a terminal, a log line off one)."""
    with Steps("Building the reproduction report", total=len(SECTIONS) + 1) as steps:
        steps.next(f"reading the records in {records}")
        inputs = Inputs.read(records, folder, sweeps, figures)
        intro = {"files": inputs.files, "done": inputs.done, "superseded": superseded(records)}
        parts = [note("intro", coverage=coverage.seed_note(), **intro)]
        for part in SECTIONS:
            steps.next(part.doing)
            parts.append(part.make(inputs))
    return "\n\n".join(p for p in parts if p).rstrip() + "\n"


def superseded(records: Path) -> int:
    """How many cells outside ActorQ have more than one run's record in `records` (the report reads
    their newest run, as `quarl rebuild` does)."""
    runs = defaultdict(list)
    for path in records.glob("*.record.json"):
        runs[path.name.split(".", 1)[0]].append(path)
    repeated = [paths[0] for paths in runs.values() if len(paths) > 1]
    return sum(1 for path in repeated if json.loads(path.read_text())["run"].get("quant") != "actorq")


def record_name(record: dict) -> str:
    """A record's file name in the records folder: its cell key and its run's start
    (`<cell_key>.<YYYYMMDDTHHMMSS>.record.json`), so that a re-run of a cell, on another machine or day,
    lands beside the earlier run, not over it."""
    started = re.sub(r"[^0-9T]", "", str(record["run"].get("started_at") or ""))[:15]
    return f"{record['run']['cell_key']}{f'.{started}' if started else ''}.record.json"


def archive(root: Path, records: Path) -> int:
    """Copy every done record found under `root` (run dirs' JSON copies) into `records`, one file a
    run (`record_name`; a run already there under its cell key alone, as records were once named,
    is written back to that file); returns how many files it holds now."""
    records.mkdir(parents=True, exist_ok=True)
    for record in find_records(root):
        if record["run"]["status"] == "done":
            text = json.dumps(record, indent=1, sort_keys=True, default=str)
            path = records / record_name(record)
            legacy = records / f"{record['run']['cell_key']}.record.json"
            if legacy.is_file() and _started(legacy) == record["run"].get("started_at"):
                path = legacy
            path.write_text(text + "\n")
    return sum(1 for _ in records.glob("*.record.json"))


def _started(path: Path) -> object:
    """The start time of the record in `path` (None where it cannot be read)."""
    try:
        return json.loads(path.read_text())["run"].get("started_at")
    except (OSError, ValueError, KeyError, TypeError):
        return None


REPORT_HEADING = "# QuaRL reproduced with quarl"  # the first line of every report quarl writes


def write(records: Path, folder: Path, sweeps: Path) -> Path:
    """Regenerate the report (and its figure) in `folder`; a README.md there that quarl did not write
    is refused, not overwritten."""
    path = folder / REPORT
    if path.exists() and not path.read_text(errors="replace").startswith(REPORT_HEADING):
        raise QuarlError(
            f"{path} is not a report quarl wrote: it is left as it is. Keep the records in a folder of their own "
            "(the report goes beside it, into its parent folder)."
        )
    text = build(records, folder, sweeps)
    path.write_text(text)
    return path


def check(records: Path, folder: Path, sweeps: Path) -> list[str]:
    """Lines where the committed report and the records' report differ (empty: they match)."""
    import difflib

    committed = (folder / REPORT).read_text() if (folder / REPORT).exists() else ""
    fresh = build(records, folder, sweeps, figures=False)
    return list(
        difflib.unified_diff(committed.splitlines(), fresh.splitlines(), "committed", "from records", lineterm="", n=0)
    )
