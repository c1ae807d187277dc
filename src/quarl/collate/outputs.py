"""Writing a collation to disk: each plot and table in its folder, and a README that indexes them."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd
from matplotlib.figure import Figure

from quarl.collate import (
    actorq_timing,
    aggregate_plots,
    bits_per_weight,
    learning_curves,
    plots,
    precision,
    search,
    stats,
    tables,
    verdict_table,
    weight_distributions,
)
from quarl.collate.frame import Results
from quarl.collate.trainings import stem, title
from quarl.config.keys import slug
from quarl.errors import QuarlError
from quarl.progress import Steps

#: The list of files a collation wrote, kept in its folder: the next collation there replaces exactly them.
MANIFEST = ".quarl-collate.json"
README_HEADING = "# quarl collation"

log = logging.getLogger(__name__)


def _guard(study: Results, what: str, make: Callable[[], list[Path]]) -> list[Path]:
    """Run one output's maker; a failure becomes a note so every other output is still written."""
    try:
        return make()
    except Exception as exc:  # one broken output must not take the others with it
        log.debug("Collation of %s failed", what, exc_info=True)
        study.notes.add(f"Could not write {what}: {type(exc).__name__}: {exc}")
        return []


def _figure(fig: Figure, stem: Path) -> list[Path]:
    try:
        return plots.save(fig, stem)
    finally:
        fig.clear()


def _table_methods(study: Results, algo: str | None = None) -> list[str | None]:
    """The integer methods (ptq, qat, ...) of one algorithm, or of the study; [None] when there are none."""
    return [*study.integer_methods(algo)] or [None]


def write_sweet_spots(study: Results, out: Path) -> list[Path]:
    """One figure per (algo, env), one per env with all its algorithms, and the plotted points."""
    folder = out / "sweet_spot"
    written: list[Path] = []
    for env in sorted(study.seeds["env"].unique()):
        algos = sorted(study.seeds.loc[study.seeds["env"] == env, "algo"].unique())
        for algo in algos:
            written += _figure(plots.sweet_spot(study, env, [algo]), folder / stem(algo, env))
        if len(algos) > 1:  # one figure per integer method where there are several: a line per algorithm each
            here = set(study.seeds.loc[study.seeds["env"] == env, "method"])
            methods = [m for m in study.integer_methods() if m in here]
            if len(methods) <= 1:
                written += _figure(plots.sweet_spot(study, env, algos), folder / slug(f"{env}_all-algos"))
            for method in methods if len(methods) > 1 else []:
                figure = plots.sweet_spot(study, env, algos, [method])
                written += _figure(figure, folder / stem(f"{env}_all-algos", method))
    cell = ["algo", "env", "method", "bits"]
    points = plots.clip_by_env(stats.summarise(study.seeds, cell, "reward"), study, "reward").rename(
        columns={"mean": "reward_mean", "low": "reward_low", "high": "reward_high"}
    )
    for value, name in (("e", "e"), ("action_agreement", "agreement")):
        part = plots.clip_by_env(stats.summarise(study.seeds, cell, value), study, value)
        if value == "e":
            part = _clip_e(part, study)
        points = points.merge(part.rename(columns={c: f"{name}_{c}" for c in ("mean", "low", "high", "n")}), on=cell)
    points["fp32_flag"] = [study.flag(a, e) for a, e in zip(points["algo"], points["env"])]
    folder.mkdir(parents=True, exist_ok=True)
    points.to_csv(folder / "points.csv", index=False)
    return written + [folder / "points.csv"]


def _clip_e(part: pd.DataFrame, study: Results) -> pd.DataFrame:
    """E's intervals per cell clipped to what E can be over that cell's seeds (`Results.e_range`)."""
    out = part.copy()
    seeds = study.seeds.dropna(subset=["e"]).groupby(["algo", "env", "method", "bits"])["seed"].agg(list)
    for i, row in out.iterrows():
        key = (row["algo"], row["env"], row["method"], row["bits"])
        bounds = study.e_range(row["algo"], row["env"], seeds.get(key, []))
        if bounds is not None and pd.notna(row["low"]):
            out.loc[i, ["low", "high"]] = [max(row["low"], bounds[0]), min(row["high"], bounds[1])]
    return out


