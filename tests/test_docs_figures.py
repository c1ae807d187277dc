"""Figures the docs state in more than one place come from one source: the suite's size and time
(docs/development.md, measured by `.ci/run` on a clean clone) and the commands people run most
(the README)."""

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
