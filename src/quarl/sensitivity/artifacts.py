"""What `quarl sensitivity` writes: the table, its heatmap, the search and the command that runs its result."""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from quarl.sensitivity.greedy import Search

log = logging.getLogger(__name__)


def heatmap(table: pd.DataFrame, title: str) -> Figure:
    """Layer x bits heat maps of action agreement and reward (layers in rank order, most sensitive on top)."""
    order = table.sort_values("rank")["layer"].drop_duplicates().tolist()
    fig = Figure(figsize=(11, 1.2 + 0.55 * len(order)), layout="constrained")
    FigureCanvasAgg(fig)
    for ax, (value, label, cmap) in zip(
        fig.subplots(1, 2), (("agreement", "action agreement", "viridis"), ("reward", "reward", "magma"))
    ):
        grid = table.pivot(index="layer", columns="bits", values=value).reindex(order)
        data = grid.to_numpy(dtype=float)
        image = ax.imshow(
            data,
            cmap=cmap,
            aspect="auto",
            vmin=0 if value == "agreement" else None,
            vmax=1 if value == "agreement" else None,
        )
        ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
        ax.set_yticks(range(grid.shape[0]), order)
        ax.set_xlabel("bits (this layer alone; the rest fp32)")
        for (i, j), v in np.ndenumerate(data):
            ax.text(
                j,
                i,
                f"{v:.2f}" if value == "agreement" else f"{v:.0f}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if (v < 0.6 if value == "agreement" else v < np.nanmean(data)) else "black",
            )
        fig.colorbar(image, ax=ax, label=label)
    fig.suptitle(title)
    return fig


def run_command(overrides: list[str], layer_bits: dict[str, int], bits: int) -> str:
    """The run.py command of the searched cell: the study's overrides, quant=ptq, quant.bits and quant.layer_bits."""
    kept = [o for o in overrides if not o.split("=", 1)[0].lstrip("+~").startswith("quant")]
    spec = "{" + ",".join(f"{k}:{v}" for k, v in layer_bits.items()) + "}"
    return shlex.join(["python", "run.py", *kept, "quant=ptq", f"quant.bits={bits}", f"quant.layer_bits={spec}"])


def write(out: Path, table: pd.DataFrame, result: Optional[Search], title: str, command: Optional[str]) -> list[Path]:
    """sensitivity.csv (every layer x bits), ranking.md/.csv/.tex, heatmap.png/.pdf, and search.json/.md
    where searched; returns the paths."""
    from quarl.collate import plots, tables

    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "sensitivity.csv", index=False)
    ranking = table.pivot(index="layer", columns="bits", values="agreement")
    ranking.columns = [f"agreement@{b}" for b in ranking.columns]
    ranking = ranking.join(table.groupby("layer")[["rank", "sensitivity"]].first()).sort_values("rank").reset_index()
    written = [out / "sensitivity.csv"]
    written += tables.write(
        ranking,
        out / "ranking",
        f"{title}: sensitivity, most sensitive first",
        "Action agreement with the fp32 policy when only this layer's weights (or the input) are "
        "quantized, the rest fp32; rank 1 = most sensitive (mean disagreement over the widths).",
        floatfmt=".3f",
    )
    fig = heatmap(table, f"{title}: each layer quantized alone")
    try:
        written += plots.save(fig, out / "heatmap")
    finally:
        fig.clear()
    if result is not None:
        record = {**asdict(result), "command": command}
        (out / "search.json").write_text(json.dumps(record, indent=2))
        steps = pd.DataFrame(result.steps)
        lines = [
            f"## {title}: smallest policy with {result.bound}",
            "",
            f"- layer bits: {json.dumps(result.layer_bits)}",
            f"- bytes: {result.bytes} (uniform {result.uniform_bits}-bit: {result.uniform_bytes}, fp32: "
            f"{result.fp32_bytes}); {result.uniform_bytes / result.bytes:.2f}x smaller than uniform",
            f"- agreement {result.agreement:.4f}, reward {result.reward:.2f} (fp32 {result.fp32_reward:.2f}), "
            f"E {'n/a' if result.e is None else f'{100 * result.e:.2f}%'}; bound met: {result.met}",
            f"- {result.evaluations} evaluations; run it as a cell: `{command}`",
            "",
            steps.to_markdown(index=False, floatfmt=".4g"),
            "",
        ]
        (out / "search.md").write_text("\n".join(lines))
        written += [out / "search.json", out / "search.md"]
    return written
