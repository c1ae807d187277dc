"""The low-precision formats (quarl.quantize.formats): element rounding bit for bit against ml_dtypes'
casts, the block rules against a loop written from the specs with ml_dtypes rounding, hand-worked
blocks for MX, NVFP4 and NF4, non-finite weights, and the storage cost of every format."""

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from quarl.errors import QuarlError
from quarl.quantize.formats import FORMATS, bits_per_weight, fake_quantize, get, names, nbytes
from quarl.quantize.formats.elements import E4M3, E5M2, FLOAT_ELEMENTS, INT8, NF4, FloatElement

F32 = np.float32


def _ours(element, x: np.ndarray) -> np.ndarray:
    return element.round(torch.from_numpy(x)).numpy()


def _grid(element: FloatElement) -> np.ndarray:
    """Every finite value of `element` (both zeros), from its codes through ml_dtypes."""
    codes = np.arange(2**element.bits, dtype=np.uint8).view(getattr(ml_dtypes, element.ml_dtype)).astype(F32)
    return codes[~np.isnan(codes) & ~np.isinf(codes)]


def _probes(values: np.ndarray, top: float) -> np.ndarray:
    """`values`, every midpoint between neighbours, values beyond `top` and log-uniform randoms, both signs."""
    ascending = np.unique(values[values >= 0]).astype(np.float64)
    midpoints = (ascending[:-1] + ascending[1:]) / 2  # exact in fp32: one bit more than the element
    ulp = ascending[-1] - ascending[-2]
    beyond = [top + ulp / 4, top + ulp / 2, top + ulp * 3 / 4, top + ulp, 2 * top, 1e30, np.finfo(F32).max, np.inf]
    rng = np.random.default_rng(0)
    randoms = np.exp2(rng.uniform(-30, math.log2(top) + 2, 20_000))
    tiny = np.array([1e-45, 1e-40, 1e-38])  # fp32 subnormals
    positive = np.concatenate([ascending, midpoints, beyond, randoms, tiny]).astype(F32)
    return np.concatenate([positive, -positive])


@pytest.mark.parametrize("element", FLOAT_ELEMENTS, ids=lambda e: e.name)
def test_float_rounding_is_ml_dtypes_cast_bit_for_bit(element):
    """Every representable value, every midpoint (ties to even), values beyond the max, randoms:
    where ml_dtypes' cast is finite, quarl's result has the same bits (the sign of zero too); where
    it overflows to inf (E5M2) or NaN (E4M3, which has no inf), quarl saturates to +-max."""
    x = _probes(_grid(element), element.max)
    ours, theirs = _ours(element, x), x.astype(getattr(ml_dtypes, element.ml_dtype)).astype(F32)
    finite = np.isfinite(theirs)
    np.testing.assert_array_equal(ours[finite].view(np.uint32), theirs[finite].view(np.uint32))
    np.testing.assert_array_equal(ours[~finite], np.sign(x[~finite]) * F32(element.max))
    assert finite.all() == (not element.has_inf and not element.has_nan)  # FP6, FP4: ml_dtypes saturates too


@pytest.mark.parametrize("element", FLOAT_ELEMENTS, ids=lambda e: e.name)
def test_midpoints_go_to_the_even_neighbour(element):
    dtype = getattr(ml_dtypes, element.ml_dtype)
    grid = np.unique(_grid(element)[_grid(element) >= 0]).astype(np.float64)
    midpoints = ((grid[:-1] + grid[1:]) / 2).astype(F32)
    codes = _ours(element, midpoints).astype(dtype).view(np.uint8)
    assert (codes & 1 == 0).all()
    top = grid[-1] + (grid[-1] - grid[-2]) / 2  # the tie above the max: its even neighbour overflows
    assert _ours(element, np.array([top], F32))[0] == element.max


def test_overflow_where_ml_dtypes_does_not_saturate():
    """E4M3 (no inf): ml_dtypes keeps 464 (the tie, to even 448) and makes 465 NaN; E5M2 makes the tie
    61440 inf. quarl saturates both, as the OCP MX conversion does: +-inf become +-max, NaN stays NaN."""
    x = np.array([464, 465, 1e6, np.inf, -np.inf, np.nan], F32)
    assert np.isnan(x[1:3].astype(ml_dtypes.float8_e4m3fn).astype(F32)).all()
    np.testing.assert_array_equal(_ours(E4M3, x), [448, 448, 448, 448, -448, np.nan])
    y = np.array([61439, 61440, -1e9, np.inf, np.nan], F32)
    assert np.isinf(y[1:3].astype(ml_dtypes.float8_e5m2).astype(F32)).all()
    np.testing.assert_array_equal(_ours(E5M2, y), [57344, 57344, -57344, 57344, np.nan])


