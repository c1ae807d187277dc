"""The paper's error tables, from a `Results`, written as Markdown, CSV and LaTeX from one data frame.

- `error_table`: per algorithm (and quantization method), rows = environments, columns fp32, fp16,
  E_fp16, int8, E_int8 and a mean row, with the published value beside ours where the paper has
  the cell. Rewards are means over seeds of each seed's mean episode reward; E is the mean over
  seeds of each seed's E = (R_fp32 - R_q) / |R_fp32| (each quantized policy against its own fp32
  policy), in percent.
- `bits_table`: per algorithm and method, E (%) with rows = bit widths and columns = environments.
- `published_table`: every cell the paper has, ours beside theirs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quarl.collate import published, stats
from quarl.collate.frame import Results, is_float
from quarl.collate.trainings import base_algo
from quarl.config.keys import slug

INT_BITS = 8  # the paper's "int8": quant=ptq at 8 bits (any scheme)
#: The column naming a row's weak fp32 baseline ('† fp32 not learned in 1 of 5 seeds'; `Results.flag`).
FLAG_COLUMN = "fp32 flag"
FLAG_CAPTION = (
    "fp32 flag: † the fp32 policy of at least one seed is no better than a random policy (not learned), "
    "‡ below the env's reward threshold (not solved); E against such a baseline says little."
)
MEAN_ROW = "mean"
QUANTITIES = ["fp32", "fp16", "E_fp16 (%)", "int8", "E_int8 (%)"]


def paper_column(column: str) -> str:
    """The name of the published value's column beside `column`: 'fp32 (paper)', 'E_int8 (%, paper)'."""
    return column.replace(" (%)", " (%, paper)") if column.endswith(" (%)") else f"{column} (paper)"


def _seeds_text(counts: dict[str, int]) -> int | str:
    """The number of seeds behind a row: one number, or each column's where they differ."""
    if len(set(counts.values())) == 1:
        return next(iter(counts.values()))
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def _e_value(cells: pd.DataFrame, env: str, column: str, na: set, reasons: dict[str, str]) -> float:
    """100 x the mean E of `cells` (seeds with an E only); where they have rewards but no E at all,
    NaN recorded in `na` as (env, column) with the reason in `reasons`."""
    if cells["e"].notna().any():
        return 100 * cells["e"].mean()
    if len(cells):
        na.add((env, column))
        notes = [n for n in cells.get("e_note", pd.Series(dtype=object)) if isinstance(n, str) and n]
        reasons[env] = notes[0] if notes else "no fp32 reward to compare with"
    return np.nan


def _mean_row(df: pd.DataFrame, columns: list[str], na: set) -> dict[str, float]:
    """The mean over environments of each E column: n/a environments left out, blank where an
    environment has no value at all (a mean over fewer would mislead). Rewards get no mean:
    rewards of different environments are not comparable."""
    means: dict[str, float] = {}
    for c in columns:
        if not c.startswith("E"):
            means[c] = np.nan
            continue
        defined = df[c].notna() | df["env"].map(lambda e, c=c: (e, c) in na)
        means[c] = df[c].mean() if defined.all() and df[c].notna().any() else np.nan
    return means


