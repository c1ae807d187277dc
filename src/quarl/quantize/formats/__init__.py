"""Low-precision number formats for weights (issue 57): OCP FP8, the OCP MX v1.0 block formats,
NVFP4 and QLoRA's NF4, as quantize-dequantize ("fake" quantization) in vectorized torch, with their
storage cost. docs/formats.md describes them; the modules:

- `quarl.quantize.formats.elements`: the element types and rounding onto their grids;
- `quarl.quantize.formats.blocks`: how a tensor is cut into blocks (short blocks included);
- `quarl.quantize.formats.scaling`: how each format scales a tensor, channel or block;
- `quarl.quantize.formats.registry`: name -> `Format`, with `fake_quantize`, `bits_per_weight`, `nbytes`.
"""

from quarl.quantize.formats.registry import (
    FORMATS,
    Format,
    bits_per_weight,
    fake_quantize,
    get,
    names,
    nbytes,
)

__all__ = ["FORMATS", "Format", "bits_per_weight", "fake_quantize", "get", "names", "nbytes"]
