"""The parameter quantizer: the policy's weights packed once per publish, at `actorq.comm_bits`.

The learner packs its fp32 acting network (`Linear` layers, see `networks`) into one flat byte
buffer; the actors read it back without copying (`unpack` returns views). On the wire:

- 32 bits: weights float32; 16 bits: weights float16;
- 8 bits: weights uint8, affine per tensor (a scale and a zero point per layer; the range always
  holds 0), the layout ONNX Runtime's int8 kernels take as is.

Weights travel transposed (`[in, out]`: `y = x @ wt + b`), the layout every executor multiplies
with; biases stay float32 (a few KB; ONNX Runtime's int8 layers keep them float too). The byte
count of a publish is therefore really ~4x (8 bits) or ~2x (16 bits) smaller than at 32 bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

from quarl.quantize.weights import qparams, ranges

WIRE_DTYPES = {32: np.float32, 16: np.float16, 8: np.uint8}
TORCH_WIRE_DTYPES = {32: torch.float32, 16: torch.float16, 8: torch.uint8}
ALIGN = 16  # every array starts at a multiple of 16 bytes, so views into the buffer are aligned


@dataclass
class Layer:
    """One linear layer as it travels or executes: `y = x @ wt + b`.

    `scale` and `zero_point` are set for uint8 weights only (`wt ≈ (q - zero_point) * scale`).
    """

    wt: np.ndarray
    b: np.ndarray
    scale: float | None = None
    zero_point: int | None = None


def quantize_uint8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Affine per-tensor uint8 quantization on `w`'s device: (q, scale, zero_point), each of the last
    two of shape [1], with w ≈ (q - zero_point) * scale, the scale and zero point of PTQ's affine
    scheme (`quarl.quantize.weights.qparams`)."""
    scale, zero_point, qmin, qmax = qparams(*ranges(w), 8, "affine")
    q = torch.clamp(torch.round(w / scale) + zero_point, qmin, qmax).to(torch.uint8)
    return q, scale.reshape(1), zero_point.reshape(1)


def dequantize(layer: Layer) -> np.ndarray:
    """The float32 weights of a layer, whatever their wire precision."""
    if layer.scale is None or layer.zero_point is None:  # set together, for uint8 layers
        return layer.wt.astype(np.float32)
    return (layer.wt.astype(np.float32) - layer.zero_point) * np.float32(layer.scale)


def _layout(shapes: Sequence[tuple[int, int]], bits: int) -> list[tuple[str, int, tuple[int, ...], np.dtype]]:
    """(name, offset, shape, dtype) of every array in a packed buffer of layers with `shapes` ([in, out])."""
    entries, offset = [], 0
    for i, (n_in, n_out) in enumerate(shapes):
        arrays = [("wt", (n_in, n_out), np.dtype(WIRE_DTYPES[bits])), ("b", (n_out,), np.dtype(np.float32))]
        if bits == 8:
            arrays += [("scale", (1,), np.dtype(np.float32)), ("zero_point", (1,), np.dtype(np.int32))]
        for name, shape, dtype in arrays:
            entries.append((f"{name}{i}", offset, shape, dtype))
            offset += -(-int(np.prod(shape)) * dtype.itemsize // ALIGN) * ALIGN
    entries.append(("end", offset, (), np.dtype(np.uint8)))
    return entries


def packed_size(shapes: Sequence[tuple[int, int]], bits: int) -> int:
    """Bytes of one publish of layers with `shapes` at `bits`."""
    return _layout(shapes, bits)[-1][1]


class ParameterQuantizer:
    """Packs an acting network's weights at `bits` into a reused buffer: once per publish, on the learner.

    The packed image is built where the network lives and leaves it in one copy: a GPU learner
    quantizes on the GPU and sends the wire bytes (a quarter of float32's at 8 bits) into pinned
    host memory, instead of copying float32 weights out and quantizing them on one CPU thread."""

    def __init__(self, shapes: Sequence[tuple[int, int]], bits: int) -> None:
        self.shapes, self.bits = [(n_in, n_out) for n_in, n_out in shapes], bits
        self.buffer = np.zeros(packed_size(self.shapes, bits), dtype=np.uint8)
        self._image: torch.Tensor | None = None  # the packed bytes on the network's device

    @property
    def nbytes(self) -> int:
        """Bytes on the wire per publish."""
        return self.buffer.nbytes

    @torch.no_grad()
    def pack(self, net: nn.Module) -> np.ndarray:
        """The packed weights of `net` (a view of this quantizer's buffer: copy it before the next pack)."""
        arrays = _wire_arrays(net, self.bits)
        image = self._image_on(arrays["wt0"].device)
        for name, offset, _, _ in _layout(self.shapes, self.bits)[:-1]:
            raw = arrays[name].reshape(-1).view(torch.uint8)
            image[offset : offset + raw.numel()].copy_(raw)
        if image.device.type != "cpu":
            torch.from_numpy(self.buffer).copy_(image)  # the publish's one copy from the device
        return self.buffer

    def _image_on(self, device: torch.device) -> torch.Tensor:
        """Where a pack writes: the buffer itself on the CPU; elsewhere a zeroed device image, the
        buffer then moved to pinned memory (a faster copy back)."""
        if device.type == "cpu":
            return torch.from_numpy(self.buffer)
        if self._image is None or self._image.device != device:
            self._image = torch.zeros(self.buffer.nbytes, dtype=torch.uint8, device=device)
            self.buffer = torch.zeros(self.buffer.nbytes, dtype=torch.uint8, pin_memory=True).numpy()
        return self._image


def _wire_arrays(net: nn.Module, bits: int) -> dict[str, torch.Tensor]:
    """Every array of a publish (`_layout`'s names) at its wire dtype, on the network's device."""
    arrays: dict[str, torch.Tensor] = {}
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    for i, m in enumerate(linears):
        wt, b = m.weight.detach().float().t(), m.bias.detach().float()
        if bits == 8:
            wt, arrays[f"scale{i}"], arrays[f"zero_point{i}"] = quantize_uint8(wt)
        arrays[f"wt{i}"], arrays[f"b{i}"] = wt.to(TORCH_WIRE_DTYPES[bits]), b
    return arrays


def unpack(buffer: np.ndarray, shapes: Sequence[tuple[int, int]], bits: int) -> list[Layer]:
    """The layers in a packed buffer, as views into it (no copy)."""
    views = {
        name: np.ndarray(shape, dtype=dtype, buffer=buffer, offset=offset)
        for name, offset, shape, dtype in _layout(shapes, bits)[:-1]
    }
    return [
        Layer(
            views[f"wt{i}"],
            views[f"b{i}"],
            float(views[f"scale{i}"][0]) if bits == 8 else None,
            int(views[f"zero_point{i}"][0]) if bits == 8 else None,
        )
        for i in range(len(shapes))
    ]


def layer_shapes(net: nn.Module) -> list[tuple[int, int]]:
    """`[in, out]` of every Linear layer of an acting network."""
    return [(m.in_features, m.out_features) for m in net.modules() if isinstance(m, nn.Linear)]