def error_table(study: Results, algo: str, method: str | None, bits: int = INT_BITS) -> pd.DataFrame:
    """The paper's table for one algorithm: rows = environments (+ a mean row), columns fp32, fp16,
    E_fp16 (%), int8, E_int8 (%), seeds; with the published value (e.g. 'fp32 (paper)') beside
    each where the paper has a row of this algorithm and env (PTQ tables only). `method` is the
    integer method label ('ptq'); None gives a table without quantized columns' values.

    E is the mean over the seeds that have one; where every seed's E is n/a (fp32 reward too close
    to 0) the value is NaN, listed in ``df.attrs["na"]`` as (env, column) with the reason in
    ``df.attrs["reasons"]``. The mean row averages E only (over environments; an n/a environment
    is left out, one without records blanks it), as the paper's mean rows do."""
    seeds = study.seeds[study.seeds["algo"] == algo]
    base = study.baselines[study.baselines["algo"] == algo]
    env_ids = study.env_ids()
    rows: list[dict[str, Any]] = []
    na: set[tuple[str, str]] = set()  # (env, column) where E is n/a
    reasons: dict[str, str] = {}
    for env in sorted(set(seeds["env"]) | set(base["env"])):
        s = seeds[seeds["env"] == env]
        b = study.fp32_of(algo, env, method)
        half = s[s["method"] == "fp16"]
        quant = s[(s["method"] == method) & (s["bits"] == bits)] if method else s.iloc[0:0]
        row = {
            "env": env,
            "fp32": b.mean() if len(b) else np.nan,
            "fp16": half["reward"].mean() if len(half) else np.nan,
            "E_fp16 (%)": _e_value(half, env, "E_fp16 (%)", na, reasons),
            "int8": quant["reward"].mean() if len(quant) else np.nan,
            "E_int8 (%)": _e_value(quant, env, "E_int8 (%)", na, reasons),
            "seeds": _seeds_text({"fp32": len(b), "fp16": len(half), "int8": len(quant)}),
            FLAG_COLUMN: study.flag(algo, env),
        }
        if method is None or method.split(" ")[0] == "ptq":
            paper = published.lookup(base_algo(algo), env, env_ids.get(env))
            if paper:
                for col, ours in published.COLUMNS.items():
                    row[paper_column(ours)] = paper[col]
        rows.append(row)
    paper_cols = [paper_column(c) for c in QUANTITIES]
    has_paper = any(c in r for r in rows for c in paper_cols)
    columns = ["env"] + [c for q in QUANTITIES for c in ([q, paper_column(q)] if has_paper else [q])]
    columns += ["seeds", FLAG_COLUMN]
    df = pd.DataFrame(rows).reindex(columns=columns)
    if not df.empty:
        means = _mean_row(df, [c for c in columns if c not in ("env", "seeds", FLAG_COLUMN)], na)
        flagged = "; ".join(f"{e}: {f}" for e, f in zip(df["env"], df[FLAG_COLUMN]) if f)
        df = pd.concat([df, pd.DataFrame([{"env": MEAN_ROW, **means, "seeds": "", FLAG_COLUMN: flagged}])])
        df = df.reset_index(drop=True)
    numeric = [c for c in columns if c not in ("env", "seeds", FLAG_COLUMN)]
    df[numeric] = df[numeric].astype(float)
    if int(bits) != INT_BITS:
        rename = {c: c.replace("int8", f"int{bits}") for c in columns}
        df = df.rename(columns=rename)
        na = {(e, rename.get(c, c)) for e, c in na}
    df.attrs.update(na=na, reasons=reasons)
    return df


def bits_table(study: Results, algo: str, method: str) -> pd.DataFrame:
    """E (%) of one algorithm and method: rows = bit widths (then fp16/bf16), columns = environments
    and their mean; each value the mean over the seeds with an E. Cells whose E is n/a are NaN and
    listed in ``df.attrs["na"]`` as (row label, env); the mean leaves n/a environments out."""
    seeds = study.seeds[
        (study.seeds["algo"] == algo) & ((study.seeds["method"] == method) | study.seeds["method"].map(is_float))
    ]
    seeds = seeds[seeds["method"] != "fp32"]
    if seeds.empty:
        return pd.DataFrame(columns=["bits", MEAN_ROW])
    order = {m: i for i, m in enumerate([method, *sorted(set(seeds["method"]) - {method})])}
    seeds = seeds.assign(
        order=seeds["method"].map(order),
        label=[str(b) if m == method else m for m, b in zip(seeds["method"], seeds["bits"])],
    )
    means = seeds.groupby(["order", "bits", "label", "env"])["e"].mean().mul(100)
    table = means.unstack("env").reset_index(level=["order", "bits"], drop=True)
    envs = list(table.columns)
    na = {(label, env) for label, env in means[means.isna()].index.droplevel(["order", "bits"])}
    defined = table.notna() | pd.DataFrame({e: [(r, e) in na for r in table.index] for e in envs}, index=table.index)
    table[MEAN_ROW] = table[envs].mean(axis=1).where(defined.all(axis=1))
    table.index.name = "bits"
    table.columns.name = None
    out = table.reset_index()
    out.attrs.update(na=na, flags={e: flag for e in envs if (flag := study.flag(algo, e))})
    return out


