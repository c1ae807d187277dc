"""quarl's MX and NVFP4 rounding against an independent implementation, torchao's
(`torchao.prototype.mx_formats`: `to_mx` / `to_dtype` with the OCP spec's FLOOR scale, and
`nvfp4_quantize` with a per-tensor scale), value by value on the same float32 tensors: rows of
random normal weights at magnitudes from 2^-12 to 2^12, 64 values a row (two MX blocks, four NVFP4
blocks). Prints, per format, how many dequantized values are identical and the largest difference;
NVFP4 also over the blocks whose E4M3 scale is normal (`normal_scale_blocks`: where the two differ).

torchao is not one of quarl's dependencies: install it beside quarl for this check, e.g.
`pip install --no-deps torchao==0.18.0` (0.18 imports with torch 2.13; its CUDA kernels are not needed).

Usage: python benchmarks/crosscheck_formats.py [--rows 4096] [--seed 0]
"""

from __future__ import annotations

import argparse

import torch

from quarl.quantize import formats

MX = {  # quarl's format -> torchao's element dtype
    "mxfp8_e4m3": torch.float8_e4m3fn,
    "mxfp8_e5m2": torch.float8_e5m2,
    "mxfp6_e3m2": "fp6_e3m2",
    "mxfp6_e2m3": "fp6_e2m3",
    "mxfp4": torch.float4_e2m1fn_x2,
}
COLUMNS = 64


def weights(rows: int, seed: int) -> torch.Tensor:
    """[rows, COLUMNS] float32: normal values, each row scaled by 2^u, u uniform in [-12, 12]."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.exp2(torch.empty(rows, 1).uniform_(-12, 12, generator=g))
    return (torch.randn(rows, COLUMNS, generator=g) * scale).float()


def torchao_mx(w: torch.Tensor, elem: object) -> torch.Tensor:
    from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx

    scale, data = to_mx(w, elem, 32)
    return to_dtype(data, scale, elem, 32, torch.float32).reshape(w.shape)


def torchao_nvfp4(w: torch.Tensor) -> torch.Tensor:
    from torchao.prototype.mx_formats.kernels import f4_unpacked_to_f32, unpack_uint4
    from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale

    tensor_scale = per_tensor_amax_to_scale(w.abs().amax())
    scales, packed = nvfp4_quantize(w.contiguous(), 16, tensor_scale)
    elements = f4_unpacked_to_f32(unpack_uint4(packed)).reshape(w.shape[0], -1, 16)
    return (elements * scales.float().reshape(w.shape[0], -1, 1) * tensor_scale).reshape(w.shape)


def normal_scale_blocks(w: torch.Tensor) -> torch.Tensor:
    """Where NVFP4's E4M3 block scale (block amax / 6 / tensor scale, rounded) is at least 2^-6, E4M3's
    smallest normal: torchao clamps smaller scales to 2^-6, quarl keeps E4M3's subnormal scales (and
    zero), so the two differ in those blocks only."""
    from quarl.quantize.formats import scaling
    from quarl.quantize.formats.elements import E4M3

    blocks = w.double().reshape(w.shape[0], -1, 16)
    tensor = scaling.fp32(w.abs().amax().double() / (448 * 6))
    scale = E4M3.round(blocks.abs().amax(-1, keepdim=True) / (6 * tensor))
    return (scale >= 2**-6).expand_as(blocks).reshape(w.shape)


def compare(name: str, ours: torch.Tensor, theirs: torch.Tensor) -> list[str]:
    same = int((ours == theirs).sum())
    worst = float((ours - theirs).abs().max())
    return [name, f"{ours.numel():,}", f"{same:,}", f"{ours.numel() - same:,}", f"{worst:.3g}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    w = weights(args.rows, args.seed)
    rows = [compare(name, formats.fake_quantize(w, name), torchao_mx(w, elem)) for name, elem in MX.items()]
    ours, theirs = formats.fake_quantize(w, "nvfp4"), torchao_nvfp4(w)
    rows.append(compare("nvfp4", ours, theirs))
    normal = normal_scale_blocks(w)
    rows.append(compare("nvfp4, blocks whose E4M3 scale is normal", ours[normal], theirs[normal]))
    header = ["format", "values", "identical", "differing", "largest |difference|"]
    print("| " + " | ".join(header) + " |\n|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
