"""How the report writes: numbers and intervals, Markdown tables, and its prose, kept as templates
in `report/templates/<name>.md` (Jinja2) beside the code that fills them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import jinja2
import numpy as np
import pandas as pd

from quarl.collate import coverage
from quarl.collate.stats import Interval, seed_cluster_aggregate
from quarl.report import facts

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
TEMPLATES.globals.update(facts.GLOBALS)  # the settings the prose names, read where they are defined


def note(name: str, **values: Any) -> str:
    """The prose of template `name` (templates/<name>.md) with `values` filled in."""
    return TEMPLATES.get_template(f"{name}.md").render(**values)


def seed_matrix(by_width: Sequence[pd.Series]) -> np.ndarray:
    """Seeds x widths of one series: each width's values by seed, side by side, over the seeds that
    have every width (the others left out, so that a resampled seed brings all its widths)."""
    return pd.concat(list(by_width), axis=1, join="inner").to_numpy(dtype=float)


def aggregate_text(first: list[np.ndarray], second: list[np.ndarray], names: tuple[str, str], tasks: str) -> str:
    """' Aggregated over ...': the IQM of each side's normalised scores (one seeds x widths matrix a
    series, the same series on both sides) with its interval, and the probability that a run of the
    first beats one of the second (rliable's definitions), the intervals those of a bootstrap over
    each series' seeds (`quarl.collate.stats.seed_cluster_aggregate`: the widths of a series share its
    seeds, so they are not resampled as independent tasks) with their simulated coverage
    (`quarl.collate.coverage`); '' without a series."""
    if not first:
        return ""
    one, two, better = seed_cluster_aggregate(first, second)
    return (
        f" Aggregated over {one.n_tasks} {tasks} in {len(first)} series (a bootstrap over each series' seeds, "
        f"95%): IQM of the normalised reward, {names[0]} {shown(one)}, {names[1]} {shown(two)}; probability that "
        f"a {names[0]} seed beats a {names[1]} one {shown(better)} (0.5: no difference); {coverage.cluster_note()}."
    )


def save_figure(fig: Figure, out: Path, name: str, dpi: int) -> Path:
    """`fig` laid out and written to `out`/`name` (PNG, no software stamp: the same data gives the
    same bytes), then closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return path
