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
from pathlib import Path

import pandas as pd
import yaml

from quarl.collate.steps import Steps
from quarl.report import mixed_precision, published_conditions, robustness, summary
from quarl.report.extensions import extensions_left, extensions_section
from quarl.report.ptq_table import _ptq_section, ptq_table
from quarl.report.qat_vs_ptq import _qat_section
from quarl.report.records import CARTPOLE_ALGOS, REASONS, REPORT, WALL_TIMES, load_campaign, series_of, sweep_of
from quarl.report.sweet_spots import _noise_section, _sweet_section
from quarl.report.text import _markdown, note
from quarl.report.time_to_reward import actorq_figures, actorq_section
from quarl.store.sqlite import find_records

log = logging.getLogger(__name__)


def not_run_here(sweeps: Path, runs: pd.DataFrame) -> str:
    """Every named sweep with the records archived from it so far, its cost and command (read from
    its header)."""
    archived = runs["run_dir"].map(sweep_of).value_counts() if "run_dir" in runs.columns else pd.Series(dtype=int)
    rows = []
    for path in sorted(sweeps.glob("*.yaml")):
        header = [
            line[2:] for line in path.read_text().splitlines() if line.startswith("# ") and "@package" not in line
        ]
        text = " ".join(header)
        cost = re.search(r"Cost[^:]*: (.*?)(?= Quantizer:| Policies:| Run:|$)", text)
        run = re.search(r"Run: (.*?)(?=\s{2,}|\(|$)", text)
        rows.append(
            [
                f"`{path.stem}`",
                str(int(archived.get(path.stem, 0))),
                (cost.group(1) if cost else "see its header").strip(),
                f"`{run.group(1).strip()}`" if run else f"`python run.py -m +sweep={path.stem}`",
            ]
        )
    return _markdown(["sweep", "records here", "cost (its header)", "command"], rows)


def build(records: Path, folder: Path, sweeps: Path, figures: bool = True) -> str:
    """The report's Markdown from the records (and its figures, written into `folder` when
    `figures`); each part is shown as it runs (a bar on a terminal, a log line off one)."""
    with Steps("Building the reproduction report", total=9) as steps:
        steps.next(f"reading the records in {records}")
        campaign = load_campaign(records)
        runs = campaign.runs
        reasons = yaml.safe_load((folder / REASONS).read_text()) or {} if (folder / REASONS).exists() else {}
        steps.next("the PTQ table")
        parts = [
            note("intro", n=len(runs), files=sum(1 for _ in records.glob("*.record.json"))),
            _ptq_section(runs, folder),
        ]
        algos = [series for algo in CARTPOLE_ALGOS for series in series_of(runs, algo, "cartpole")]
        steps.next("the sweet spots")
        parts.append(_sweet_section(runs, algos, folder, figures))
        steps.next("the seed-to-seed noise")
        parts.append(_noise_section(runs))
        steps.next("QAT vs PTQ")
        parts.append(_qat_section(runs, algos))
        steps.next("the extensions")
        parts.append(
            "## Beyond the paper: PTQ sweet spots on tasks QuaRL skipped\n\n"
            + note("extensions")
            + "\n\n"
            + extensions_section(runs)
            + "\n\n"
            + extensions_left(sweeps, runs)
        )
        steps.next("the published conditions and training for robustness")
        parts.append(
            "## The PTQ table under the published conditions\n\n"
            + note("published")
            + "\n\n"
            + published_conditions.section(runs, campaign.published, reasons)
        )
        parts.append(
            "## Trained for robustness\n\n" + note("robust") + "\n\n" + robustness.section(runs, campaign.robust)
        )
        steps.next("ActorQ")
        curves = actorq_figures(campaign, folder, figures)
        parts.append("## ActorQ: fp32 vs int8 actors\n\n" + actorq_section(campaign, curves))
        parts.append("## Mixed-precision training\n\n" + mixed_precision.section(folder))
        steps.next("the named sweeps")
        parts.append(
            "## Every named sweep: records so far, cost, command\n\n"
            + note("later")
            + "\n\n"
            + not_run_here(sweeps, campaign.every)
        )
        parts.insert(
            1,
            summary.build(
                campaign,
                ptq_table(runs, reasons),
                published_conditions.rows(runs, campaign.published, reasons),
                robustness.tables(runs, campaign.robust),
            ),
        )
    wall = (folder / WALL_TIMES).read_text().strip() if (folder / WALL_TIMES).exists() else "none yet"
    parts.append("## Wall time of each part on this machine\n\n```\n" + wall + "\n```")
    return "\n\n".join(p for p in parts if p).rstrip() + "\n"


def archive(root: Path, records: Path) -> int:
    """Copy every done record found under `root` (run dirs' JSON copies) into `records`, one file a
    cell named by its key; returns how many files it holds now."""
    records.mkdir(parents=True, exist_ok=True)
    for record in find_records(root):
        if record["run"]["status"] == "done":
            text = json.dumps(record, indent=1, sort_keys=True, default=str)
            (records / f"{record['run']['cell_key']}.record.json").write_text(text + "\n")
    return sum(1 for _ in records.glob("*.record.json"))


def write(records: Path, folder: Path, sweeps: Path) -> Path:
    """Regenerate the report (and its figure) in `folder`."""
    text = build(records, folder, sweeps)
    path = folder / REPORT
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
