"""PTQ's activation and per-layer keys as records' columns mean them (one rule for every collation)."""

from __future__ import annotations

import json

import pandas as pd

LAYER_PREFIX = "quant.layer_bits."


def effective_quant_columns(done: pd.DataFrame) -> pd.DataFrame:
    """A copy of `done` where a PTQ record written before PTQ quantized activations (no
    `quant.input_bits`) has `quant.act_bits` and `quant.input_bits` 32, as it ran (its act_bits was
    QAT's setting; `quarl.methods.ptq.activation_bits`), one written before `quant.min_elements` has 0
    (every weight quantized), and a record's per-layer weight bits
    (`quant.layer_bits.<layer>` columns) are one `quant.layer_bits` column (JSON text, None where uniform)."""
    out = done.copy()
    if "quant.act_bits" in out.columns:
        ptq = out["quant"] == "ptq"
        old = ptq & (out["quant.input_bits"].isna() if "quant.input_bits" in out.columns else True)
        out.loc[old, "quant.act_bits"] = 32
        out["quant.input_bits"] = out.get("quant.input_bits", pd.Series(float("nan"), index=out.index))
        out.loc[old, "quant.input_bits"] = 32
    if "quant.min_elements" in out.columns:  # written before TFLite's rule: every weight quantized
        out.loc[(out["quant"] == "ptq") & out["quant.min_elements"].isna(), "quant.min_elements"] = 0
    layers = [c for c in out.columns if c.startswith(LAYER_PREFIX)]
    if layers:

        def text(row: pd.Series) -> str | None:
            bits = {c[len(LAYER_PREFIX) :]: int(v) for c, v in row.items() if pd.notna(v)}
            return json.dumps(bits, sort_keys=True) if bits else None

        out["quant.layer_bits"] = out[layers].apply(text, axis=1)
    return out