ERRORS_CAPTION = (
    "Rewards: mean over seeds of each seed's mean episode reward. E = (R_fp32 - R_q) / |R_fp32| in %, mean over "
    "the seeds that have one (each quantized policy against its own fp32 policy); n/a: E is undefined because the "
    "fp32 reward is too close to 0 (the reason is listed below the table). int8 = PTQ at 8 bits. (paper): QuaRL's "
    "published value (arXiv 1910.01055). seeds: runs per value. mean: over environments, of E only (rewards of "
    "different environments are not comparable), n/a environments left out, blank where one has no value. "
    + tables.FLAG_CAPTION
)


def write_tables(study: Results, out: Path) -> list[Path]:
    """Per algorithm, `errors_<algo>` (the paper's table) and `e_by_bits_<algo>` (E per bit width
    and env), one section per quantizer in the same files (the quantizer in its heading, never in
    the file name); and published vs reproduced."""
    folder = out / "tables"
    written: list[Path] = []
    for algo in sorted(study.seeds["algo"].unique()):
        methods = _table_methods(study, algo)
        errors = [(_heading(study, m, algo), tables.error_table(study, algo, m)) for m in methods]
        written += tables.write_sections(
            errors,
            folder / stem("errors", algo),
            f"{title(algo)}: fp32, fp16 and int8 rewards and errors ({study.quantizers(methods, [algo])})",
            ERRORS_CAPTION,
        )
        bits = [(_heading(study, m, algo), tables.bits_table(study, algo, m)) for m in methods if m is not None]
        if bits:
            written += tables.write_sections(
                bits,
                folder / stem("e_by_bits", algo),
                f"{title(algo)}: E (%) per bit width and environment ({study.quantizers(methods, [algo])})",
                "E = (R_fp32 - R_q) / |R_fp32| in %, mean over the seeds that have one; rows: weight bits of the "
                "quantizer, then fp16/bf16; n/a: E undefined (fp32 reward too close to 0); mean: over environments, "
                "n/a environments left out, blank where one has no value; † or ‡ after an env: its fp32 baseline "
                "did not learn or is not solved in some seed (the errors table's fp32 flag says how many).",
            )
        written += _agreement_table(study, algo, folder)
    sections = _ptq_sections(study)
    named = [m for m, _ in sections if m is not None]
    quantizers = study.quantizers(named) if named else "no quantizer"
    headings = [_heading(study, m) if len(sections) > 1 else "" for m, _ in sections]  # one: named in the title
    pub = [(h, tables.published_table(study, m, pairs)) for h, (m, pairs) in zip(headings, sections)]
    pub = [(heading, table) for heading, table in pub if len(table)]
    if pub:
        written += tables.write_sections(
            pub,
            folder / "published_vs_reproduced",
            f"Published vs reproduced ({quantizers})",
            "Ours: this store (mean over seeds); (paper): QuaRL, arXiv 1910.01055, Table 2, whose numbers came "
            "from QuaRL's released code (quant.scheme=quarl_code): where the store holds several PTQ quantizers, "
            "each has its section, that scheme's first. E in %. " + tables.FLAG_CAPTION,
        )
        judged = [(h, verdict_table.verdict_table(study, m, pairs)) for h, (m, pairs) in zip(headings, sections)]
        written += tables.write_sections(
            [(heading, table) for heading, table in judged if len(table)],
            folder / "verdicts",
            f"The paper's PTQ cells judged ({quantizers})",
            verdict_table.CAPTION,
            floatfmt=".4g",
        )
    else:
        study.notes.add("No cell of this selection is in the paper's PTQ table: no published-vs-reproduced table.")
    return written


