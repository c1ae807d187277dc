"""How the report writes: numbers and intervals, Markdown tables, and its prose, kept as templates
in `report/templates/<name>.md` (Jinja2) beside the code that fills them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jinja2

from quarl.collate.stats import Interval


def fmt(x: float, digits: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def shown(ci: Interval, digits: int = 2, bounds: tuple[float, float] = (-math.inf, math.inf)) -> str:
    """`mean [low, high]` (clipped to the quantity's `bounds`), or the mean with why there is no interval."""
    if ci.n_runs == 0:
        return "not run yet"
    if not ci.has_ci:
        return f"{fmt(ci.estimate, digits)} (one seed: no interval)"
    low, high = max(ci.low, bounds[0]), min(ci.high, bounds[1])
    return f"{fmt(ci.estimate, digits)} [{fmt(low, digits)}, {fmt(high, digits)}]"


FRACTION = (0.0, 1.0)  # action agreement: intervals clipped to what a fraction can be


def inside(value: float, ci: Interval, tolerance: float = 1e-6) -> bool:
    """The published value lies in the interval (a zero-width interval: equals the mean)."""
    if not ci.has_ci:
        return False
    return ci.low - tolerance <= value <= ci.high + tolerance


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).resolve().parent / "templates"),
    undefined=jinja2.StrictUndefined,  # a value a template names but is not given is an error
    keep_trailing_newline=False,
)


def note(name: str, **values: Any) -> str:
    """The prose of template `name` (templates/<name>.md) with `values` filled in."""
    return TEMPLATES.get_template(f"{name}.md").render(**values)