def test_int8_element_is_two_complement_with_six_fraction_bits():
    """MXINT8: every code / 64 and every midpoint (ties to even), saturating symmetrically to +-127/64."""
    grid = np.arange(-127, 128) / 64
    midpoints = (grid[:-1] + grid[1:]) / 2
    x = np.concatenate([grid, midpoints, [-2.0, -1.999, 2.5, np.inf, -np.inf]]).astype(F32)
    expected = np.clip(np.round(x.astype(np.float64) * 64), -127, 127) / 64  # numpy rounds half to even
    np.testing.assert_array_equal(_ours(INT8, x), expected.astype(F32))
    assert INT8.max == 127 / 64 and INT8.emax == 0


def test_nf4_table_and_nearest_value():
    table = np.array(NF4.values)
    assert len(table) == 16 and table[0] == -1 and table[7] == 0 and table[-1] == 1 and NF4.bits == 4
    x = np.random.default_rng(1).uniform(-1.2, 1.2, 5000)
    nearest = table[np.abs(x[:, None] - table[None, :]).argmin(axis=1)]
    np.testing.assert_array_equal(_ours(NF4, x), np.clip(nearest, -1, 1))
    midpoints = (table[:-1] + table[1:]) / 2
    np.testing.assert_array_equal(_ours(NF4, midpoints), table[:-1])  # ties: the lower value


# Block rules against loops written from the specs, rounding with ml_dtypes (saturation: clip first).


def _cast(x: np.ndarray, element) -> np.ndarray:
    if element is INT8:
        return np.clip(np.round(x * 64), -127, 127) / 64
    dtype = getattr(ml_dtypes, element.ml_dtype)
    return np.clip(x, -element.max, element.max).astype(F32).astype(dtype).astype(np.float64)


def _mx_reference(w: np.ndarray, element, block: int = 32) -> np.ndarray:
    out = np.zeros_like(w, dtype=np.float64)
    for r in range(w.shape[0]):
        for start in range(0, w.shape[1], block):
            v = w[r, start : start + block].astype(np.float64)
            amax = np.abs(v).max()
            x = -127 if amax == 0 else min(max(math.floor(math.log2(amax)) - element.emax, -127), 127)
            out[r, start : start + block] = _cast(v / 2.0**x, element) * 2.0**x
    return out.astype(F32)


def _nvfp4_reference(w: np.ndarray) -> np.ndarray:
    tensor = float(F32(np.abs(w).max() / (448 * 6)))
    out = np.zeros_like(w, dtype=np.float64)
    for r in range(w.shape[0]):
        for start in range(0, w.shape[1], 16):
            v = w[r, start : start + 16].astype(np.float64)
            scale = _cast(np.array([np.abs(v).max() / 6 / tensor]), E4M3)[0]
            if scale > 0:
                out[r, start : start + 16] = _cast(v / (scale * tensor), FORMATS["nvfp4"].element) * scale * tensor
    return out.astype(F32)


def _nf4_reference(w: np.ndarray) -> np.ndarray:
    flat, table = w.reshape(-1).astype(np.float64), np.array(NF4.values)
    out = np.zeros_like(flat)
    for start in range(0, flat.size, 64):
        v = flat[start : start + 64]
        absmax = np.abs(v).max()
        if absmax > 0:
            out[start : start + 64] = table[np.abs(v[:, None] / absmax - table).argmin(axis=1)] * absmax
    return out.reshape(w.shape).astype(F32)


def _fp8_reference(w: np.ndarray, element, per_channel: bool) -> np.ndarray:
    rows = w.reshape(w.shape[0], -1) if per_channel else w.reshape(1, -1)
    scale = (np.abs(rows).max(axis=1, keepdims=True) / element.max).astype(F32).astype(np.float64)
    scale[scale == 0] = 1  # an all-zero row: any scale will do
    return (_cast(rows / scale, element) * scale).reshape(w.shape).astype(F32)