def _ptq_sections(study: Results) -> list[tuple[str | None, set[tuple[str, str]] | None]]:
    """The published tables' sections: one per PTQ quantizer (`Results.ptq_methods`, the paper's scheme
    first) with the (algo, env) pairs it quantized; the first also holds the pairs no PTQ quantizer
    has, whose fp32 and fp16 still face the paper. One section of every pair where there is at most
    one quantizer."""
    methods = study.ptq_methods()
    if len(methods) <= 1:
        return [(methods[0] if methods else None, None)]
    pairs = {m: study.pairs(m) for m in methods}
    unquantized = set(zip(study.seeds["algo"], study.seeds["env"])) - set().union(*pairs.values())
    return [(m, pairs[m] | (unquantized if i == 0 else set())) for i, m in enumerate(methods)]


def _heading(study: Results, method: str | None, algo: str | None = None) -> str:
    """A section heading naming the quantizer of `method` (in `algo`'s records, or all) ('' when the
    file has no quantized method)."""
    if method is None:
        return ""
    return f"{method}: " + study.quantizer(method, [algo] if algo else None).split(": ", 1)[1]


def _agreement_table(study: Results, algo: str, folder: Path) -> list[Path]:
    """`agreement_<algo>`: action agreement (and KL / MAD where measured) by quantizer, env and bits."""
    table = tables.agreement_table(study, algo)
    if table.empty:
        return []
    methods = [m for m in _table_methods(study, algo) if m is not None]
    return tables.write(
        table,
        folder / stem("agreement", algo),
        f"{title(algo)}: action fidelity against the fp32 policy ({study.quantizers(methods, [algo])})",
        tables.AGREEMENT_CAPTION,
        floatfmt=".3g",
    )


def write_aggregate(study: Results, out: Path) -> list[Path]:
    """The aggregate table and plot (IQM and mean of 1 - E) and the heat map of E."""
    folder = out / "aggregate"
    table = aggregate_plots.aggregate_table(study)
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / "aggregate.csv", index=False)
    written = [folder / "aggregate.csv"]
    if table.empty:
        study.notes.add("No quantized record with an E: no aggregate plot or heat map.")
        return written
    written += _figure(aggregate_plots.aggregate(table, study.quantizers()), folder / "aggregate")
    written += _figure(aggregate_plots.heatmap(study), folder / "heatmap_E")
    return written


def write_agreement(study: Results, out: Path) -> list[Path]:
    """`agreement/<algo>_<env>.png|pdf`: reward vs bits beside action agreement vs bits, where any
    record of the pair measured agreement."""
    q = study.quantized()
    pairs = q[q["action_agreement"].notna()][["algo", "env"]].drop_duplicates().sort_values(["algo", "env"])
    written: list[Path] = []
    for algo, env in pairs.itertuples(index=False):
        written += _figure(plots.agreement(study, env, algo), out / "agreement" / stem(algo, env))
    return written


def write_weights(study: Results, out: Path, bits: int, log_y: bool = False) -> list[Path]:
    """Histograms per policy, the per-layer statistics and spread vs E."""
    folder = out / "weights"
    rep = weight_distributions.report(study, bits)
    if rep.layers.empty:
        return []
    written: list[Path] = []
    for pw in rep.weights:
        written += _figure(
            weight_distributions.histogram_figure(pw, rep, log_y=log_y),
            folder / stem(pw.algo, pw.env, f"seed{pw.seed}", pw.policy_key[:8]),
        )
    written += tables.write(
        rep.layers,
        folder / "layers",
        f"Weights of every policy's layers at {bits} bits",
        f"Grid: {bits}-bit {rep.scheme} {rep.granularity} (weights; the study's quantizers: "
        f"{study.quantizers()}). kurtosis: excess (normal = 0); "
        "step: grid spacing; clipped_frac: weights moved by more than half a step; "
        "zero_frac: nonzero weights quantized to 0.",
        floatfmt=".3g",
    )
    folder.mkdir(parents=True, exist_ok=True)
    rep.policies.to_csv(folder / "spread_vs_E.csv", index=False)
    written.append(folder / "spread_vs_E.csv")
    if weight_distributions.correlation(rep.policies) is None:
        with_e = int(rep.policies["E (%)"].notna().sum())
        why = (
            f"only {with_e} policies have a PTQ record at {bits} bits"
            if with_e < 3
            else f"E at {bits} bits (or the weight range) is the same for every policy"
        )
        study.notes.add(f"Weight spread vs E: no correlation, {why}.")
    written += _figure(weight_distributions.spread_figure(rep.policies, bits), folder / "spread_vs_E")
    return written


