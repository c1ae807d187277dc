"""The report's "Deployment" section: the paper's Raspberry Pi 3b table (fp32 vs int8 inference of
three MLP policies) beside what quarl measures instead on the machines it has: the same networks'
batch-1 latency on this CPU (`benchmarks/bench_deploy.py`, saved as `deployment.csv` beside the
report) and the C policy's executed instructions per action on the emulated Cortex-M4."""

from __future__ import annotations

import json

import pandas as pd

from quarl.collate.published import packaged
from quarl.report.campaign import Inputs
from quarl.report.text import fmt, markdown, note

MEASURED = "deployment.csv"  # bench_deploy.py's "Published vs here" rows, copied with its command and machine
EDGE = "edge_export.json"  # `quarl export ... --format c`'s measures.json for the tuned PPO CartPole policy


def section(inputs: Inputs) -> str:
    """The paper's rows, each beside quarl's measurement of the same network where there is one."""
    paper = packaged("paper_deployment_int8.csv", "policy")
    path = inputs.folder / MEASURED
    measured = pd.read_csv(path, comment="#").set_index("policy") if path.exists() else pd.DataFrame()
    rows = []
    for _, r in paper.iterrows():
        ours = measured.loc[r["policy"]] if r["policy"] in measured.index else None
        rows.append(
            [
                str(r["policy"]),
                str(r["network"]),
                f"{fmt(r['fp32_time_ms'], 3)} / {fmt(r['int8_time_ms'], 3)}",
                f"{fmt(r['speedup'])}x",
                f"{r['fp32_success_pct']:.0f}% / {r['int8_success_pct']:.0f}%",
                *(
                    [
                        f"{ours['network']}: {fmt(ours['fp32_ms'], 3)} / {fmt(ours['int8_ms'], 3)}",
                        f"{fmt(ours['fp32_ms'] / ours['int8_ms'])}x",
                        str(ours["int8_backend"]),
                    ]
                    if ours is not None
                    else ["not measured", "", ""]
                ),
            ]
        )
    header = ["policy", "network", "paper: fp32 / int8 ms (Pi 3b)", "paper speedup", "paper success fp32 / int8"]
    header += ["quarl: fp32 / int8 ms (this CPU)", "quarl speedup", "quarl int8 backend"]
    source = str(measured["source"].iloc[0]) if "source" in measured.columns and len(measured) else ""
    text = note("deployment", source=source, firmware=_firmware(inputs))
    return "## Deployment: int8 inference\n\n" + text + "\n\n" + markdown(header, rows)


def _firmware(inputs: Inputs) -> dict[str, str] | None:
    """The Cortex-M4 measures of the C policy the README's edge export wrote (`edge_export.json`,
    its `measures.json`): instructions per action, flash and RAM, and the command; None without it."""
    path = inputs.folder / EDGE
    if not path.exists():
        return None
    measures = json.loads(path.read_text())
    m4, origin = measures.get("firmware", {}).get("cortex-m4"), measures.get("origin", {})
    if m4 is None:
        return None
    return {
        "instructions": f"{m4['instructions']:,.0f}",
        "flash": f"{m4['flash']:,}",
        "ram": f"{m4['ram']:,}",
        "source": f"cell {origin.get('quarl.cell_key', 'unknown')}, measured {measures.get('measured_on', 'undated')}",
    }
