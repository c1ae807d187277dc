"""The report's QAT vs PTQ section: per series on CartPole and per bit width, QAT's and PTQ's reward
over their seeds and QAT - PTQ paired by seed, read as "higher", "equivalent within ±m" or
"underpowered" (`quarl.collate.verdicts.paired`), with Holm's correction over every width and series."""

from __future__ import annotations

import numpy as np
import pandas as pd

from quarl.collate import verdicts
from quarl.collate.stats import seed_interval
from quarl.report import facts
from quarl.report.campaign import by_seed, difference_bounds, of_series, select, unless_both_fail, values
from quarl.report.sweet_spots import keeps_fp32
from quarl.report.text import aggregate_text, markdown, note, seed_matrix, shown


def qat_vs_ptq(runs: pd.DataFrame, algo: str, env: str = "cartpole") -> pd.DataFrame:
    """QAT against PTQ of the fp32 policy at equal bits (affine, per tensor), across seeds.

    Besides each method's interval: the fp32 reward of the seeds' fp32 policies (what PTQ
    quantized), and QAT minus PTQ paired by seed (both start from the same seed's training, so the
    pairing removes the seed's luck) with its interval and the seeds where QAT was ahead. The verdict
    reads "nothing for QAT to recover" where PTQ already keeps the fp32 reward (within the resolution
    of the report's verdicts, 5% of the env's reward threshold)."""
    base = of_series(runs, algo, env, train__keep_best=True, quant__scheme="affine", quant__granularity="per_tensor")
    rows = []
    for bits in range(2, 9):
        qat = select(base, quant="qat", quant__bits=bits)
        ptq = select(base, quant="ptq", quant__bits=bits)
        if qat.empty and ptq.empty:
            continue
        q = seed_interval(values(qat, "reward_mean")) if not qat.empty else seed_interval([])
        p = seed_interval(values(ptq, "reward_mean")) if not ptq.empty else seed_interval([])
        fp32 = seed_interval(values(ptq, "fp32_reward")) if not ptq.empty else seed_interval([])
        paired = pd.concat([by_seed(qat, "reward_mean"), by_seed(ptq, "reward_mean")], axis=1, join="inner")
        diff = paired.iloc[:, 0] - paired.iloc[:, 1] if not paired.empty else pd.Series(dtype=float)
        d = seed_interval(diff.to_numpy())
        if not (q.has_ci and p.has_ci):
            verdict = "too few seeds to tell"
        elif keeps_fp32(p.estimate, fp32.estimate, env):
            verdict = "nothing for QAT to recover: PTQ keeps the fp32 reward" + _confirmed(ptq, env)
        else:
            verdict = ""  # a paired verdict, decided with the family (`holm_verdicts`)
        rows.append(
            {
                "bits": bits,
                "qat": q,
                "ptq": p,
                "fp32": fp32,
                "diff": d,
                "verdict": verdict,
                "diffs": diff.to_numpy(),
                "by_seed": (by_seed(qat, "reward_mean"), by_seed(ptq, "reward_mean")),
            }
        )
    out = pd.DataFrame(rows)
    same_env = select(runs, env=env)  # records written before env.random_return existed: another record's
    random = values(same_env, "env.random_return") if "env.random_return" in runs.columns else np.empty(0)
    out.attrs["random"] = float(random[0]) if random.size else None
    return out


def _confirmed(ptq: pd.DataFrame, env: str) -> str:
    """Whether PTQ's seeds confirm that it keeps their fp32 reward: the paired 90% Student-t interval
    of PTQ - fp32 lies above -MARGIN (a one-sided test at 5%); '' where every seed is equal to it."""
    diffs = (by_seed(ptq, "reward_mean") - by_seed(ptq, "fp32_reward")).dropna().to_numpy(float)
    if diffs.size < 2 or not diffs.any():
        return ""
    low, high = verdicts.t_interval(diffs, 1 - 2 * verdicts.ALPHA)
    interval = f"paired 90% interval of PTQ - fp32 [{low:.2f}, {high:.2f}] over {diffs.size} seeds"
    return f" ({interval}, above -{MARGIN:g})" if low >= -MARGIN else f", on its mean only ({interval}: not confirmed)"