def write_readme(
    study: Results, out: Path, filters: Mapping[str, Any], bits: int, command: str | None, written: list[Path]
) -> list[Path]:
    """`out`/README.md: the selection, the counts, the notes and the list of files."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [README_HEADING, ""]
    if command:
        lines += ["Made by (run it again for the same output):", "", f"    {command}", ""]
    shown = " ".join(f"{k}={v}" for k, v in filters.items()) or "(none)"
    lines += [
        f"- store: `{study.store}`",
        f"- filters: {shown}",
        f"- weight grid: {bits} bits",
        f"- records selected: {len(study.runs)}, done: {len(study.done)}",
    ]
    if not study.seeds.empty:
        lines += [
            f"- quantizers: {study.quantizers()}",
            "- intervals: one cell across its seeds, Student-t 95% interval of the mean; across tasks "
            "(aggregate), rliable's stratified bootstrap (10,000 resamples, percentile)",
            f"- interval bounds: {_clipping(study)}",
        ]
    if not study.seeds.empty:
        per = study.seeds.groupby(["algo", "env"]).agg(
            methods=("method", lambda m: ", ".join(sorted(set(m)))), seeds=("seed", "nunique")
        )
        lines += ["", "| algo | env | methods | seeds |", "| --- | --- | --- | --- |"]
        lines += [f"| {a} | {e} | {r.methods} | {r.seeds} |" for (a, e), r in per.iterrows()]
    if study.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in study.notes]
    files = sorted(p.relative_to(out).as_posix() for p in written if p.is_relative_to(out))
    lines += ["", "## Files", ""] + ([f"- [{f}]({f})" for f in files] or ["(none)"])
    readme = out / "README.md"
    readme.write_text("\n".join(lines) + "\n")
    return [*written, readme]


def _clipping(study: Results) -> str:
    """How intervals are clipped to what a quantity can be, naming each env's return range."""
    ranges = study.return_ranges()
    named = ", ".join(f"{study.env_ids().get(env, env)} {r.text()}" for env, r in sorted(ranges.items()))
    reward = (
        f"reward intervals are clipped to the env's return range ({named}; per-step reward bounds x the "
        "episode's step limit, `quarl.collate.bounds`)"
        if ranges
        else "no selected env has a known return range, so reward intervals are not clipped"
    )
    return (
        f"{reward}; E's to what E can be over a cell's seeds given their fp32 rewards and that range; "
        "action-agreement intervals to [0, 1]; means are never clipped."
    )


def _previous(out: Path) -> list[Path] | None:
    """The files an earlier collation wrote into `out` (from its manifest, or the file list of an
    older collation's README); None when `out` does not hold a collation."""
    manifest = out / MANIFEST
    if manifest.is_file():
        try:
            found = json.loads(manifest.read_text())
            if found.get("in_progress"):  # interrupted: everything there is its own (the folder was cleared first)
                return [p for p in out.rglob("*") if p.is_file()]
            return [out / f for f in found["files"]] + [manifest]
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
    readme = out / "README.md"
    if readme.is_file() and readme.read_text(errors="replace").startswith(README_HEADING):
        listed = [
            line.split("](", 1)[1].rstrip(")")
            for line in readme.read_text().splitlines()
            if line.startswith("- [") and "](" in line
        ]
        return [out / f for f in listed] + [readme]
    return None


