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
PAPER_HEADER = ["policy", "architecture", "paper: fp32 / mixed min", "paper speedup"]


def section(folder: Path) -> str:
    """The paper's table, then quarl's beside it once per GPU (timings from different cards are never
    averaged): each size's throughputs are the mean over that card's runs, its speedups the mean with
    the runs' range; fp16's columns over the runs that measured it, where any did."""
    paper = packaged("mixed_precision_training.csv", "algo_env").set_index("policy")
    measured = pd.read_csv(folder / AMP_FILE) if (folder / AMP_FILE).exists() else None
    if measured is None:
        return note("amp", devices=0) + "\n\n" + markdown(PAPER_HEADER, [_published(n, p) for n, p in paper.iterrows()])
    measured = measured.assign(run=measured["run"] if "run" in measured else 1, device=measured["device"].astype(str))
    cards = [_card(device, runs, paper) for device, runs in measured.groupby("device", sort=True)]
    return note("amp", devices=len(cards), largest=_largest(measured, paper)) + "\n\n" + "\n\n".join(cards)


def _largest(measured: pd.DataFrame, paper: pd.DataFrame) -> dict[str, str]:
    """The largest policy, as the prose names it: its size (parameters where measured, its
    architecture) and the paper's speedup for it; the paper lists its sizes smallest first."""
    name = str(paper.index[-1])
    if "parameters" in measured.columns and measured["parameters"].notna().any():
        name = str(measured.loc[measured["parameters"].idxmax(), "policy"])
    rows = measured[measured["policy"] == name]
    counted = rows["parameters"].dropna() if "parameters" in rows.columns else pd.Series(dtype=float)
    size = f"{float(counted.iloc[0]) / 1e6:.0f}M parameters: " if len(counted) else ""
    return {
        "name": name,
        "size": size + str(paper.loc[name, "architecture"]),
        "paper": f"{float(paper.loc[name, 'speedup']):.2f}x",
    }


def _card(device: str, measured: pd.DataFrame, paper: pd.DataFrame) -> str:
    """One GPU's runs beside the paper's: the sentence saying how many, then the table."""
    fp16 = set(FP16) <= set(measured) and bool(measured[FP16].notna().all(axis=1).any())
    header = list(PAPER_HEADER)
    if fp16:
        header += ["quarl runs", "quarl: updates/s fp32 / bf16 / fp16", "update speedup bf16 / fp16"]
        header += ["env steps/s fp32 / bf16 / fp16", "end-to-end speedup bf16 / fp16", "fp16 skipped updates"]
    else:
        header += ["quarl runs", "quarl: updates/s fp32 / bf16", "update speedup", "env steps/s fp32 / bf16"]
        header += ["end-to-end speedup"]
    rows = []
    for name, published in paper.iterrows():
        runs = measured[measured["policy"] == name]
        rows.append(_published(name, published) + (_fp16_cells(runs) if fp16 else _bf16_cells(runs)))
    fp16_runs = int(measured.dropna(subset=FP16)["run"].nunique()) if fp16 else 0
    return note("amp_device", device=device, runs=int(measured["run"].nunique()), fp16_runs=fp16_runs) + (
        "\n\n" + markdown(header, rows)
    )


def _published(name: object, published: pd.Series) -> list[str]:
    """A size's paper cells: its name, architecture, runtimes and speedup."""
    return [
        str(name),
        str(published["architecture"]),
        f"{published['fp32_runtime_min']:.0f} / {published['mp_runtime_min']:.0f}",
        _published_speedup(published),
    ]


def _bf16_cells(runs: pd.DataFrame) -> list[str]:
    """A size's quarl cells from runs that measured bf16 only."""
    mean = runs[RATES].mean()
    return [
        str(runs["run"].nunique()),
        f"{fmt(mean['updates/s fp32'], 1)} / {fmt(mean['updates/s bf16'], 1)}",
        _speedup(runs["update speedup"]),
        f"{fmt(mean['env steps/s fp32'], 0)} / {fmt(mean['env steps/s bf16'], 0)}",
        _speedup(runs["end-to-end speedup"]),
    ]


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
