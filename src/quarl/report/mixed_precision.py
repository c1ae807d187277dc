"""The report's "Mixed-precision training" section: quarl's AMP table (benchmarks/bench_amp.py, run on a
GPU machine and saved as `amp.csv` beside the report) beside the paper's, or the paper's alone with
what it takes to measure quarl's."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from quarl.collate.published import packaged
from quarl.report.text import _markdown, fmt, note

AMP_FILE = "amp.csv"  # bench_amp.py --csv, copied from a GPU machine


def section(folder: Path) -> str:
    """The AMP table with the device it ran on, each size beside the paper's speedup."""
    paper = packaged("mixed_precision_training.csv", "algo_env").set_index("policy")
    measured = pd.read_csv(folder / AMP_FILE) if (folder / AMP_FILE).exists() else None
    header = ["policy", "architecture", "paper: fp32 / mixed min", "paper speedup"]
    if measured is not None:
        header += ["quarl: updates/s fp32 / bf16", "update speedup", "env steps/s fp32 / bf16", "end-to-end speedup"]
    rows = []
    for name, published in paper.iterrows():
        row = [
            str(name),
            str(published["architecture"]),
            f"{published['fp32_runtime_min']:.0f} / {published['mp_runtime_min']:.0f}",
            f"{published['speedup']:.2f}x",
        ]
        if measured is not None:
            m = measured[measured["policy"] == name].iloc[0]
            row += [
                f"{fmt(m['updates/s fp32'], 1)} / {fmt(m['updates/s bf16'], 1)}",
                f"{m['update speedup']:.2f}x",
                f"{fmt(m['env steps/s fp32'], 0)} / {fmt(m['env steps/s bf16'], 0)}",
                f"{m['end-to-end speedup']:.2f}x",
            ]
        rows.append(row)
    device = str(measured["device"].iloc[0]) if measured is not None else None
    return note("amp", device=device) + "\n\n" + _markdown(header, rows)
