"""No number typed by hand in the report's prose: every figure a template states comes from records,
measured files or quarl's own settings (`quarl.report.facts`), through a `{{ ... }}` expression."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from quarl.report import facts
from quarl.report.text import TEMPLATES

TEMPLATES_DIR = Path(facts.__file__).parent / "templates"
FILLED = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}|```.*?```|`[^`]*`", re.S)  # data, logic, code
NUMERAL = re.compile(r"(?<![\w.-])\$?\d[\w.,%-]*\w|(?<![\w.-])\$?\d")
#: Digits that name a thing rather than state a figure: each with why.
NAMES = {
    r"\d{4}\.\d{5}": "an arXiv identifier",
    r"\d+(x\d+)+": "a network's shape (64x64, 7x7x1024)",
    r"\d+(-\d+){2,}": "a network's layer widths (4096-512-1024)",
    r"3b": "the Raspberry Pi 3b, a board's name",
    r"64-bit": "a 64-bit OS, the build a board runs",
}


def typed_numbers(text: str) -> list[str]:
    """The numerals in a template's prose outside its expressions and code, less names (`NAMES`)."""
    prose = FILLED.sub(" ", text)
    return [n for n in NUMERAL.findall(prose) if not any(re.fullmatch(name, n) for name in NAMES)]


REASONS = Path(__file__).resolve().parents[2] / "docs" / "reproduction" / "reasons.yaml"


@pytest.mark.parametrize("template", sorted(p.name for p in TEMPLATES_DIR.glob("*.md")))
def test_no_template_states_a_number_that_no_data_fills(template: str) -> None:
    assert typed_numbers((TEMPLATES_DIR / template).read_text()) == []


def test_no_reason_for_a_disagreement_states_a_number_that_no_data_fills() -> None:
    """reasons.yaml's reasons are templates too (its comments may name files and commands)."""
    reasons = yaml.safe_load(REASONS.read_text())
    assert {key: typed_numbers(text) for key, text in reasons.items() if typed_numbers(text)} == {}


def test_the_guard_finds_a_hand_typed_figure_and_passes_filled_ones() -> None:
    text = "about 1,000 CPU-hours, 3.5x, $35, 125 s; {{ n }} seeds; `quant.bits=8`; int8 on a 64x64 policy"
    assert typed_numbers(text) == ["1,000", "3.5x", "$35", "125"]


def test_facts_read_the_sweeps_as_their_files_define_them() -> None:
    qat = facts.sweep("qat_classic")
    assert qat.seeds == facts.counted(len(qat.grid["seed"]), "seed")
    assert facts.sweep("ptq_classic").bits == "2..8"  # 2,3,...,8 and 32 (fp32, left out)
    assert facts.widths([2, 4, 6, 8]) == "2, 4, 6 and 8"
    assert facts.counted(1, "seed") == "one seed" and facts.counted(14, "seed") == "14 seeds"
    assert "CPU-hours" in facts.sweep("ptq_table_atari").cost
    # ptq_extensions: six algorithms x five tasks, DQN has no continuous task, the
    # off-policy continuous algorithms no discrete one
    assert len(facts.sweep("ptq_extensions").pairs()) == 6 * 5 - 2 - 3 * 3


def test_every_template_renders_with_the_settings_alone_where_it_needs_no_records() -> None:
    text = TEMPLATES.get_template("qat.md").render(widths="2..8")
    assert "three seeds" in text and "{{" not in text
