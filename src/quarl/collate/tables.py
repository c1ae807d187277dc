"""The paper's error tables, from a `Study`, written as Markdown, CSV and LaTeX from one data frame.

- `error_table`: per algorithm (and quantization method), rows = environments, columns fp32, fp16,
  E_fp16, int8, E_int8 and a mean row, with the published value beside ours where the paper has
  the cell. Rewards are means over seeds of each seed's mean episode reward; E is the mean over
  seeds of each seed's E = (R_fp32 - R_q) / |R_fp32| (each quantized policy against its own fp32
  policy), in percent.
- `bits_table`: per algorithm and method, E (%) with rows = bit widths and columns = environments.
- `published_table`: every cell the paper has, ours beside theirs.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from quarl.collate import published
from quarl.collate.frame import FLOAT_BITS, Study

INT_BITS = 8  # the paper's "int8": quant=ptq at 8 bits (any scheme)
MEAN_ROW = "mean"
QUANTITIES = ["fp32", "fp16", "E_fp16 (%)", "int8", "E_int8 (%)"]


def slug(text: str) -> str:
    """A file-name-safe form of a label ('atari/breakout' -> 'atari-breakout')."""
    return re.sub(r"[^0-9A-Za-z_.]+", "-", str(text)).strip("-") or "x"


def paper_column(column: str) -> str:
    """The name of the published value's column beside `column`: 'fp32 (paper)', 'E_int8 (%, paper)'."""
    return column.replace(" (%)", " (%, paper)") if column.endswith(" (%)") else f"{column} (paper)"


def _seeds_text(counts: dict[str, int]) -> int | str:
    """The number of seeds behind a row: one number, or each column's where they differ."""
    if len(set(counts.values())) == 1:
        return next(iter(counts.values()))
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def error_table(study: Study, algo: str, method: str | None, bits: int = INT_BITS) -> pd.DataFrame:
    """The paper's table for one algorithm: rows = environments (+ a mean row), columns fp32, fp16,
    E_fp16 (%), int8, E_int8 (%), seeds (the mean row is blank in a column where an environment has
    no value); with the published value (e.g. 'fp32 (paper)') beside each where the paper has a
    row of this algorithm and env (PTQ tables only). `method` is the integer method label ('ptq');
    None gives a table without quantized columns' values."""
    seeds = study.seeds[study.seeds["algo"] == algo]
    base = study.baselines[study.baselines["algo"] == algo]
    env_ids = study.env_ids()
    rows = []
    for env in sorted(set(seeds["env"]) | set(base["env"])):
        s = seeds[seeds["env"] == env]
        b = base[base["env"] == env]["fp32"]
        half = s[s["method"] == "fp16"]
        quant = s[(s["method"] == method) & (s["bits"] == bits)] if method else s.iloc[0:0]
        row = {
            "env": env,
            "fp32": b.mean() if len(b) else np.nan,
            "fp16": half["reward"].mean() if len(half) else np.nan,
            "E_fp16 (%)": 100 * half["e"].mean() if half["e"].notna().any() else np.nan,
            "int8": quant["reward"].mean() if len(quant) else np.nan,
            "E_int8 (%)": 100 * quant["e"].mean() if quant["e"].notna().any() else np.nan,
            "seeds": _seeds_text({"fp32": len(b), "fp16": len(half), "int8": len(quant)}),
        }
        if method is None or method.split(" ")[0] == "ptq":
            paper = published.lookup(algo, env, env_ids.get(env))
            if paper:
                for col, ours in published.COLUMNS.items():
                    row[paper_column(ours)] = paper[col]
        rows.append(row)
    paper_cols = [paper_column(c) for c in QUANTITIES]
    has_paper = any(c in r for r in rows for c in paper_cols)
    columns = ["env"] + [c for q in QUANTITIES for c in ([q, paper_column(q)] if has_paper else [q])] + ["seeds"]
    df = pd.DataFrame(rows).reindex(columns=columns)
    if not df.empty:
        # the mean over environments; blank where an environment has no value (a mean over fewer would mislead)
        means = {c: df[c].mean() if df[c].notna().all() else np.nan for c in columns if c not in ("env", "seeds")}
        df = pd.concat([df, pd.DataFrame([{"env": MEAN_ROW, **means, "seeds": ""}])], ignore_index=True)
    numeric = [c for c in columns if c not in ("env", "seeds")]
    df[numeric] = df[numeric].astype(float)
    if int(bits) != INT_BITS:
        df = df.rename(columns=lambda c: c.replace("int8", f"int{bits}"))
    return df


