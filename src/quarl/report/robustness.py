"""The report's "Trained for robustness" section: per task, each width's reward and action agreement
for the plain policies and for those trained with `train.robust` (sweep ptq_robust), the paired
difference (robust minus plain, seed by seed: each robust policy has a plain twin of the same seed,
budget and keep-best), the sweet spot of each training, and the fp32 reward each training reaches."""

from __future__ import annotations

import numpy as np
import pandas as pd

from quarl.collate import verdicts
from quarl.collate.stats import Interval, seed_interval
from quarl.report.campaign import (
    by_seed,
    difference_bounds,
    reward_bounds,
    select,
    series_flag,
    unless_both_fail,
    values,
)
from quarl.report.sweet_spots import KEEP_FRACTION, SWEET_BITS, extension_finding, width_summary
from quarl.report.text import FRACTION, UNBOUNDED, aggregate_text, markdown, seed_matrix, shown

TASKS = (("dqn", "cartpole"), ("dqn", "acrobot"), ("dqn", "box2d/lunarlander"), ("sac", "pendulum"))
TECHNIQUES = {"sam": "SAM", "noise": "pseudo-quantization noise"}


def _widths(runs: pd.DataFrame, algo: str, env: str) -> pd.DataFrame:
    """The sweet-spot quantizer's cells of a training (quarl_code, per tensor, keep-best)."""
    return select(runs, algo=algo, env=env, quant="ptq", quant__scheme="quarl_code", train__keep_best=True)


def _paired(plain: pd.DataFrame, robust: pd.DataFrame, column: str) -> tuple[Interval, list[float]]:
    """Robust minus plain `column`, seed by seed (the seeds both have): its interval and the differences."""
    both = pd.concat([by_seed(robust, column), by_seed(plain, column)], axis=1, join="inner")
    diff = (both.iloc[:, 0] - both.iloc[:, 1]).to_numpy() if not both.empty else []
    return seed_interval(diff), list(diff)


def comparison(plain_runs: pd.DataFrame, robust_runs: pd.DataFrame, algo: str, env: str) -> pd.DataFrame:
    """Per width: plain and robust reward and agreement with intervals, and their paired difference."""
    plain_cells, robust_cells = _widths(plain_runs, algo, env), _widths(robust_runs, algo, env)
    rows = []
    for bits in SWEET_BITS:
        plain = select(plain_cells, quant__bits=bits)
        robust = select(robust_cells, quant__bits=bits)
        if robust.empty:
            continue
        reward, diffs = _paired(plain, robust, "reward_mean")
        agreement, agreement_diffs = _paired(plain, robust, "action_agreement")
        twins = plain[plain["seed"].isin(set(robust["seed"]))]  # the plain side over the paired seeds only
        rows.append(
            {
                "bits": str(bits),
                "plain": width_summary(str(bits), twins),
                "robust": width_summary(str(bits), robust),
                "diff": reward,
                "agreement_diff": agreement,
                "agreement_diffs": agreement_diffs,
                "paired": len(diffs),
                "diffs": diffs,
                "by_seed": (by_seed(twins, "reward_mean"), by_seed(robust, "reward_mean")),
                "verdict": "",
                "kind": "",
            }
        )
    out = pd.DataFrame(rows)
    pair = select(robust_runs, algo=algo, env=env)
    scale = values(pair, "env.return_scale") if "env.return_scale" in pair.columns else np.empty(0)
    out.attrs["scale"] = float(scale[0]) if scale.size else float("nan")
    out.attrs["flags"] = {"plain": series_flag(plain_cells), "robust": series_flag(robust_cells)}
    out.attrs["bounds"] = reward_bounds(pair)
    random = values(pair, "env.random_return") if "env.random_return" in pair.columns else np.empty(0)
    fp32 = values(select(plain_cells, quant__bits=32), "reward_mean")
    out.attrs["normal"] = (float(random[0]), float(fp32.mean())) if random.size and fp32.size else None
    return out


