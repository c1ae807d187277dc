"""The report's "Mixed-precision training" section: quarl's AMP table (benchmarks/bench_amp.py, run on a
GPU machine and saved as `amp.csv` beside the report) beside the paper's, or the paper's alone with
what it takes to measure quarl's. fp16 with a GradScaler gets its columns where the file has them
(bench_amp writes them since it measures fp16; older files have bf16 only)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from quarl.collate.published import packaged
from quarl.report.text import fmt, markdown, note

AMP_FILE = "amp.csv"  # bench_amp.py --csv, copied from a GPU machine; one run per value of `run` (or one run)
RATES = ["updates/s fp32", "updates/s bf16", "env steps/s fp32", "env steps/s bf16"]
SPEEDUPS = ["update speedup", "end-to-end speedup"]
FP16 = ["updates/s fp16", "env steps/s fp16", "update speedup fp16", "end-to-end speedup fp16"]
SKIPPED = ["fp16 skipped (timed)", "fp16 skipped (end to end)"]


def section(folder: Path) -> str:
    """The AMP table with the device it ran on, each size beside the paper's speedup: quarl's
    throughputs are the mean over the file's runs, its speedups the mean with the runs' range; fp16's
    columns over the runs that measured it, where any did."""
    paper = packaged("mixed_precision_training.csv", "algo_env").set_index("policy")
    measured = pd.read_csv(folder / AMP_FILE) if (folder / AMP_FILE).exists() else None
    header = ["policy", "architecture", "paper: fp32 / mixed min", "paper speedup"]
    fp16 = measured is not None and set(FP16) <= set(measured) and bool(measured[FP16].notna().all(axis=1).any())
    if measured is not None:
        measured = measured.assign(run=measured["run"] if "run" in measured else 1)
    if measured is not None and fp16:
        header += ["quarl runs", "quarl: updates/s fp32 / bf16 / fp16", "update speedup bf16 / fp16"]
        header += ["env steps/s fp32 / bf16 / fp16", "end-to-end speedup bf16 / fp16", "fp16 skipped updates"]
    elif measured is not None:
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
        if fp16 and measured is not None:
            row += _fp16_cells(measured[measured["policy"] == name])
        elif measured is not None:
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
    fp16_runs = int(measured.dropna(subset=FP16)["run"].nunique()) if fp16 and measured is not None else 0
    return note("amp", device=device, runs=runs_n, fp16_runs=fp16_runs) + "\n\n" + markdown(header, rows)


def _fp16_cells(runs: pd.DataFrame) -> list[str]:
    """A size's quarl cells with fp16 beside bf16: fp16's means over the runs that measured it ('-' where none did)."""
    with_fp16 = runs.dropna(subset=FP16)
    mean = runs[RATES].mean()
    fp16 = with_fp16[FP16].mean()
    have = len(with_fp16) > 0

    def rate(column: str, digits: int) -> str:
        return fmt(fp16[column], digits) if have else "-"

    skipped = "-"
    if have and set(SKIPPED) <= set(runs):
        counts = with_fp16[SKIPPED].sum()
        skipped = f"{counts.iloc[0]:.0f} timed, {counts.iloc[1]:.0f} end to end"
    return [
        str(runs["run"].nunique()),
        f"{fmt(mean['updates/s fp32'], 1)} / {fmt(mean['updates/s bf16'], 1)} / {rate('updates/s fp16', 1)}",
        f"{_speedup(runs['update speedup'])} / {_speedup(with_fp16['update speedup fp16']) if have else '-'}",
        f"{fmt(mean['env steps/s fp32'], 0)} / {fmt(mean['env steps/s bf16'], 0)} / {rate('env steps/s fp16', 0)}",
        f"{_speedup(runs['end-to-end speedup'])} / {_speedup(with_fp16['end-to-end speedup fp16']) if have else '-'}",
        skipped,
    ]


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