def bits_table(study: Study, algo: str, method: str) -> pd.DataFrame:
    """E (%) of one algorithm and method: rows = bit widths (then fp16/bf16), columns = environments
    and their mean; each value the mean over seeds."""
    seeds = study.seeds[(study.seeds["algo"] == algo) & study.seeds["method"].isin([method, *FLOAT_BITS])]
    seeds = seeds[seeds["method"] != "fp32"]
    if seeds.empty:
        return pd.DataFrame(columns=["bits", MEAN_ROW])
    order = {m: i for i, m in enumerate([method, "fp16", "bf16"])}
    seeds = seeds.assign(order=seeds["method"].map(order), label=[
        str(b) if m == method else m for m, b in zip(seeds["method"], seeds["bits"])
    ])
    means = seeds.groupby(["order", "bits", "label", "env"])["e"].mean().mul(100)
    table = means.unstack("env").reset_index(level=["order", "bits"], drop=True)
    table[MEAN_ROW] = table.mean(axis=1, skipna=False)
    table.index.name = "bits"
    table.columns.name = None
    return table.reset_index()


def published_table(study: Study, method: str | None) -> pd.DataFrame:
    """Cells the paper has: algo, env, then for each quantity ours and the paper's side by side."""
    frames = []
    for algo in sorted(study.seeds["algo"].unique()):
        table = error_table(study, algo, method)
        if "fp32 (paper)" not in table.columns:
            continue
        table = table[(table["env"] != MEAN_ROW) & table["fp32 (paper)"].notna()]
        frames.append(table.assign(algo=algo))
    if not frames:
        return pd.DataFrame(columns=["algo", "env"])
    df = pd.concat(frames, ignore_index=True)
    columns = ["algo", "env"] + [c for q in QUANTITIES for c in (q, paper_column(q))] + ["seeds"]
    return df[columns]


def _display(df: pd.DataFrame, floatfmt: str = ".2f") -> pd.DataFrame:
    """Floats formatted with `floatfmt` and a dash where there is no value (Markdown)."""
    out = df.copy().astype(object)
    for c in df.columns:
        if pd.api.types.is_float_dtype(df[c]):
            out[c] = [("–" if pd.isna(v) else format(v, floatfmt)) for v in df[c]]
        else:
            out[c] = ["–" if (v is None or (isinstance(v, float) and np.isnan(v))) else v for v in df[c]]
    return out


def latex_escape(text: str) -> str:
    """`text` safe inside LaTeX (captions: pandas escapes the cells, not the caption)."""
    marks = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
             "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
    return "".join(marks.get(ch, ch) for ch in text)


def write(df: pd.DataFrame, stem: Path, title: str, caption: str, floatfmt: str = ".2f") -> list[Path]:
    """`stem`.md, .csv and .tex of one data frame (floats shown with `floatfmt`); returns the paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    md, csv, tex = (stem.with_suffix(s) for s in (".md", ".csv", ".tex"))
    md.write_text(f"## {title}\n\n{caption}\n\n{_display(df, floatfmt).to_markdown(index=False, disable_numparse=True)}\n")
    df.to_csv(csv, index=False)
    latex = df.to_latex(
        index=False, float_format=lambda v: format(v, floatfmt), na_rep="--", escape=True, caption=latex_escape(f"{title}. {caption}"),
        label=f"tab:{slug(stem.name)}",
    )
    tex.write_text(latex)
    return [md, csv, tex]
