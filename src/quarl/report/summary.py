"""The report's opening summary: at most 12 lines, each read from the same tables as its section
(what reproduces, what does not and why, what was measured beyond the paper) and linking to it."""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from quarl.report import published_conditions, robustness, time_to_reward
from quarl.report.campaign import CARTPOLE_ALGOS, Campaign, Inputs, series_of
from quarl.report.extensions import extension_pairs
from quarl.report.ptq_table import Row, ptq_table
from quarl.report.qat_vs_ptq import holm_verdicts, qat_vs_ptq
from quarl.report.sweet_spots import extension_finding, sweet_spot
from quarl.report.text import fmt

MAX_LINES = 12


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return "#" + re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _link(heading: str, text: str) -> str:
    return f"- [{heading}]({anchor(heading)}): {text}"


def ptq_line(table: list[Row]) -> str:
    """How the published PTQ table's quantities fare: agree, disagree (with reasons), inconclusive."""
    words = {"agrees": "agree", "disagrees": "disagree", "inconclusive": "inconclusive"}
    measured = [r for r in table if r.verdict != "not run yet"]
    kinds = Counter(words.get(r.verdict.split(" ", 1)[0].rstrip(":"), "other") for r in measured)
    shown = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    why = " (each disagreement names its reason)" if kinds["disagree"] else ""
    return f"of {len(measured)} published quantities measured, {shown}{why}."


def sweet_line(runs: pd.DataFrame) -> str:
    """The sweet spot of each algorithm on CartPole (the paper's Figure)."""
    parts = []
    for algo in CARTPOLE_ALGOS:
        for series in series_of(runs, algo, "cartpole"):
            table = sweet_spot(runs, series)
            spot = extension_finding(table[table["bits"] != "fp16"], 500.0)
            parts.append(f"{series} {_spot(spot)}")
    return "on CartPole, " + "; ".join(parts) + "."


def _spot(finding: str) -> str:
    """'3 bits', 'none of 2..8', 'no clean one' or 'n/a' from a sweet-spot finding."""
    found = re.match(r"Sweet spot: (\d+) bits", finding)
    if found:
        return f"{found.group(1)} bits"
    if finding.startswith("Sweet spot: none named"):
        return "none named (weak fp32 baseline)"
    return (
        "no width of 2..8"
        if finding.startswith("Sweet spot: none")
        else ("no clean one" if finding.startswith("No clean") else "not run yet")
    )


def qat_line(runs: pd.DataFrame) -> str:
    """How often QAT beats PTQ at equal bits (paired by seed) across algorithms and widths."""
    verdicts: Counter[str] = Counter()
    for table in holm_verdicts([qat_vs_ptq(runs, algo) for algo in CARTPOLE_ALGOS]):
        verdicts.update(str(v).split(" (")[0].split(":")[0] for v in table.get("verdict", []))
    if not verdicts:
        return "not run yet."
    cells = ", ".join(f"{v} in {n} cell{'s' if n != 1 else ''}" for v, n in verdicts.most_common())
    return f"at equal bits on CartPole: {cells}."


def extensions_line(runs: pd.DataFrame) -> str:
    """How many extension pairs have a clean sweet spot."""
    spots = []
    for algo, env in extension_pairs(runs):
        for series in series_of(runs, algo, env):
            table = sweet_spot(runs, series, env)
            scale = pd.to_numeric(runs.loc[runs["env"] == env, "env.return_scale"], errors="coerce").dropna()
            if not scale.empty:
                spots.append(_spot(extension_finding(table[table["bits"] != "fp16"], float(scale.iloc[0]))))
    if not spots:
        return "not run yet."
    counts = Counter("a sweet spot" if s.endswith("bits") else s for s in spots)
    return f"{len(spots)} algorithm x task series: " + ", ".join(f"{n} {k}" for k, n in counts.most_common()) + "."


def published_line(rows: list[dict]) -> str:
    """The DQN CartPole int8 cell in each condition: the disagreement the section settles."""
    dqn = [r for r in rows if r["algo"] == "dqn" and r["E"].n_runs]
    if len(dqn) < 2:
        return "DQN CartPole int8 under the published network and TFLite's rule: not run yet."
    parts = [f"{r['condition'].split(':')[0]} {fmt(r['E'].estimate)}%" for r in dqn]
    return f"DQN CartPole E_int8 (published {fmt(dqn[0]['published'])}%): " + "; ".join(parts) + "."


def robust_line(tables: dict[str, pd.DataFrame]) -> str:
    """Widths where robust training beat, lost to, matched or could not be told from its plain twin
    (paired verdicts, Holm's correction over the family)."""
    if not tables:
        return "not run yet."
    kinds = Counter(r["kind"] for table in tables.values() for _, r in table.iterrows() if r["bits"] != "32")
    few = f", {kinds['no data']} with too few paired seeds" if kinds["no data"] else ""
    return (
        f"{sum(kinds.values())} widths compared with their plain twins (paired by seed, Holm-corrected): "
        f"{kinds['higher']} better, {kinds['lower']} worse, {kinds['equivalent']} equivalent within 5% of the "
        f"return scale, {kinds['underpowered']} underpowered at their n{few}."
    )


def actorq_line(campaign: Campaign) -> str:
    """ActorQ's int8 speedups here beside the published ones (`time_to_reward.summary_line`)."""
    return time_to_reward.summary_line(campaign)


def summary(lines: list[str]) -> str:
    """The summary block (at most MAX_LINES lines)."""
    return "## Summary\n\n" + "\n".join(lines[:MAX_LINES])


def section(inputs: Inputs) -> str:
    """The summary of the campaign, from the tables its sections show."""
    campaign, runs = inputs.campaign, inputs.runs
    published_rows = published_conditions.rows(runs, campaign.published, inputs.reasons)
    robust = robustness.tables(runs, campaign.robust)
    return summary(
        [
            _link("PTQ table, classic-control rows", ptq_line(ptq_table(runs, inputs.reasons))),
            _link("The PTQ table under the published conditions", published_line(published_rows)),
            _link("PTQ sweet spots", sweet_line(runs)),
            _link("QAT vs PTQ", qat_line(runs)),
            _link("Beyond the paper: PTQ sweet spots on tasks QuaRL skipped", extensions_line(runs)),
            _link("Trained for robustness", robust_line(robust)),
            _link("ActorQ: fp32 vs int8 actors", actorq_line(campaign)),
        ]
    )
