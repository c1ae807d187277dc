"""Weight distributions of the stored policies, and why some quantize badly.

For every policy in a `Results` the trained fp32 model is loaded from its folder (the record's
`policy_dir`; for a record written before runs recorded it, `store.policies` resolved against the
current folder) and each layer
it acts with (`quarl.quantize.weights.inference_layers`) is described: min, max, range, std, excess
kurtosis, the grid step at n bits and the fraction of weights that n-bit quantization clips (moves
by more than half a step) or collapses to zero. The paper's analysis ("wider weight distributions
quantize worse") becomes a number: the correlation across policies between the widest layer's
weight range and the policy's E at n bits.
"""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import transforms
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from omegaconf import OmegaConf
from scipy import stats as sps

from quarl.collate.frame import Notes, Results
from quarl.collate.plots import new_figure, styled
from quarl.collate.trainings import title
from quarl.config import method_registry
from quarl.errors import QuarlError
from quarl.train import META_FILE

if TYPE_CHECKING:  # torch, SB3 and the quantizer load only when weights are read (collation imports this module)
    import torch

log = logging.getLogger(__name__)

DEFAULT_SCHEME, DEFAULT_GRANULARITY = "affine", "per_tensor"
STAT_COLUMNS = [
    "algo",
    "env",
    "seed",
    "policy_key",
    "layer",
    "shape",
    "n_weights",
    "min",
    "max",
    "range",
    "std",
    "kurtosis",
    "step",
    "clipped_frac",
    "zero_frac",
]
MAX_LISTED = 5  # records named in a note, the rest counted


@dataclass
class PolicyWeights:
    """One policy's inference-layer weights and what identifies it."""

    algo: str
    env: str
    env_id: str
    seed: int
    policy_key: str
    layers: dict[str, np.ndarray]

    @property
    def label(self) -> str:
        return f"{self.algo}/{self.env} seed={self.seed}"


@dataclass
class WeightReport:
    """Per-layer statistics, per-policy spread vs E, the loaded weights and the grid used."""

    bits: int
    scheme: str
    granularity: str
    layers: pd.DataFrame
    policies: pd.DataFrame
    weights: list[PolicyWeights] = field(default_factory=list)


def grid(w: torch.Tensor | np.ndarray, bits: int, scheme: str) -> np.ndarray:
    """The representable values of `w`'s per-tensor quantizer at `bits` within w's range (sorted)."""
    import torch

    from quarl.quantize.weights import fake_quantize

    flat = torch.as_tensor(w).detach().flatten().double()
    probe = torch.linspace(float(flat.min()), float(flat.max()), 4 * 2**bits, dtype=torch.float64)
    levels = fake_quantize(torch.cat([flat, probe]), bits, scheme, "per_tensor")
    return np.unique(levels.numpy())


def _parts(w: torch.Tensor, granularity: str) -> list[torch.Tensor]:
    return list(w.reshape(w.shape[0], -1)) if granularity == "per_channel" and w.dim() > 1 else [w.flatten()]