def aggregate(tables: list[pd.DataFrame]) -> str:
    """Across every task and width 2..8 of `tables` (one technique): the IQM of the normalised reward
    (R - R_random) / (R_fp32 plain - R_random) of each side with its stratified-bootstrap interval,
    and the probability that a robust run beats a plain one (rliable's definitions, Agarwal et al.
    2021, `quarl.collate.stats`); '' where no task has a random return to normalise by."""
    plain: list[np.ndarray] = []
    robust: list[np.ndarray] = []
    for table in tables:
        widths = table[table["bits"] != "32"] if not table.empty else table
        if table.attrs.get("normal") is None or widths.empty:
            continue
        random, fp32 = table.attrs["normal"]
        for side, out in ((0, plain), (1, robust)):
            out.append(seed_matrix([(seeds[side] - random) / (fp32 - random) for seeds in widths["by_seed"]]))
    return aggregate_text(robust, plain, ("robust", "plain"), "widths")


def _sweet(table: pd.DataFrame, side: str, scale: float) -> str:
    """The sweet-spot finding of one side (plain or robust) of a comparison."""
    summaries = pd.DataFrame([r[side] for _, r in table.iterrows()])
    summaries.attrs["flag"] = table.attrs.get("flags", {}).get(side, "")
    return extension_finding(summaries, scale) if not summaries.empty else "n/a"


def _block(table: pd.DataFrame, robust_runs: pd.DataFrame, algo: str, env: str, technique: str) -> str:
    pair = select(robust_runs, algo=algo, env=env)
    env_id = str(pair["env.id"].iloc[0]) if "env.id" in pair.columns and not pair.empty else env
    scale = float(values(pair, "env.return_scale")[0]) if "env.return_scale" in pair.columns else float("nan")
    bounds = table.attrs.get("bounds", UNBOUNDED)
    fp32 = table[table["bits"] == "32"]
    fp32_text = (
        f"fp32 reward: plain {shown(fp32.iloc[0]['plain']['reward'], bounds=bounds)}, {TECHNIQUES[technique]} "
        f"{shown(fp32.iloc[0]['robust']['reward'], bounds=bounds)}, paired difference "
        f"{shown(fp32.iloc[0]['diff'], bounds=difference_bounds(bounds))}"
        if not fp32.empty
        else "fp32 reward: not run yet"
    )
    body = markdown(
        [
            "weight bits",
            "plain reward [95% CI]",
            "robust reward [95% CI]",
            "robust - plain, paired [95% CI]",
            "plain agreement",
            "robust agreement",
            "agreement: robust - plain [95% CI]",
            "seeds paired",
            "verdict (Holm over the family)",
        ],
        [
            [
                r["bits"],
                shown(r["plain"]["reward"], bounds=bounds),
                shown(r["robust"]["reward"], bounds=bounds),
                shown(r["diff"], bounds=difference_bounds(bounds)),
                shown(r["plain"]["agreement"], 3, FRACTION),
                shown(r["robust"]["agreement"], 3, FRACTION),
                shown(r["agreement_diff"], 3, difference_bounds(FRACTION)),  # two fractions differ by at most 1
                str(r["paired"]),
                r["verdict"],
            ]
            for _, r in table.iterrows()
        ],
    )
    return (
        f"**{algo}** on {env_id}, {TECHNIQUES[technique]} ({fp32_text}):\n\n"
        + body
        + "\n\n"
        + f"Plain: {_sweet(table, 'plain', scale)} {TECHNIQUES[technique]}: {_sweet(table, 'robust', scale)}"
    )


