"""The report's "Mixed-precision training" section: quarl's AMP table (benchmarks/bench_amp.py, run on a
GPU machine and saved as `amp.csv` beside the report) beside the paper's, or the paper's alone with
what it takes to measure quarl's."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from quarl.collate.published import packaged
from quarl.report.text import fmt, markdown, note

AMP_FILE = "amp.csv"  # bench_amp.py --csv, copied from a GPU machine; one run per value of `run` (or one run)
RATES = ["updates/s fp32", "updates/s bf16", "env steps/s fp32", "env steps/s bf16"]
SPEEDUPS = ["update speedup", "end-to-end speedup"]


def section(folder: Path) -> str:
    """The AMP table with the device it ran on, each size beside the paper's speedup: quarl's
    throughputs are the mean over the file's runs, its speedups the mean with the runs' range."""
    paper = packaged("mixed_precision_training.csv", "algo_env").set_index("policy")
    measured = pd.read_csv(folder / AMP_FILE) if (folder / AMP_FILE).exists() else None
    header = ["policy", "architecture", "paper: fp32 / mixed min", "paper speedup"]
    if measured is not None:
        measured = measured.assign(run=measured["run"] if "run" in measured else 1)
        header += ["quarl runs", "quarl: updates/s fp32 / bf16", "update speedup", "env steps/s fp32 / bf16"]
        header += ["end-to-end speedup"]
    rows = []
    for name, published in paper.iterrows():
        row = [
            str(name),
            str(published["architecture"]),
            f"{published['fp32_runtime_min']:.0f} / {published['mp_runtime_min']:.0f}",
            _published_speedup(published),
        ]
        if measured is not None:
            runs = measured[measured["policy"] == name]
            mean = runs[RATES].mean()
            row += [
                str(runs["run"].nunique()),
                f"{fmt(mean['updates/s fp32'], 1)} / {fmt(mean['updates/s bf16'], 1)}",
                _speedup(runs["update speedup"]),
                f"{fmt(mean['env steps/s fp32'], 0)} / {fmt(mean['env steps/s bf16'], 0)}",
                _speedup(runs["end-to-end speedup"]),
            ]
        rows.append(row)
    device = ", ".join(sorted(measured["device"].astype(str).unique())) if measured is not None else None
    runs_n = int(measured["run"].nunique()) if measured is not None else 0
    return note("amp", device=device, runs=runs_n) + "\n\n" + markdown(header, rows)


def _published_speedup(published: pd.Series) -> str:
    """The paper's speedup as printed, with its own runtimes' ratio where the two differ."""
    ratio = published["fp32_runtime_min"] / published["mp_runtime_min"]
    printed = f"{published['speedup']:.2f}x"
    if abs(ratio - published["speedup"]) < 0.01:
        return printed
    return (
        f"{printed} (as printed; {published['fp32_runtime_min']:.0f}/{published['mp_runtime_min']:.0f} = {ratio:.2f})"
    )


def _speedup(values: pd.Series) -> str:
    """The mean speedup over runs, with their range where there are several."""
    if len(values) == 1:
        return f"{values.iloc[0]:.2f}x"
    return f"{values.mean():.2f}x ({values.min():.2f}-{values.max():.2f})"
