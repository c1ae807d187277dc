"""The report's sweet spots: per series and bit width, the reward and action agreement of PTQ with
the released code's formula across seeds, the fewest bits that keep the fp32 reward (never named on
a weak fp32 baseline), the seed-to-seed noise of E and agreement, and the CartPole figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quarl.collate import verdicts
from quarl.collate.stats import seed_interval
from quarl.config import method_registry
from quarl.evaluate.fidelity import AGREEMENT_TOLERANCE
from quarl.report.campaign import FIGURES, by_seed, of_series, reward_bounds, select, series_flag, threshold, values
from quarl.report.text import FRACTION, UNBOUNDED, fmt, markdown, note, save_figure, shown

SWEET_FIGURE = "sweet_spot_cartpole.png"

SWEET_BITS = (2, 3, 4, 5, 6, 7, 8, 32)


def sweet_spot(runs: pd.DataFrame, algo: str, env: str = "cartpole") -> pd.DataFrame:
    """Reward and action agreement per bit width (the released code's formula) and fp16, across the
    seeds of one series (`algo`: the algo, or a training's label where `runs` has several)."""
    base = of_series(runs, algo, env, train__keep_best=True)
    out = []
    for bits in SWEET_BITS:
        cells = select(base, quant="ptq", quant__bits=bits, quant__scheme="quarl_code")
        out.append(width_summary(str(bits), cells))
    out.append(width_summary("fp16", select(base, quant="fp16")))
    table = pd.DataFrame(out)
    table.attrs["flag"] = series_flag(base)
    table.attrs["bounds"] = reward_bounds(base)
    return table


def width_summary(label: str, cells: pd.DataFrame) -> dict[str, Any]:
    reward = seed_interval(values(cells, "reward_mean")) if not cells.empty else seed_interval([])
    agreement = seed_interval(values(cells, "action_agreement")) if not cells.empty else seed_interval([])
    mad = values(cells, "action_mad") if not cells.empty and "action_mad" in cells.columns else np.empty(0)
    errors = values(cells, "rel_error", 100.0) if not cells.empty else np.empty(0)  # points of %
    agree = values(cells, "action_agreement", 100.0) if not cells.empty else np.empty(0)
    return {
        "bits": label,
        "reward": reward,
        "agreement": agreement,
        "n": reward.n_runs,
        "mad": seed_interval(mad),  # continuous actions: mean |a_q - a_fp32| as a fraction of the range
        "sd_E": float(np.std(errors, ddof=1)) if errors.size > 1 else float("nan"),
        "sd_agreement": float(np.std(agree, ddof=1)) if agree.size > 1 else float("nan"),
        "per_seed": by_seed(cells, "reward_mean") if not cells.empty else pd.Series(dtype=float),
        "n_E": int(errors.size),  # seeds with an E (n/a where the fp32 reward is too close to 0)
        "n_agreement": int(agree.size),
    }


def _sd(r: pd.Series, quantity: str) -> str:
    """A standard deviation, with the seeds behind it where they are not the row's n."""
    count = r[f"n_{quantity}"]
    return fmt(r[f"sd_{quantity}"]) + (f" (n = {count})" if count != r["n"] and count > 1 else "")


def keeps_fp32(reward: float, fp32: float, env: str) -> bool:
    """Whether `reward` keeps the fp32 reward: within KEEP_FRACTION of the env's reward threshold below it."""
    limit = threshold(env)
    return reward >= fp32 - (KEEP_FRACTION * abs(limit) if limit else 0.0)


KEEP_FRACTION = verdicts.SCALE_MARGIN  # a width keeps fp32's reward within this fraction of the env's scale


def extension_finding(table: pd.DataFrame, scale: float) -> str:
    """Which of 2..8 bits keep the fp32 (32-bit) mean reward, to within KEEP_FRACTION of the env's
    return scale, and whether they are every width down to the fewest (a sweet spot) or not; no
    sweet spot where the table's fp32 baseline is weak (`attrs["flag"]`, `series_flag`)."""
    if table.attrs.get("flag"):
        why = "a width can only keep the reward of a policy that solves its task"
        return f"Sweet spot: none named ({table.attrs['flag']}: {why})."
    fp32 = table.loc[table["bits"] == "32", "reward"]
    if fp32.empty or fp32.iloc[0].n_runs == 0:
        return "Sweet spot: n/a (no fp32 cell yet)."
    reference, tolerance = fp32.iloc[0].estimate, KEEP_FRACTION * scale
    run = {int(b): r for b, r in zip(table["bits"], table["reward"]) if b.isdigit() and int(b) <= 8 and r.n_runs}
    kept = [bits for bits in sorted(run, reverse=True) if run[bits].estimate >= reference - tolerance]
    share = f"{KEEP_FRACTION:.0%} of the env's return scale"
    rule = f"mean reward within {tolerance:g} ({share}) of the fp32 mean {fmt(reference)}"
    if not kept:
        return f"Sweet spot: none of {min(run)}..{max(run)} bits keeps the {rule}."
    widths = ", ".join(str(b) for b in kept)
    if kept == [b for b in sorted(run, reverse=True) if b >= kept[-1]]:
        found = f"Sweet spot: {kept[-1]} bits, the fewest of the widths that keep the {rule} ({widths})"
        return f"{found}; {_paired_check(table, kept[-1], tolerance)}."
    wider = ", ".join(str(b) for b in sorted(run, reverse=True) if b > kept[-1] and b not in kept)
    seeds = run[kept[-1]].n_runs
    why = f"with {seeds} seeds a width's mean moves with a single seed" if seeds > 1 else "each width is one policy"
    return f"No clean sweet spot: {widths} bits keep the {rule}, but {wider} bits, wider, do not; {why}."


def _paired_check(table: pd.DataFrame, bits: int, tolerance: float) -> str:
    """Whether the named width keeps the fp32 reward seed by seed: the 90% Student-t interval of the
    paired difference (width - fp32) lies above -`tolerance` (a one-sided test at 5%), or not yet."""
    rows = table.set_index("bits")
    diffs = (rows.loc[str(bits), "per_seed"] - rows.loc["32", "per_seed"]).dropna().to_numpy(float)
    if diffs.size < 2:
        return "one paired seed: no test of it"
    low, high = verdicts.t_interval(diffs, 1 - 2 * verdicts.ALPHA)
    interval = f"the paired 90% interval of {bits} bits - fp32 over {diffs.size} seeds is [{fmt(low)}, {fmt(high)}]"
    if low >= -tolerance:
        return f"{interval}, above -{tolerance:g}: the seeds confirm it"
    return f"but {interval}, reaching below -{tolerance:g}: at n = {diffs.size} the seeds do not confirm it"


def sweet_table(table: pd.DataFrame) -> str:
    """A `sweet_spot` table as Markdown: reward and action agreement per bit width, with intervals,
    and for continuous actions the mean action difference (agreement only counts a state within 5%)."""
    continuous = "mad" in table.columns and any(m.n_runs for m in table["mad"])
    header = ["weight bits", "reward [95% CI]", "action agreement [95% CI]"]
    header += ["action MAD, fraction of range [95% CI]"] if continuous else []
    return markdown(
        [*header, "n", "sd of E (points of %)", "sd of agreement (points of %)"],
        [
            [
                r["bits"],
                shown(r["reward"], bounds=table.attrs.get("bounds", UNBOUNDED)),
                shown(r["agreement"], 3, FRACTION),
                *([shown(r["mad"], 3, FRACTION)] if continuous else []),
                str(r["n"]),
                _sd(r, "E"),
                _sd(r, "agreement"),
            ]
            for _, r in table.iterrows()
        ],
    )


AGREEMENT_LOW = 0.5  # a width whose reward holds with agreement below this is explained by its MAD


def agreement_reading(table: pd.DataFrame, scale: float) -> str:
    """For continuous actions: the widths whose reward holds while agreement is low, read with the
    mean action difference ('' where there are none)."""
    fp32 = table.loc[table["bits"] == "32", "reward"]
    if fp32.empty or fp32.iloc[0].n_runs == 0 or not any(m.n_runs for m in table["mad"]):
        return ""
    reference, tolerance = fp32.iloc[0].estimate, KEEP_FRACTION * scale
    low = [
        f"{r['bits']} bits (agreement {fmt(r['agreement'].estimate, 3)}, MAD {fmt(r['mad'].estimate, 3)}: "
        + (
            "the actions move by more than the band on average)"
            if r["mad"].estimate > AGREEMENT_TOLERANCE
            else "within the band on average, but many states just outside it)"
        )
        for _, r in table.iterrows()
        if r["bits"].isdigit()
        and r["mad"].n_runs
        and r["agreement"].estimate < AGREEMENT_LOW
        and r["reward"].estimate >= reference - tolerance
    ]
    if not low:
        return ""
    return (
        f" Agreement is low while the reward holds at {'; '.join(low)}. Agreement counts a state only where "
        f"every action is within {AGREEMENT_TOLERANCE:.0%} of the range of fp32's (the band); the task tolerates "
        "these moves, so agreement is a threshold here and the MAD says how far the actions moved."
    )


def noise(runs: pd.DataFrame) -> pd.DataFrame:
    """How much E and action agreement each move between seeds, cell by cell: their standard
    deviations across seeds for every quantized cell measured on two seeds or more."""
    quantized = runs[runs["quant"].isin(["ptq", "fp16", "bf16", "qat"])]
    if quantized.empty or "action_agreement" not in quantized.columns:
        return pd.DataFrame()
    if "series" in quantized.columns:  # one training's seeds per row: its label stands as the algo
        quantized = quantized.assign(algo=quantized["series"])
    cell = [c for c in ("algo", "env", "quant", "quant.bits", "quant.scheme") if c in quantized.columns]
    rows = []
    for key, group in quantized.groupby(cell, sort=True, dropna=False):
        numeric = group.reindex(columns=["rel_error", "action_agreement"]).apply(pd.to_numeric, errors="coerce")
        both = group[numeric.notna().all(axis=1)]  # one n per row: the seeds with both values
        errors, agree = values(both, "rel_error", 100.0), values(both, "action_agreement", 100.0)
        if errors.size < 2:
            continue
        rows.append(
            {
                **dict(zip(cell, key)),
                "n": int(errors.size),
                "sd_E": float(np.std(errors, ddof=1)),
                "sd_agreement": float(np.std(agree, ddof=1)),
            }
        )
    return pd.DataFrame(rows)


def figure(runs: pd.DataFrame, algos: list[str], out: Path) -> Path:
    """Reward and action agreement vs bits for each algorithm on CartPole (the released code's
    formula), mean and 95% interval over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = {a: sweet_spot(runs, a) for a in algos}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    x = np.arange(len(SWEET_BITS) + 1)
    labels = [*map(str, SWEET_BITS[:-1]), "fp32", "fp16"]
    for algo, table in tables.items():
        for ax, column in zip(axes, ("reward", "agreement")):
            mean = np.array([ci.estimate for ci in table[column]])
            err = np.array(
                [[ci.estimate - ci.low, ci.high - ci.estimate] if ci.has_ci else [0, 0] for ci in table[column]]
            ).T
            n = int(table["n"].max())
            ax.errorbar(x, mean, yerr=err, marker="o", capsize=3, label=f"{algo} (n={n} seeds)")
    for ax, title in zip(axes, ("reward (mean, 95% t-interval)", "action agreement with fp32")):
        ax.set_xticks(x, labels)
        ax.set_xlabel("weight bits (quant.scheme=quarl_code, per tensor, biases fp32)")
        ax.set_title(f"CartPole: {title}")
    axes[0].legend(fontsize=8)
    return save_figure(fig, out, SWEET_FIGURE, dpi=110)


def sweet_section(runs: pd.DataFrame, algos: list[str], folder: Path, figures: bool) -> str:
    """The sweet-spot table of each series on CartPole, and its figure (drawn when `figures`)."""
    sweet = [f"**{algo}** on CartPole:\n\n" + sweet_table(sweet_spot(runs, algo)) for algo in algos]
    has_sweet = any((sweet_spot(runs, a)["n"] > 0).any() for a in algos)
    if has_sweet and figures:
        figure(runs, algos, folder / FIGURES)
    return (
        "## PTQ sweet spots\n\n"
        + note("sweet")
        + "\n\n"
        + "\n\n".join(sweet)
        + (f"\n\n![sweet spots]({FIGURES}/{SWEET_FIGURE})" if has_sweet else "")
    )


def noise_section(runs: pd.DataFrame) -> str:
    """How much E and agreement move between seeds ('' when no cell has two seeds)."""
    spread = noise(runs)
    if spread.empty:
        return ""

    def label(r: pd.Series) -> str:  # an integer method's cells differ in bits and scheme: name them
        integer = method_registry.get(str(r["quant"])).integer
        return f"{r['quant']} {int(r['quant.bits'])}-bit {r['quant.scheme']}" if integer else str(r["quant"])

    return (
        "## How much E and action agreement move between seeds\n\n"
        + note("noise")
        + "\n\n"
        + markdown(
            ["algo", "env", "cell", "seeds", "sd of E (points of %)", "sd of agreement (points of %)"],
            [
                [r["algo"], r["env"], label(r), str(r["n"]), fmt(r["sd_E"]), fmt(r["sd_agreement"])]
                for _, r in spread.iterrows()
            ],
        )
    )