def layer_stats(
    w: torch.Tensor | np.ndarray, bits: int, scheme: str = DEFAULT_SCHEME, granularity: str = DEFAULT_GRANULARITY
) -> dict[str, float]:
    """min, max, range, std, excess kurtosis, grid step (the largest, per channel) and the fractions
    of weights clipped (moved by more than half a step) or collapsed to zero at `bits`."""
    import torch

    from quarl.quantize.weights import fake_quantize

    w = torch.as_tensor(w).detach().double()
    values = w.flatten().numpy()
    clipped = zero = 0
    step = 0.0
    for part in _parts(w, granularity):
        levels = grid(part, bits, scheme)
        part_step = float(np.median(np.diff(levels))) if len(levels) > 1 else 0.0
        q = fake_quantize(part, bits, scheme, "per_tensor")
        clipped += int(((q - part).abs() > 0.5 * part_step * (1 + 1e-6) + 1e-12).sum())
        zero += int(((q == 0) & (part != 0)).sum())
        step = max(step, part_step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kurtosis of a constant tensor: NaN
        kurt = float(sps.kurtosis(values)) if values.size > 3 else float("nan")
    return {
        "n_weights": int(values.size),
        "min": float(values.min()),
        "max": float(values.max()),
        "range": float(values.max() - values.min()),
        "std": float(values.std()),
        "kurtosis": kurt,
        "step": step,
        "clipped_frac": clipped / values.size,
        "zero_frac": zero / values.size,
    }


def recorded_dir(row: pd.Series) -> Path | None:
    """The policy folder a record names (`policy_dir`); None for a record written before runs recorded it."""
    value = row.get("policy_dir")
    return Path(value) if isinstance(value, str) and value else None


def _label(row: pd.Series) -> str:
    return f"{row['algo']}/{row['env']} seed={row.get('seed')}"


def load_policy(row: pd.Series) -> dict[str, np.ndarray]:
    """The weights of the layers a record's fp32 policy acts with, loaded from its `policy_dir`, or,
    for a record without one, from its `store.policies` cache resolved against the current folder;
    QuarlError when it is not there."""
    from quarl.quantize.weights import inference_layers
    from quarl.train import cache as policies  # torch and SB3 load only here, when a policy is read

    cfg = OmegaConf.create(json.loads(row["config"]))
    folder = recorded_dir(row)
    if folder is not None:
        if not (folder / META_FILE).is_file():
            raise QuarlError(f"the policy of {_label(row)} is not in {folder} (its policy_dir)")
        policy = policies.CachedPolicy(str(row["policy_key"]), folder, cfg, trained=False)
    else:
        setting = row.get("store.policies")
        if not isinstance(setting, str):
            raise QuarlError(f"the record of {_label(row)} names no policy_dir and no store.policies")
        root = Path.cwd() / Path(setting).expanduser()  # an absolute store.policies stays as it is
        try:
            policy = policies.cached(cfg, root)
        except QuarlError:
            raise QuarlError(
                f"the policy of {_label(row)} is not in the policy cache {root} (store.policies from "
                "the current folder: the record has no policy_dir)"
            ) from None
    model = policy.load()
    return {name: layer.weight.detach().float().numpy().copy() for name, layer in inference_layers(model).items()}


def _grid_setting(done: pd.DataFrame, bits: int) -> tuple[str, str]:
    """The PTQ scheme and granularity the study used most at `bits` (default affine, per tensor)."""
    ptq = done[(done["quant"] == "ptq") & (done["bits"] == bits)]
    if ptq.empty or "quant.scheme" not in ptq.columns or "quant.granularity" not in ptq.columns:
        return DEFAULT_SCHEME, DEFAULT_GRANULARITY
    scheme, granularity = ptq.groupby(["quant.scheme", "quant.granularity"]).size().idxmax()
    return str(scheme), str(granularity)


def report(study: Results, bits: int = 8, notes: Notes | None = None) -> WeightReport:
    """Statistics of every trained fp32 policy's weights at `bits` and each policy's E at `bits`
    (PTQ); QAT policies, trained with fake quantization, are not part of it."""
    notes = notes if notes is not None else study.notes
    done = study.done
    scheme, granularity = _grid_setting(done, bits) if not done.empty else (DEFAULT_SCHEME, DEFAULT_GRANULARITY)
    if done.empty or "policy_key" not in done.columns or "config" not in done.columns:
        return WeightReport(bits, scheme, granularity, pd.DataFrame(columns=STAT_COLUMNS), pd.DataFrame(), [])
    env_ids = study.env_ids()
    shared = [name for name, m in method_registry.registry().items() if not m.trains_policy]  # not QAT's own
    fp32_policies = done[done["quant"].isin(shared)]
    ordered = fp32_policies.assign(is_fp32=fp32_policies["quant"] != "fp32").sort_values(
        ["is_fp32", "algo", "env", "seed"]
    )
    chosen = ordered.drop_duplicates("policy_key")
    rows, loaded, missing = [], [], []
    _note_without_policy_dir(chosen, notes)
    for _, row in chosen.iterrows():
        try:
            layers = load_policy(row)
        except QuarlError as exc:
            missing.append(str(exc))
            continue
        except Exception as exc:  # a record whose config this quarl cannot build a policy from (older, hand-made)
            missing.append(
                f"the policy of {_label(row)} cannot be loaded "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
            )
            continue
        pw = PolicyWeights(
            row["algo"], row["env"], env_ids.get(row["env"], row["env"]), int(row["seed"]), row["policy_key"], layers
        )
        loaded.append(pw)
        for name, w in layers.items():
            s = layer_stats(w, bits, scheme, granularity)
            rows.append(
                {
                    "algo": pw.algo,
                    "env": pw.env,
                    "seed": pw.seed,
                    "policy_key": pw.policy_key,
                    "layer": name,
                    "shape": "x".join(str(d) for d in w.shape),
                    **s,
                }
            )
    if missing:
        notes.add(
            f"No weight report for {len(missing)} of {len(chosen)} policies: {missing[0]}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + "."
        )
    layer_df = pd.DataFrame(rows, columns=STAT_COLUMNS)
    return WeightReport(
        bits, scheme, granularity, layer_df, _per_policy(layer_df, done, bits, scheme, granularity), loaded
    )


def _note_without_policy_dir(chosen: pd.DataFrame, notes: Notes) -> None:
    """Say which records name no `policy_dir` (written before runs recorded it): their policies are
    looked for in `store.policies` from the current folder."""
    without = [_label(row) for _, row in chosen.iterrows() if recorded_dir(row) is None]
    if without:
        shown = ", ".join(without[:MAX_LISTED]) + (
            f" and {len(without) - MAX_LISTED} more" if len(without) > MAX_LISTED else ""
        )
        notes.add(
            f"{len(without)} of {len(chosen)} policies come from records without policy_dir (written before runs "
            f"recorded it): their policies were looked for in store.policies from the current folder "
            f"{Path.cwd()}: {shown}."
        )


def _per_policy(layers: pd.DataFrame, done: pd.DataFrame, bits: int, scheme: str, granularity: str) -> pd.DataFrame:
    """One row per policy: widest layer range, pooled std, max kurtosis, E (%) at `bits`."""
    columns = ["algo", "env", "seed", "policy_key", "widest_range", "max_std", "max_kurtosis", "zero_frac", "E (%)"]
    if layers.empty:
        return pd.DataFrame(columns=columns)
    keys = ["algo", "env", "seed", "policy_key"]
    weighted_zero = (layers["zero_frac"] * layers["n_weights"]).groupby(
        [layers[k] for k in keys]
    ).sum() / layers.groupby(keys)["n_weights"].sum()
    per = layers.groupby(keys).agg(
        widest_range=("range", "max"), max_std=("std", "max"), max_kurtosis=("kurtosis", "max")
    )
    per["zero_frac"] = weighted_zero
    ptq = done[(done["quant"] == "ptq") & (done["bits"] == bits)]
    if "quant.scheme" in ptq.columns:
        ptq = ptq[(ptq["quant.scheme"] == scheme) & (ptq["quant.granularity"] == granularity)]
    e = 100 * ptq.groupby("policy_key")["e"].mean()
    per = per.reset_index()
    per["E (%)"] = per["policy_key"].map(e)
    return per[columns]


def correlation(per_policy: pd.DataFrame, x: str = "widest_range", y: str = "E (%)") -> dict[str, float] | None:
    """Pearson r (with p), Spearman rho and a least-squares line of `y` on `x` across policies;
    None with fewer than 3 policies or a constant variable."""
    d = per_policy[[x, y]].apply(pd.to_numeric, errors="coerce").dropna()
    if len(d) < 3 or d[x].nunique() < 2 or d[y].nunique() < 2:
        return None
    r, p = sps.pearsonr(d[x], d[y])
    rho, p_rho = sps.spearmanr(d[x], d[y])
    fit = sps.linregress(d[x], d[y])
    return {
        "pearson_r": float(r),
        "pearson_p": float(p),
        "spearman_rho": float(rho),
        "spearman_p": float(p_rho),
        "slope": float(fit.slope),
        "intercept": float(fit.intercept),
        "n": int(len(d)),
    }


MIN_TICK_PX = 3.0  # grid levels closer than this on screen merge into a bar: draw every k-th only


def _drawn_levels(levels: np.ndarray, ax_width_px: float, span: float) -> tuple[np.ndarray, int]:
    """The grid levels to draw on an axis `ax_width_px` wide showing `span` data units: all of them
    when neighbours are at least MIN_TICK_PX apart, else every k-th (returns the levels and k)."""
    if len(levels) < 2 or span <= 0:
        return levels, 1
    step_px = float(np.median(np.diff(levels))) / span * ax_width_px
    every = max(1, int(np.ceil(MIN_TICK_PX / max(step_px, 1e-12))))
    return levels[::every], every


def histogram_figure(pw: PolicyWeights, rep: WeightReport, log_y: bool = False) -> Figure:
    """A histogram per layer with the `rep.bits`-bit grid drawn over it: lines where the grid is
    coarse, ticks along the top where it is fine, and only every k-th level where neighbours would
    be closer than MIN_TICK_PX on the image (the panel says so). `log_y`: counts on a log axis, for
    layers whose outliers squash the histogram."""
    names = list(pw.layers)
    ncols = min(3, max(len(names), 1))
    nrows = max(1, -(-len(names) // ncols))
    stats_rows = rep.layers[rep.layers["policy_key"] == pw.policy_key].set_index("layer")
    thinned = False
    with styled("ticks"):  # no background grid that could be mistaken for quantization levels
        fig, axes = new_figure(4.3 * ncols, 3.1 * nrows + 0.6, nrows, ncols)
        color, grid_color = sns.color_palette("colorblind")[0], sns.color_palette("colorblind")[3]
        width_px = 4.3 * fig.dpi * 0.75  # a panel's plotting width, about three quarters of its column
        for ax, name in zip(axes.flat, names):
            w = pw.layers[name]
            ax.hist(w.ravel(), bins=60, histtype="stepfilled", color=color, alpha=0.8, log=log_y)  # one polygon
            levels = grid(w, rep.bits, rep.scheme)
            drawn, every = _drawn_levels(levels, width_px, float(w.max() - w.min()) * 1.1)
            blend = transforms.blended_transform_factory(ax.transData, ax.transAxes)
            if len(levels) <= 40:
                ax.vlines(drawn, 0, 1, transform=blend, colors=grid_color, linewidth=0.8, alpha=0.6)
            else:
                ax.vlines(drawn, 0.92, 1.0, transform=blend, colors=grid_color, linewidth=0.5, alpha=0.8)
            thinned |= every > 1
            s = stats_rows.loc[name] if name in stats_rows.index else None
            detail = (
                f"step {s['step']:.2g} · to zero {s['zero_frac']:.1%} · clipped {s['clipped_frac']:.1%}"
                if s is not None
                else ""
            )
            shown = f"\n1 in {every} grid levels drawn" if every > 1 else ""
            ax.set_title(f"{name} ({'×'.join(str(d) for d in w.shape)})\n{detail}{shown}", fontsize=8.5)
            ax.set_xlabel("weight value")
            ax.set_ylabel("count (log)" if log_y else "count")
            ax.tick_params(labelsize=8)
        for ax in list(axes.flat)[len(names) :]:
            ax.set_axis_off()
        where = "ticks along the top" if 2**rep.bits > 40 else "lines"
        handles = [
            Patch(color=color, alpha=0.8, label="fp32 weights"),
            Line2D(
                [],
                [],
                color=grid_color,
                label=f"{rep.bits}-bit {rep.scheme} grid levels, per tensor "
                f"({where}{'; thinned where closer than 3 px' if thinned else ''})",
            ),
        ]
        fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
        fig.suptitle(
            f"{title(pw.algo)} on {pw.env_id}, seed {pw.seed}: weights of the layers it acts with", fontsize=10
        )
    return fig


def spread_figure(per_policy: pd.DataFrame, bits: int) -> Figure:
    """E at `bits` against the widest layer's weight range, one point per policy, with the
    least-squares line and the correlation (or why there is none)."""
    d = per_policy.copy()
    d["E (%)"] = pd.to_numeric(d["E (%)"], errors="coerce")
    with styled():
        fig, axes = new_figure(7.2, 4.4)
        ax = axes[0, 0]
        shown = d.dropna(subset=["E (%)"])
        if not shown.empty:
            sns.scatterplot(
                data=shown.assign(algo=shown["algo"].map(title)),
                x="widest_range",
                y="E (%)",
                hue="algo",
                style="env",
                s=70,
                ax=ax,
                palette="colorblind",
            )
        corr = correlation(d)
        if corr:
            xs = np.linspace(shown["widest_range"].min(), shown["widest_range"].max(), 50)
            ax.plot(
                xs,
                corr["intercept"] + corr["slope"] * xs,
                color="0.3",
                linestyle="--",
                linewidth=1.2,
                label="least-squares fit",
            )
            sub = (
                f"Pearson r = {corr['pearson_r']:.2f} (p = {corr['pearson_p']:.2g}), "
                f"Spearman ρ = {corr['spearman_rho']:.2f}, n = {corr['n']} policies"
            )
        elif len(shown) < 3:
            sub = f"n = {len(shown)} policies with an E: no fit (needs 3 or more)"
        else:
            sub = f"n = {len(shown)} policies: no fit (E or the range is the same for every policy)"
        ax.set_xlabel("weight range of the widest layer (max − min)")
        ax.set_ylabel(f"E at {bits} bits (%), mean of its records")
        ax.set_title(f"Weight spread vs {bits}-bit PTQ error across policies\n{sub}", fontsize=10)
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig
