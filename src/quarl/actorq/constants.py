"""Plain constants ActorQ runs and their collation share (no torch, ONNX or env imports here, so
`quarl.collate` reads them without loading the runtime)."""

from __future__ import annotations

PRECISIONS = {8: "int8", 16: "fp16", 32: "fp32"}  # quant.actor_bits -> the actors' execution precision
RETURN_WINDOW = 10  # training episodes (all actors pooled) in a run's moving-average return