def aggregate(tables: list[pd.DataFrame]) -> str:
    """Across every series and width: the IQM of the normalised reward (R - R_random) / (R_fp32 -
    R_random) of QAT and of PTQ, and the probability that a QAT run beats a PTQ one (rliable's
    definitions), with intervals of a bootstrap over each series' seeds (`aggregate_text`)."""
    qat: list[np.ndarray] = []
    ptq: list[np.ndarray] = []
    for table in tables:
        random = table.attrs.get("random")
        rows = [r for _, r in table.iterrows() if r["fp32"].n_runs and all(len(s) for s in r["by_seed"])]
        if random is None or not rows:
            continue
        for side, out in ((0, qat), (1, ptq)):
            out.append(seed_matrix([(r["by_seed"][side] - random) / (r["fp32"].estimate - random) for r in rows]))
    return aggregate_text(qat, ptq, ("QAT", "PTQ"), "widths")


MARGIN = verdicts.SCALE_MARGIN * 500.0  # 5% of CartPole's return scale
CARTPOLE = (0.0, 500.0)  # CartPole-v1's return range (`quarl.collate.bounds`): intervals are clipped to it
DIFFERENCES = difference_bounds(CARTPOLE)  # what QAT - PTQ can be: its interval is clipped to it
WIDEST = DIFFERENCES[1]


def holm_verdicts(tables: list[pd.DataFrame]) -> list[pd.DataFrame]:
    """The paired verdict of every width still open in `tables` (one per series), with Holm's
    correction over all of them together: one family of QAT-vs-PTQ tests."""
    open_rows = [(t, i) for t in tables for i in t.index if not t.at[i, "verdict"]]
    keep = verdicts.holm([verdicts.t_test_p(t.at[i, "diffs"]) for t, i in open_rows])
    for (t, i), significant in zip(open_rows, keep):
        verdict = verdicts.paired(t.at[i, "diffs"], MARGIN, ("QAT", "PTQ"), significant, largest=WIDEST)
        means = [t.at[i, "qat"].estimate, t.at[i, "ptq"].estimate]
        text = unless_both_fail(verdict.text, means, t.attrs.get("random"), MARGIN)
        t.at[i, "verdict"] = f"{text} (family of {len(open_rows)})"
    return tables


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


def section(runs: pd.DataFrame, algos: list[str]) -> str:
    """QAT against PTQ per series on CartPole, and the finding read across the tables."""
    qat, findings = [], []
    found = [(algo, t) for algo in algos if not (t := qat_vs_ptq(runs, algo)).empty]
    holm_verdicts([t for _, t in found])
    for algo, t in found:
        findings.append(qat_finding(t, algo))
        qat.append(
            f"**{algo}** on CartPole:\n\n"
            + markdown(
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
                        shown(r["qat"], bounds=CARTPOLE),
                        str(r["qat"].n_runs),
                        shown(r["ptq"], bounds=CARTPOLE),
                        str(r["ptq"].n_runs),
                        shown(r["fp32"], bounds=CARTPOLE),
                        shown(r["diff"], bounds=DIFFERENCES),
                        r["verdict"],
                    ]
                    for _, r in t.iterrows()
                ],
            )
        )
    if findings:
        qat.append("Read across the tables: " + " ".join(findings) + aggregate([t for _, t in found]))
    widths = facts.widths(sorted({int(b) for _, t in found for b in t["bits"]})) if found else "the widths of its grid"
    return "## QAT vs PTQ\n\n" + note("qat", widths=widths) + "\n\n" + ("\n\n".join(qat) if qat else "Not run yet.")