AGREEMENT_CAPTION = (
    "Measured on the states the fp32 policy visits in its own evaluation episodes. agreement: fraction of those "
    "states where the quantized policy acts as fp32 does (discrete: the same greedy action; continuous: every "
    "action dimension within eval.action_tolerance of the action range), mean over seeds with its Student-t 95% "
    "interval (low, high, clipped to [0, 1]; none for one seed); KL: mean KL(fp32 || quantized) of the action "
    "distributions (stochastic policies); MAD: mean |a_q - a_fp32| / (high - low) (continuous actions); backend: "
    "the same for the executed backend; states: states compared per seed; seeds: seeds with a value."
)
#: Action-fidelity columns of the agreement table: store column -> table column.
AGREEMENT_COLUMNS = {
    "action_kl": "KL",
    "action_mad": "MAD",
    "backend_action_agreement": "backend agreement",
    "backend_action_mad": "backend MAD",
    "agreement_states": "states",
}


def agreement_table(study: Results, algo: str) -> pd.DataFrame:
    """Action fidelity of one algorithm's quantized records by env, method and bits: agreement with
    its t interval over seeds, and KL / MAD / the backend's numbers where any record has them
    (columns no record has are left out). Empty when no record measured agreement."""
    seeds = study.quantized()
    seeds = seeds[(seeds["algo"] == algo) & seeds["action_agreement"].notna()]
    if seeds.empty:
        return pd.DataFrame()
    order = seeds.assign(float_last=seeds["method"].map(is_float).astype(int))
    rows = []
    for (env, _, method, bits), g in order.groupby(["env", "float_last", "method", "bits"], sort=True):
        ci = stats.seed_interval(g["action_agreement"].to_numpy(float))
        row = {
            "env": env,
            "method": method,
            "bits": int(bits),
            "agreement": ci.estimate,
            "low": float(np.clip(ci.low, 0.0, 1.0)),  # a fraction: its interval is clipped to [0, 1]
            "high": float(np.clip(ci.high, 0.0, 1.0)),
        }
        row.update({name: g[col].mean() for col, name in AGREEMENT_COLUMNS.items()})
        row["seeds"] = ci.n_runs
        rows.append(row)
    table = pd.DataFrame(rows)
    keep = [
        c
        for c in table.columns
        if c in ("env", "method", "bits", "agreement", "low", "high", "seeds") or table[c].notna().any()
    ]
    return table[keep]


def published_table(study: Results, method: str | None, pairs: set[tuple[str, str]] | None = None) -> pd.DataFrame:
    """Cells the paper has (of `pairs` (algo, env) only, where given): algo, env, then for each
    quantity ours and the paper's side by side."""
    frames = []
    for algo in sorted(study.seeds["algo"].unique()):
        table = error_table(study, algo, method)
        if "fp32 (paper)" not in table.columns:
            continue
        table = table[(table["env"] != MEAN_ROW) & table["fp32 (paper)"].notna()]
        if pairs is not None:
            table = table[[(algo, env) in pairs for env in table["env"]]]
        frames.append(table.assign(algo=algo))
    if not frames:
        return pd.DataFrame(columns=["algo", "env"])
    df = pd.concat(frames, ignore_index=True)
    columns = ["algo", "env"] + [c for q in QUANTITIES for c in (q, paper_column(q))] + ["seeds", FLAG_COLUMN]
    return df[columns]


