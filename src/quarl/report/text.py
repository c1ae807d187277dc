"""How the report writes: numbers and intervals, Markdown tables, and its prose, kept as templates
in `report/templates/<name>.md` (Jinja2) beside the code that fills them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import jinja2
import numpy as np

from quarl.collate import coverage
from quarl.collate.stats import Interval, iqm, probability_of_improvement, stratified_bootstrap

UNBOUNDED = (-math.inf, math.inf)
MAX_SHOWN = 5  # up to this many seeds, a table shows each seed's value beside the summary
CLIPPED = "ᶜ"  # marks an interval clipped to what its quantity can take


def fmt(x: float, digits: int = 2) -> str:
    """`x` with `digits` decimals, 'n/a' for a missing value."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def shown(ci: Interval, digits: int = 2, bounds: tuple[float, float] = UNBOUNDED) -> str:
    """`mean [low, high]` (clipped to the quantity's `bounds`, and then marked ᶜ), or the mean with
    why there is no interval."""
    if ci.n_runs == 0:
        return "not run yet"
    if not ci.has_ci:
        return f"{fmt(ci.estimate, digits)} (one seed: no interval)"
    low, high = max(ci.low, bounds[0]), min(ci.high, bounds[1])
    mark = CLIPPED if (low, high) != (ci.low, ci.high) else ""
    return f"{fmt(ci.estimate, digits)} [{fmt(low, digits)}, {fmt(high, digits)}]{mark}"


def per_seed(values: Sequence[float] | np.ndarray, digits: int = 1) -> str:
    """Each seed's value ('500.0, 133.0, 208.0') where there are at most MAX_SHOWN, else ''."""
    return ", ".join(fmt(float(v), digits) for v in values) if 0 < len(values) <= MAX_SHOWN else ""


FRACTION = (0.0, 1.0)  # action agreement: intervals clipped to what a fraction can be


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table of `rows` under `header`."""
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


def aggregate_text(first: list[np.ndarray], second: list[np.ndarray], names: tuple[str, str], tasks: str) -> str:
    """' Aggregated over ...': the IQM of each side's normalised scores (one array of runs per task,
    the same tasks on both sides) with its stratified-bootstrap interval, and the probability that a
    run of the first beats one of the second (rliable's definitions, `quarl.collate.stats`), with
    the intervals' simulated coverage (`quarl.collate.coverage`); '' without tasks."""
    if not first:
        return ""
    one, two = (stratified_bootstrap(side, iqm) for side in (first, second))
    better = probability_of_improvement(first, second)
    return (
        f" Aggregated over {len(first)} {tasks} (rliable's stratified bootstrap, 95%): IQM of the normalised "
        f"reward, {names[0]} {shown(one)}, {names[1]} {shown(two)}; probability that a {names[0]} seed beats a "
        f"{names[1]} one {shown(better)} (0.5: no difference); {coverage.stratified_note()}."
    )
