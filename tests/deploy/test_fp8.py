"""The torch_fp8 backend's arithmetic (`quarl.deploy.fp8`): weights stored exactly where they lie on
an E4M3 grid, inputs rounded per call to E4M3 with a dynamic per-tensor scale, products against the
same rounding done by hand with ml_dtypes in float64."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

from quarl.deploy.fp8 import E4M3_MAX, Fp8Linear, fp8_layers
from quarl.quantize import formats


def _e4m3(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -E4M3_MAX, E4M3_MAX).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


def test_an_fp8_layer_is_the_e4m3_product_worked_by_hand():
    torch.manual_seed(0)
    linear = torch.nn.Linear(5, 3)  # 5 and 3: padded to 16 inside, which must change nothing
    with torch.no_grad():
        linear.weight.copy_(formats.get("fp8_e4m3").fake_quantize(linear.weight))  # a per-tensor fp8_e4m3 cell
    layer = Fp8Linear(linear)
    w = linear.weight.detach().double().numpy()
    assert torch.equal(layer.weight[:3, :5].float() * layer.weight_scale[:, None], linear.weight.detach())  # exact
    x = np.array([[0.3, -1.25, 2.0, 0.0, 7.5], [1e-3, 0.5, -0.5, 3.3, -2.2]], dtype=np.float32)
    amax = np.float32(np.abs(x).max()) / np.float32(E4M3_MAX)
    x_q = _e4m3(x / amax) * float(amax)
    want = x_q @ w.T + linear.bias.detach().double().numpy()
    got = layer(torch.from_numpy(x)).double().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert not np.allclose(got, x @ w.T + linear.bias.detach().double().numpy(), rtol=1e-6, atol=1e-6)


def test_per_channel_fp8_weights_are_stored_exactly_and_other_weights_per_channel():
    torch.manual_seed(1)
    linear = torch.nn.Linear(32, 8)
    with torch.no_grad():
        linear.weight.copy_(formats.get("fp8_e4m3", "per_channel").fake_quantize(linear.weight))
    layer = Fp8Linear(linear)
    assert torch.equal(layer.weight[:8, :32].float() * layer.weight_scale[:, None], linear.weight.detach())
    assert layer.weight_scale.unique().numel() == 8  # one scale a channel
    net = fp8_layers(torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2)))
    assert [type(m).__name__ for m in net] == ["Fp8Linear", "ReLU", "Fp8Linear"]
    assert net(torch.zeros(1, 4)).shape == (1, 2)