def clear_out(out: Path, overwrite: bool, store: Path | None = None) -> None:
    """Make `out` ready for a collation: remove what an earlier collation wrote there; refuse a
    non-empty folder quarl did not write, unless `overwrite` (then empty it; never a folder that
    holds the store or the current folder)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise QuarlError(f"--out {out} is a file: give a folder to write the collation into.")
    previous = _previous(out)
    if previous is not None:
        for path in previous:
            if path.is_file() and path.resolve().is_relative_to(out.resolve()):
                path.unlink()
        for folder in sorted((p for p in out.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            if not any(folder.iterdir()):
                folder.rmdir()
        return
    if not any(out.iterdir()):
        return
    if not overwrite:
        raise QuarlError(
            f"--out {out} is a non-empty folder that no collation wrote: give a new or empty folder, "
            "or pass --overwrite to empty it first."
        )
    here, target = Path.cwd().resolve(), out.resolve()
    if here.is_relative_to(target) or (store is not None and store.resolve().is_relative_to(target)):
        raise QuarlError(f"--out {out} holds the current folder or the results store: --overwrite will not empty it.")
    for child in out.iterdir():
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()


def inputs_digest(study: Results, settings: Mapping[str, Any]) -> str:
    """A digest of everything a collation draws from: the selected records, the settings (bits,
    filters, command, ...) and the collation code itself."""
    digest = hashlib.sha256(study.runs.to_json(orient="records", default_handler=str).encode())
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.read_bytes())
    return digest.hexdigest()


def up_to_date(out: Path, digest: str) -> list[Path] | None:
    """The files of the collation in `out` when it was made from the same inputs and all its files
    are still there; None when it must be written again."""
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("inputs") != digest or manifest.get("in_progress"):
        return None
    files = [out / f for f in manifest.get("files", [])]
    return files if all(f.is_file() for f in files) else None


def write_manifest(out: Path, written: list[Path], digest: str, in_progress: bool = False) -> None:
    """`out`/.quarl-collate.json: the files this collation wrote (what the next one replaces) and
    the digest of its inputs (`inputs_digest`); `in_progress` while it writes, so that a collation
    interrupted half-way is replaced whole by the next one, not refused as a folder quarl did not write."""
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(p.relative_to(out).as_posix() for p in written if p.is_relative_to(out))
    state = {"in_progress": True} if in_progress else {}
    (out / MANIFEST).write_text(json.dumps({"files": files, "inputs": digest, **state}, indent=1))


def write_all(
    study: Results,
    out: Path,
    filters: Mapping[str, Any],
    bits: int,
    command: str | None,
    log_y: bool = False,
    searches: bool = True,
) -> list[Path]:
    """Every output (the figures of the Optuna studies beside the store where `searches`); returns
    the paths written (README last)."""
    parts: list[tuple[str, Callable[[], list[Path]]]] = []
    if not study.seeds.empty:  # PTQ, QAT and float records (ActorQ's alone have none of these outputs)
        formats = bits_per_weight.has_formats(study)
        parts += [
            ("the sweet-spot plots", lambda: write_sweet_spots(study, out)),
            *([("the bits-per-weight plots", lambda: bits_per_weight.write(study, out))] if formats else []),
            ("the error tables", lambda: write_tables(study, out)),
            ("the aggregate plots", lambda: write_aggregate(study, out)),
            ("the action-agreement plots", lambda: write_agreement(study, out)),
            ("the training curves", lambda: learning_curves.write_training_curves(study, out)),
            ("the weight report", lambda: write_weights(study, out, bits, log_y)),
            ("the precision grids", lambda: precision.write_precision(study, out)),
        ]
    if study.store is not None and (study.done["quant"] == "actorq").any():
        parts.append(("the ActorQ outputs", lambda: actorq_timing.write_actorq(study, out)))
    store = study.store
    if searches and store is not None and (Path(store).parent / search.DATABASE).exists():
        parts.append(("the Optuna searches", lambda: search.write_searches(Path(store), out)))
    written: list[Path] = []
    with Steps(f"Collating {len(study.done)} records into {out}", len(parts)) as steps:
        for what, make in parts:
            steps.next(what)
            written += _guard(study, what, make)
    written = write_readme(study, out, filters, bits, command, written)
    log.info(
        "Collated %d records into %s: %d files (index: %s).", len(study.done), out, len(written), out / "README.md"
    )
    return written