def _weights() -> np.ndarray:
    """Rows of very different magnitudes, a zero row, a short last block (70 = 32 + 32 + 6 = 4 x 16 + 6)."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((9, 70)) * np.exp2(rng.integers(-20, 12, (9, 1)))
    w[3] = 0
    w[4, :8] = [1.0, -2.5, 0.3, 6.0, 7.5, -7.0, 464.0, 0.15625]  # ties and saturation
    return w.astype(F32)


@pytest.mark.parametrize("name", [n for n in FORMATS if FORMATS[n].rule == "mx"])
def test_mx_matches_the_spec_loop(name):
    w = _weights()
    fmt = get(name)
    np.testing.assert_array_equal(fmt.fake_quantize(torch.from_numpy(w)).numpy(), _mx_reference(w, fmt.element))
    scales = fmt.parts(torch.from_numpy(w)).scales.numpy().astype(F32)  # E8M0: exact powers of two
    np.testing.assert_array_equal(scales.astype(ml_dtypes.float8_e8m0fnu).astype(F32), scales)


def test_nvfp4_nf4_fp8_match_the_spec_loops():
    w = _weights()
    t = torch.from_numpy(w)
    np.testing.assert_array_equal(get("nvfp4").fake_quantize(t).numpy(), _nvfp4_reference(w))
    np.testing.assert_array_equal(get("nf4").fake_quantize(t).numpy(), _nf4_reference(w))
    for name, element in (("fp8_e4m3", E4M3), ("fp8_e5m2", E5M2)):
        for granularity in ("per_tensor", "per_channel"):
            got = fake_quantize(t, name, granularity).numpy()
            np.testing.assert_array_equal(got, _fp8_reference(w, element, granularity == "per_channel"))


# Hand-worked blocks (the arithmetic in the comments).

ROW = [1.0, -2.5, 0.3, 6.0, 0.1, -0.7, 3.2]


def _row(values, length):
    return list(values) + [0.0] * (length - len(values))


def test_mxfp4_hand_worked():
    """Blocks of 32 along a row of 36: a full block and a short block of 4 with its own scale.
    Row 0: amax 6, floor(log2 6) = 2, emax(E2M1) = 2: X = 0, scale 1; -2.5 ties to even -2, 0.3 -> 0.5,
    0.1 -> 0, -0.7 -> -0.5, 3.2 -> 3. Short block [0.3, 0.1, -0.2, 0.05]: floor(log2 0.3) = -2, scale
    2^-4: 4.8 -> 4, 1.6 -> 1.5, -3.2 -> -3, 0.8 -> 1. Row 1: amax 20, scale 2^(4-2) = 4: 5 ties to 4,
    3.25 -> 3, -1.75 ties to -2, 0.25 ties to 0; its short block is all zeros: scale 2^-127. Row 2:
    7.5 and -7 saturate to +-6 (-7 is the tie between 6 and 8, 8 overflows)."""
    w = torch.tensor(
        [_row(ROW, 32) + [0.3, 0.1, -0.2, 0.05], _row([20.0, 13.0, -7.0, 1.0], 36), _row([7.5, -7.0, 0.2], 36)]
    )
    parts = get("mxfp4").parts(w)
    assert parts.scales.flatten().tolist() == [1.0, 2**-4, 4.0, 2**-127, 1.0, 2**-127]
    assert parts.elements[0, 0, :7].tolist() == [1.0, -2.0, 0.5, 6.0, 0.0, -0.5, 3.0]
    assert parts.elements[0, 1, :4].tolist() == [4.0, 1.5, -3.0, 1.0]
    assert parts.elements[1, 0, :4].tolist() == [4.0, 3.0, -2.0, 0.0]
    assert parts.elements[2, 0, :3].tolist() == [6.0, -6.0, 0.0]
    q = get("mxfp4").fake_quantize(w)
    assert q[0, 32:].tolist() == [0.25, 0.09375, -0.1875, 0.0625]
    assert q[1, :4].tolist() == [16.0, 12.0, -8.0, 0.0] and q[1, 32:].tolist() == [0.0] * 4


def test_mxfp8_e4m3_hand_worked():
    """Row 0: amax 6, emax(E4M3) = 8: X = 2 - 8 = -6, v * 64 rounded to E4M3: 19.2 -> 20 (quantum 2),
    6.4 -> 6.5, -44.8 -> -44 (quantum 4), 204.8 -> 208 (quantum 16). Row 1: 7.5 * 64 = 480 saturates to
    448 (480 is E4M3's NaN code), 0.0001 * 64 = 0.0064 is subnormal: 3 * 2^-9."""
    w = torch.tensor([_row(ROW, 32), _row([7.5, -7.0, 0.0001], 32)])
    parts = get("mxfp8_e4m3").parts(w)
    assert parts.scales.flatten().tolist() == [2**-6, 2**-6]
    assert parts.elements[0, 0, :7].tolist() == [64.0, -160.0, 20.0, 384.0, 6.5, -44.0, 208.0]
    assert parts.elements[1, 0, :3].tolist() == [448.0, -448.0, 3 * 2**-9]
    q = get("mxfp8_e4m3").fake_quantize(w)
    assert q[0, :7].tolist() == [1.0, -2.5, 0.3125, 6.0, 0.1015625, -0.6875, 3.25]
    assert q[1, :3].tolist() == [7.0, -7.0, 3 * 2**-15]


def test_mxint8_hand_worked():
    """amax 7.99: X = 2 - 0 = 2, scale 4; v / 4 on the 1/64 grid: 0.3 -> 5/64, 0.15625 -> 2.5/64 ties
    to 2/64, +-7.99 -> +-127.84/64 saturates to +-127/64 (the code -128 is not used)."""
    w = torch.tensor([_row([1.0, -2.5, 0.3, 6.0, 0.15625, 7.99, -7.99], 32)])
    parts = get("mxint8").parts(w)
    assert parts.scales.item() == 4.0
    assert (parts.elements[0, 0, :7] * 64).tolist() == [16.0, -40.0, 5.0, 96.0, 2.0, 127.0, -127.0]
    assert get("mxint8").fake_quantize(w)[0, :7].tolist() == [1.0, -2.5, 0.3125, 6.0, 0.125, 7.9375, -7.9375]


def test_nvfp4_hand_worked():
    """Tensor amax 10.5: tensor scale 10.5 / (448 * 6) = 2^-8. Row 0: block amax 6, block scale
    E4M3(6 / 6 / 2^-8) = 256, v / 1 to E2M1: -2.5 ties to -2, 0.3 -> 0.5. Row 1: block scale
    10.5 / 6 * 256 = 448, v / 1.75: 6, -2.29 -> -2, 0.5, 1.5. Row 2: block amax 0.1: 4.27 rounds to
    the E4M3 4.5, v / (4.5 / 256): 5.69 -> 6, -2.84 -> -3, 1.14 -> 1. Row 3: block amax 0.0984375:
    4.2 rounds down to the E4M3 4, and 0.0984375 / (4 / 256) = 6.3 saturates to 6."""
    rows = [[1.0, -2.5, 0.3, 6.0], [10.5, -4.0, 0.875, 2.625], [0.1, -0.05, 0.02], [0.0984375]]
    w = torch.tensor([_row(r, 16) for r in rows])
    parts = get("nvfp4").parts(w)
    assert parts.tensor_scale.item() == 2**-8
    assert parts.scales.flatten().tolist() == [256.0, 448.0, 4.5, 4.0]
    assert parts.elements[:3, 0, :4].tolist() == [[1.0, -2.0, 0.5, 6.0], [6.0, -2.0, 0.5, 1.5], [6.0, -3.0, 1.0, 0.0]]
    assert parts.elements[3, 0, 0].item() == 6.0
    q = get("nvfp4").fake_quantize(w)
    assert q[:3, :3].tolist() == [[1.0, -2.0, 0.5], [10.5, -3.5, 0.875], [0.10546875, -0.052734375, 0.017578125]]
    assert q[3, 0].item() == 0.09375


def test_nf4_hand_worked():
    """Blocks of 64 over the flattened [2, 40] tensor: 64 + a short block of 16. Block 0: absmax 6,
    1/6 -> 0.1609, -2.5/6 = -0.4167 -> -0.3949, 0.3/6 = 0.05 -> 0.0796, 6/6 -> 1. Block 1 (the last 16
    of row 1): absmax 0.5, -1 and 0.25/0.5 = 0.5 -> 0.4407 (nearer than 0.5626)."""
    w = torch.zeros(2, 40)
    w[0, :4] = torch.tensor([1.0, -2.5, 0.3, 6.0])
    w[1, 24:26] = torch.tensor([-0.5, 0.25])
    parts = get("nf4").parts(w)
    assert parts.scales.flatten().tolist() == [6.0, 0.5]
    t = NF4.values
    assert parts.elements[0, 0, :4].tolist() == [t[9], t[3], t[8], t[15]]
    assert parts.elements[0, 1, :2].tolist() == [t[0], t[12]]
    q = get("nf4").fake_quantize(w)
    assert q[0, :4].tolist() == [F32(t[9] * 6), F32(t[3] * 6), F32(t[8] * 6), 6.0]
    assert q[1, 24:26].tolist() == [-0.5, F32(t[12] * 0.5)]


# Zeros, non-finite weights, shapes, gradients.


@pytest.mark.parametrize("name", names())
def test_zeros_shapes_dtypes_and_gradient(name):
    fmt = get(name)
    for shape in [(64, 4), (8, 3, 3, 3), (5,), (), (0, 4)]:
        assert fmt.fake_quantize(torch.zeros(shape)).eq(0).all()
    w = torch.randn(16, 40, requires_grad=True)
    q = fmt.fake_quantize(w)
    assert q.shape == w.shape and q.dtype == w.dtype and (q - w).abs().max() < w.abs().max()
    q.sum().backward()
    assert w.grad is not None and w.grad.eq(1).all()  # straight-through
    assert fmt.fake_quantize(w.double()).dtype == torch.float64


@pytest.mark.parametrize("name", [n for n in FORMATS if FORMATS[n].rule in ("mx", "nf4")])
def test_quantizing_twice_changes_nothing(name):
    """MX and NF4 keep each block's scale (its absolute maximum stays in the same binade, or is kept)."""
    q = get(name).fake_quantize(torch.randn(8, 70) * 3)
    assert torch.equal(get(name).fake_quantize(q), q)


def test_a_nonfinite_weight_makes_its_group_nan():
    """MX, NF4: its block (the E8M0 NaN scale); FP8 per channel: its row; NVFP4: the tensor (its fp32
    scale comes from the tensor's amax)."""
    w = torch.ones(2, 64)
    w[0, 40] = float("inf")
    w[1, 3] = float("nan")
    mx = get("mxfp8_e5m2").fake_quantize(w)
    assert mx[0, 32:].isnan().all() and mx[1, :32].isnan().all() and mx[0, :32].eq(1).all() and mx[1, 32:].eq(1).all()
    nf4 = get("nf4").fake_quantize(w)
    assert nf4.isnan().all()  # each row is one 64-block of the flattened tensor
    fp8 = get("fp8_e4m3", "per_channel").fake_quantize(torch.tensor([[1.0, float("inf")], [1.0, 2.0]]))
    assert fp8[0].isnan().all() and fp8[1].isfinite().all()
    assert get("nvfp4").fake_quantize(w).isnan().all()


# Storage cost.


@pytest.mark.parametrize(
    "name, granularity, shape, bits",
    [
        ("mxfp4", None, (64, 4), 4 + 8 / 4),  # CartPole's first layer: 64 short blocks of 4
        ("mxfp4", None, (64, 64), 4 + 8 / 32),
        ("mxfp8_e4m3", None, (64, 4), 8 + 8 / 4),
        ("mxfp6_e2m3", None, (64, 40), 6 + 2 * 8 / 40),  # a block of 32 and a short block of 8 per row
        ("mxint8", None, (2, 64), 8 + 8 / 32),
        ("mxfp4", None, (8, 3, 3, 3), 4 + 8 / 27),  # a conv filter's reduction: 3 * 3 * 3
        ("nvfp4", None, (64, 64), 4 + 8 / 16 + 32 / 4096),
        ("nvfp4", None, (64, 4), 4 + 8 / 4 + 32 / 256),
        ("nf4", None, (64, 4), 4 + 32 / 64),  # blocks of the flattened tensor: 4 full ones
        ("nf4", None, (3, 5), 4 + 32 / 15),
        ("fp8_e4m3", None, (64, 4), 8 + 32 / 256),
        ("fp8_e5m2", "per_channel", (64, 4), 8 + 32 / 4),
    ],
)
def test_bits_per_weight_counts_every_scale(name, granularity, shape, bits):
    assert bits_per_weight(name, shape, granularity) == pytest.approx(bits, rel=1e-12)
    assert nbytes(name, shape, granularity) == math.ceil(round(bits * math.prod(shape)) / 8)


def test_nbytes_packs_bits_and_rounds_up_once():
    assert nbytes("mxfp4", (64, 4)) == 192  # 64 * 4 * 4 bits + 64 * 8 bits
    assert nbytes("mxfp6_e3m2", (1, 3)) == 4  # 18 + 8 bits
    assert nbytes("nvfp4", (0, 4)) == 0 and bits_per_weight("nvfp4", (0, 4)) == 0.0


def test_registry_names_and_errors():
    assert names() == [
        "fp8_e4m3", "fp8_e5m2", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8", "nvfp4",
        "nf4",
    ]  # fmt: skip
    assert get("fp8_e4m3").granularity == "per_tensor" and get("fp8_e4m3", "per_channel").granularity == "per_channel"
    assert get("mxfp4").block == 32 and get("nvfp4").block == 16 and get("nf4").block == 64
    with pytest.raises(QuarlError, match=r"Unknown number format 'fp3': the formats are fp8_e4m3, .*, nf4\.$"):
        get("fp3")
    with pytest.raises(QuarlError, match="takes granularity per_block, not 'per_channel'"):
        get("mxfp4", "per_channel")
    with pytest.raises(QuarlError, match="per_tensor or per_channel"):
        get("fp8_e5m2", "per_block")