def _display(df: pd.DataFrame, floatfmt: str = ".2f") -> pd.DataFrame:
    """Floats formatted with `floatfmt`, 'n/a' where ``df.attrs["na"]`` says E is undefined (as
    (first column's value, column) pairs) and a dash where there is no value (Markdown)."""
    na = df.attrs.get("na", set())
    key = df.columns[0] if len(df.columns) else None
    out = df.copy().astype(object)
    for c in df.columns:
        if pd.api.types.is_float_dtype(df[c]):
            out[c] = [("–" if pd.isna(v) else format(v, floatfmt)) for v in df[c]]
        else:
            out[c] = ["–" if (v is None or (isinstance(v, float) and np.isnan(v))) else v for v in df[c]]
        if key is not None:
            out[c] = ["n/a" if (k, c) in na else v for k, v in zip(df[key], out[c])]
    return out


def na_notes(df: pd.DataFrame) -> list[str]:
    """'n/a: mountaincar_continuous: |R_fp32| = 0.03 is below ...' lines for a table's n/a cells."""
    reasons = df.attrs.get("reasons", {})
    if not df.attrs.get("na"):
        return []
    if not reasons:
        return ["n/a: E is undefined there (fp32 reward too close to 0, or none): left out of the mean."]
    return [f"n/a ({env}): {why}; left out of the mean." for env, why in sorted(reasons.items())]


def latex_escape(text: str) -> str:
    """`text` safe inside LaTeX (captions: pandas escapes the cells, not the caption)."""
    marks = {
        "\\": r"\textbackslash{}",
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
    }
    return "".join(marks.get(ch, ch) for ch in text)


def write(
    df: pd.DataFrame, stem: Path, title: str, caption: str, floatfmt: str = ".2f", shown: pd.DataFrame | None = None
) -> list[Path]:
    """`stem`.md, .csv and .tex of one data frame (floats shown with `floatfmt`; the Markdown shows
    `shown` instead where given, e.g. with bounds written '≥ x'); returns the paths."""
    paths = write_sections([("", df)], stem, title, caption, floatfmt)
    if shown is not None:
        table = _display(shown, floatfmt).to_markdown(index=False, disable_numparse=True)
        paths[0].write_text(f"## {title}\n\n{caption}\n\n{table}\n")
    return paths


def write_sections(
    sections: list[tuple[str, pd.DataFrame]],
    stem: Path,
    title: str,
    caption: str,
    floatfmt: str = ".2f",
    column: str = "quantizer",
) -> list[Path]:
    """One file set (`stem`.md/.csv/.tex) holding one table per section (heading, frame): the
    Markdown has a sub-heading per section (its quantizer, say), the CSV and LaTeX one table with
    the heading in a leading `column` (when there are headings). Returns the paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    md, csv, tex = (stem.with_suffix(s) for s in (".md", ".csv", ".tex"))
    parts = [f"## {title}", "", caption, ""]
    for heading, df in sections:
        if heading:
            parts += [f"### {heading}", ""]
        flags = df.attrs.get("flags", {})  # columns whose fp32 baseline is weak: marked in the Markdown
        marked = _display(df, floatfmt).rename(columns={c: f"{c} {f.split(' ', 1)[0]}" for c, f in flags.items()})
        parts += [marked.to_markdown(index=False, disable_numparse=True), ""]
        lines = na_notes(df) + [f"{c}: {f}" for c, f in flags.items()]
        parts += [f"- {line}" for line in lines] + ([""] if lines else [])
    md.write_text("\n".join(parts))
    headed = any(h for h, _ in sections)
    frames = [df.assign(**{column: h}).reindex(columns=[column, *df.columns]) if headed else df for h, df in sections]
    whole = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    whole.to_csv(csv, index=False)
    latex = whole.to_latex(
        index=False,
        float_format=lambda v: format(v, floatfmt),
        na_rep="--",
        escape=True,
        caption=latex_escape(f"{title}. {caption}"),
        label=f"tab:{slug(stem.name)}",
    )
    tex.write_text(latex)
    return [md, csv, tex]
