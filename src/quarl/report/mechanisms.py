"""Measured explanations that the reasons for disagreements cite (`reasons.yaml` beside the report is
a set of templates filled from these): each reads a measured file beside the report and says what it
shows seed by seed, or how to measure it where the file is missing."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

Q_GAPS = "dqn_q_gaps.csv"  # benchmarks/bench_edge_agreement.py --algo dqn --seeds ... --csv
Q_GAPS_COMMAND = (
    "python benchmarks/bench_edge_agreement.py --algo dqn --seeds 0,1,2,3,4 --csv docs/reproduction/dqn_q_gaps.csv"
)


def q_gaps(folder: Path) -> str:
    """Why DQN's greedy action flips under int8 weights, from `dqn_q_gaps.csv` beside the report: per
    seed, the gap between the best two Q-values against how far per-tensor int8 weights move them,
    the int8 policy's action agreement and both policies' greedy returns."""
    path = folder / Q_GAPS
    if not path.exists():
        return f"the Q-value gaps behind it are not measured here (`{Q_GAPS_COMMAND}` measures them)"
    table = pd.read_csv(path, comment="#")
    rows = table[table["int8 weights"] == "per tensor"].sort_values("seed")
    seeds = "; ".join(
        f"seed {int(r['seed'])}: gap {r['median gap']:.3g} on Q-values near {r['median abs Q']:.0f}, moved by "
        f"{r['median Q error']:.3g} (more than the gap on {r['states where error > gap']:.0%} of the states), "
        f"agreement {r['action agreement']:.0%}, return {r['int8 return']:.0f} against fp32's {r['fp32 return']:.0f}"
        for _, r in rows.iterrows()
    )
    return (
        f"measured on {len(rows)} policies trained with the same settings on the machine that wrote `{Q_GAPS}` "
        f"(`benchmarks/bench_edge_agreement.py`, each seed's own greedy episodes; medians over its states; "
        f"per-tensor int8 weights as quarl's PTQ default): {seeds}"
    )
