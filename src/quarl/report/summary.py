"""The report's opening summary: at most 12 lines, each read from the same tables as its section
(what reproduces, what does not and why, what was measured beyond the paper) and linking to it."""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from quarl.collate import actorq
from quarl.report.extensions import extension_pairs
from quarl.report.ptq_table import Row
from quarl.report.qat_vs_ptq import qat_vs_ptq
from quarl.report.records import CARTPOLE_ALGOS, Campaign, series_of
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
    return (
        "no width of 2..8"
        if finding.startswith("Sweet spot: none")
        else ("no clean one" if finding.startswith("No clean") else "not run yet")
    )


def qat_line(runs: pd.DataFrame) -> str:
    """How often QAT beats PTQ at equal bits (paired by seed) across algorithms and widths."""
    verdicts: Counter[str] = Counter()
    for algo in CARTPOLE_ALGOS:
        table = qat_vs_ptq(runs, algo)
        verdicts.update(str(v).split(" (")[0].split(":")[0] for v in table.get("verdict", []))
    if not verdicts:
        return "not run yet."
    return "at equal bits on CartPole: " + ", ".join(f"{v} in {n} cells" for v, n in verdicts.most_common()) + "."


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
    """Widths where robust training beat, lost to or matched its plain twin (paired intervals)."""
    better = worse = same = 0
    for table in tables.values():
        for _, r in table.iterrows():
            if r["bits"] == "32" or not r["diff"].has_ci:
                continue
            better += r["diff"].low > 0
            worse += r["diff"].high < 0
            same += r["diff"].low <= 0 <= r["diff"].high
    if not tables:
        return "not run yet."
    return (
        f"{better + worse + same} widths compared with their plain twins (paired by seed): {better} better, "
        f"{worse} worse, {same} with no difference shown."
    )


def actorq_line(campaign: Campaign) -> str:
    """ActorQ's int8 speedups here beside the published ones."""
    ttr = campaign.time_to_reward
    if ttr.empty:
        return "not run yet."
    shown = actorq.ttr_display(ttr)
    int8 = [(r, v) for (_, r), (_, v) in zip(ttr.iterrows(), shown.iterrows()) if r["precision"] == "int8"]
    parts = [
        f"{r['algo']} {r['network']} on {r['env']} {v['speedup_vs_fp32']}"
        + (f" (paper {fmt(r['speedup (paper)'])})" if pd.notna(r["speedup (paper)"]) else "")
        for r, v in int8
    ]
    return "int8 actors' time-to-reward speedup on 2 cores: " + "; ".join(parts) + "."


def summary(lines: list[str]) -> str:
    """The summary block (at most MAX_LINES lines)."""
    return "## Summary\n\n" + "\n".join(lines[:MAX_LINES])


def build(campaign: Campaign, table: list[Row], published_rows: list[dict], robust: dict[str, pd.DataFrame]) -> str:
    """The summary of the campaign, from the tables its sections show."""
    runs = campaign.runs
    return summary(
        [
            _link("PTQ table, classic-control rows", ptq_line(table)),
            _link("The PTQ table under the published conditions", published_line(published_rows)),
            _link("PTQ sweet spots", sweet_line(runs)),
            _link("QAT vs PTQ", qat_line(runs)),
            _link("Beyond the paper: PTQ sweet spots on tasks QuaRL skipped", extensions_line(runs)),
            _link("Trained for robustness", robust_line(robust)),
            _link("ActorQ: fp32 vs int8 actors", actorq_line(campaign)),
        ]
    )