def tables(plain_runs: pd.DataFrame, robust_runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Every comparison run so far, by 'algo/env/technique'."""
    if robust_runs.empty or "train.robust" not in robust_runs.columns:
        return {}
    found = {}
    for algo, env in TASKS:
        for technique in TECHNIQUES:
            table = comparison(plain_runs, robust_runs[robust_runs["train.robust"] == technique], algo, env)
            if not table.empty:
                found[f"{algo}/{env}/{technique}"] = table
    return _holm(found)


def _holm(found: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Every width's paired reward verdict (robust vs plain, 2..8 bits) with Holm's correction over
    the whole family of widths, tasks and techniques; the margin is 5% of each task's return scale."""
    cells = [(t, i) for t in found.values() for i in t.index if t.at[i, "bits"] != "32"]
    keep = verdicts.holm([verdicts.t_test_p(t.at[i, "diffs"]) for t, i in cells])
    for (t, i), significant in zip(cells, keep):
        margin = verdicts.SCALE_MARGIN * t.attrs.get("scale", float("nan"))
        bounds = t.attrs.get("bounds")
        widest = difference_bounds(bounds)[1] if bounds is not None else float("inf")
        verdict = verdicts.paired(t.at[i, "diffs"], margin, ("robust", "plain"), significant, largest=widest)
        means = [t.at[i, side]["reward"].estimate for side in ("plain", "robust")]
        random = t.attrs["normal"][0] if t.attrs.get("normal") else None
        t.at[i, "verdict"], t.at[i, "kind"] = unless_both_fail(verdict.text, means, random, margin), verdict.kind
    return found


def _agreement_rose(found: dict[str, pd.DataFrame]) -> dict[tuple[str, str], bool]:
    """(task/technique, bits) -> whether the robust policy's action agreement is higher than its
    plain twin's, paired by seed, after Holm's correction over every width of every task and technique."""
    cells = [(key, t, i) for key, t in found.items() for i in t.index if t.at[i, "bits"] != "32"]
    keep = verdicts.holm([verdicts.t_test_p(t.at[i, "agreement_diffs"]) for _, t, i in cells])
    return {
        (key, t.at[i, "bits"]): bool(kept and np.mean(t.at[i, "agreement_diffs"]) > 0)
        for (key, t, i), kept in zip(cells, keep)
    }


def reading(found: dict[str, pd.DataFrame]) -> str:
    """Per technique, across its tasks: at how many widths the paired reward difference is above,
    below or around 0, at how many the agreement rose, and the fp32 reward it cost or gave per task."""
    lines = []
    family = sum(1 for t in found.values() for b in t["bits"] if b != "32")
    rose = _agreement_rose(found)
    for technique, name in TECHNIQUES.items():
        mine = {key.rsplit("/", 1)[0]: t for key, t in found.items() if key.endswith(f"/{technique}")}
        widths = [r for t in mine.values() for _, r in t.iterrows() if r["bits"] != "32" and r["diff"].has_ci]
        if not widths:
            continue
        kinds = [r["kind"] for r in widths]
        better, worse = kinds.count("higher"), kinds.count("lower")
        equivalent = kinds.count("equivalent")
        open_ = len(widths) - better - worse - equivalent
        agree = sum(rose[key] for key in rose if key[0].endswith(f"/{technique}"))
        fp32 = [
            f"{task} {shown(t.set_index('bits').loc['32', 'diff'], 1, difference_bounds(t.attrs['bounds']))}"
            for task, t in mine.items()
            if "32" in set(t["bits"])
        ]
        tasks = f"{len(mine)} task{'s' if len(mine) != 1 else ''}"
        lines.append(
            f"- {name}, on {tasks}: at 2..8 bits the reward is above its plain twin's at {better} of "
            f"{len(widths)} widths, below at {worse} (after Holm's correction over the family of {family}), "
            f"equivalent within 5% of the return scale at {equivalent}, and underpowered at {open_}; "
            f"the action agreement is higher at {agree} (Holm over the same family). "
            f"Its fp32 reward minus the plain one: {'; '.join(fp32)}." + aggregate(list(mine.values()))
        )
    return "Read across the tasks (paired by seed):\n\n" + "\n".join(lines) if lines else ""


def section(plain_runs: pd.DataFrame, robust_runs: pd.DataFrame) -> str:
    """The Markdown of the section: what the tasks say together, then a block per task and technique run so far."""
    if robust_runs.empty or "train.robust" not in robust_runs.columns:
        return "Not run yet: `bash docs/reproduction/campaign.sh robust`."
    found = tables(plain_runs, robust_runs)
    blocks = [
        _block(found[key], robust_runs, algo, env, technique)
        for algo, env in TASKS
        for technique in TECHNIQUES
        if (key := f"{algo}/{env}/{technique}") in found
    ]
    keep = f"{KEEP_FRACTION:.0%} of the env's return scale"
    return (
        (
            reading(found)
            + "\n\n"
            + "\n\n".join(blocks)
            + f"\n\nA width keeps the reward within {keep} of its own fp32 policy's."
        )
        if blocks
        else "Not run yet: `bash docs/reproduction/campaign.sh robust`."
    )
