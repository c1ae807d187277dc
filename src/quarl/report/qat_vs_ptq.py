"""DOC"""

from __future__ import annotations

import pandas as pd

from quarl.collate.stats import seed_interval
from quarl.report.records import _by_seed, _of, _values, select
from quarl.report.sweet_spots import keeps_fp32
from quarl.report.text import _markdown, note, shown


def qat_vs_ptq(runs: pd.DataFrame, algo: str, env: str = "cartpole") -> pd.DataFrame:
    """QAT against PTQ of the fp32 policy at equal bits (affine, per tensor), across seeds.

    Besides each method's interval: the fp32 reward of the seeds' fp32 policies (what PTQ
    quantized), and QAT minus PTQ paired by seed (both start from the same seed's training, so the
    pairing removes the seed's luck) with its interval and the seeds where QAT was ahead. The verdict
    reads "nothing for QAT to recover" where PTQ already keeps the fp32 reward (within the resolution
    of the report's verdicts, 5% of the env's reward threshold)."""
    base = _of(runs, algo, env, train__keep_best=True, quant__scheme="affine", quant__granularity="per_tensor")
    rows = []
    for bits in range(2, 9):
        qat = select(base, quant="qat", quant__bits=bits)
        ptq = select(base, quant="ptq", quant__bits=bits)
        if qat.empty and ptq.empty:
            continue
        q = seed_interval(_values(qat, "reward_mean")) if not qat.empty else seed_interval([])
        p = seed_interval(_values(ptq, "reward_mean")) if not ptq.empty else seed_interval([])
        fp32 = seed_interval(_values(ptq, "fp32_reward")) if not ptq.empty else seed_interval([])
        paired = pd.concat([_by_seed(qat, "reward_mean"), _by_seed(ptq, "reward_mean")], axis=1, join="inner")
        diff = paired.iloc[:, 0] - paired.iloc[:, 1] if not paired.empty else pd.Series(dtype=float)
        d = seed_interval(diff.to_numpy())
        if not (q.has_ci and p.has_ci):
            verdict = "too few seeds to tell"
        elif keeps_fp32(p.estimate, fp32.estimate, env):
            verdict = "nothing for QAT to recover: PTQ keeps the fp32 reward"
        elif d.has_ci and d.low > 0:
            verdict = "QAT higher (paired interval above 0)"
        elif d.has_ci and d.high < 0:
            verdict = "PTQ higher (paired interval below 0)"
        else:
            ahead = f"{int((diff > 0).sum())} of {len(diff)}"
            verdict = f"no difference shown (paired interval includes 0); QAT ahead in {ahead} seeds"
        rows.append({"bits": bits, "qat": q, "ptq": p, "fp32": fp32, "diff": d, "verdict": verdict})
    return pd.DataFrame(rows)


def qat_finding(table: pd.DataFrame, algo: str, env: str = "cartpole") -> str:
    """One sentence per algorithm on the paper's QAT finding: the fewest bits at which each method
    keeps the fp32 reward (`keeps_fp32`), from the table's rows."""

    def fewest(column: str) -> str:
        kept = None  # the last width, going down from the widest, before the first that loses reward
        for _, r in table.sort_values("bits", ascending=False).iterrows():
            if not keeps_fp32(r[column].estimate, r["fp32"].estimate, env):
                break
            kept = int(r["bits"])
        return f"{kept} bits" if kept is not None else "none of the widths run"

    return f"{algo}: QAT keeps the fp32 reward down to {fewest('qat')}, PTQ down to {fewest('ptq')}."


def _qat_section(runs: pd.DataFrame, algos: list[str]) -> str:
    """QAT against PTQ per series on CartPole, and the finding read across the tables."""
    qat, findings = [], []
    for algo in algos:
        t = qat_vs_ptq(runs, algo)
        if t.empty:
            continue
        findings.append(qat_finding(t, algo))
        qat.append(
            f"**{algo}** on CartPole:\n\n"
            + _markdown(
                [
                    "bits",
                    "QAT reward [95% CI]",
                    "n",
                    "PTQ reward [95% CI]",
                    "n",
                    "fp32 reward [95% CI]",
                    "QAT - PTQ, paired by seed [95% CI]",
                    "verdict",
                ],
                [
                    [
                        str(r["bits"]),
                        shown(r["qat"]),
                        str(r["qat"].n_runs),
                        shown(r["ptq"]),
                        str(r["ptq"].n_runs),
                        shown(r["fp32"]),
                        shown(r["diff"]),
                        r["verdict"],
                    ]
                    for _, r in t.iterrows()
                ],
            )
        )
    if findings:
        qat.append("Read across the tables: " + " ".join(findings))
    return "## QAT vs PTQ\n\n" + note("qat") + "\n\n" + ("\n\n".join(qat) if qat else "Not run yet.")
