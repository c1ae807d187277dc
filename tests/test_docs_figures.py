"""Figures the docs state in more than one place come from one source: the suite's size and time
(docs/development.md, measured by `.ci/run` on a clean clone), the commands people run most
(the README) and the C export's sample output (docs/reproduction/edge_export.json, the export's own
measures.json)."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: How a page states the suite's measured run: "1,127 passed, 21 skipped, in 17 min 4 s of tests".
SUITE_RUN = re.compile(r"([\d,]+) passed,\s+(\d+) skipped,\s+in (\d+) min (\d+) s of tests")
SUITE_SIZE = re.compile(r"About ([\d,]+) tests, about (\d+) minutes on 2 cores")


def _text(page: Path) -> str:
    return " ".join(page.read_text().split())  # a figure may wrap across lines


def _commands(page: Path) -> str:
    text = page.read_text()
    start = text.index("```bash", text.index("## Commands people run most"))
    return text[start : text.index("```", start + 7)]


def test_every_page_states_the_suite_as_development_md_measured_it():
    source = _text(ROOT / "docs/development.md")
    run, size = SUITE_RUN.findall(source), SUITE_SIZE.findall(source)
    assert len(run) == 1 and len(size) == 1, "docs/development.md states the measured suite once"
    passed, _, minutes, seconds = (int(v.replace(",", "")) for v in run[0])
    tests, about = (int(v.replace(",", "")) for v in size[0])
    assert tests >= passed and abs(about - (minutes + seconds / 60)) <= 1, "the rounded figures are the measured ones"
    for page in PAGES:
        text = _text(page)
        assert set(SUITE_RUN.findall(text)) <= set(run), f"{page.name} states another suite run"
        assert set(SUITE_SIZE.findall(text)) <= set(size), f"{page.name} states another suite size"
    assert SUITE_RUN.findall(_text(ROOT / "README.md")) == run


def test_the_docs_home_shows_the_readmes_commands():
    assert _commands(ROOT / "docs/index.md") == _commands(ROOT / "README.md")


def _edge_sample() -> str:
    """The lines of `quarl export --format c` that docs/edge.md shows."""
    text = (ROOT / "docs/edge.md").read_text()
    start = text.index("```text\n  C policy (host cc): ") + len("```text\n")
    return text[start : text.index("```", start)]


def test_the_c_exports_sample_output_is_what_it_measured():
    """docs/edge.md shows what the export printed of the record whose measures.json is
    docs/reproduction/edge_export.json: its checks, and per target its flash, RAM and instructions
    per action (5,856 B and 22,226 instructions stayed there after the export measured 6,244 B and 7,832)."""
    from quarl.deploy.edge.export import FIRMWARE_CHECK_STATES, EdgeExport

    measures = json.loads((ROOT / "docs/reproduction/edge_export.json").read_text())
    sample = _edge_sample()
    for m in measures["firmware"].values():
        shown = f"the policy takes {m['flash']:,} B flash and {m['ram']:,} B RAM"
        assert shown in sample and f"; {m['instructions']:,.0f} instructions per action" in sample
        assert f"under QEMU over {m['counted']} states" in sample
    assert f"on {measures['states']} states and {measures['probes']} extreme probes" in sample

    class Described:  # the sample leaves out the files and the tensors' scales
        def describe(self) -> str:
            return ""

    checked_on = min(FIRMWARE_CHECK_STATES, measures["states"])  # each firmware: 300 of the states
    firmware_checks = {k: checked_on for k in measures["checked"] if "firmware" in k}
    printed = EdgeExport(
        [], Described(), checked=measures["checked"], states=measures["states"], probes=measures["probes"],
        sizes=measures["sizes"], notes=measures["notes"], checked_on=firmware_checks, firmware=measures["firmware"],
    ).text()
    assert sample == printed + "\n"
