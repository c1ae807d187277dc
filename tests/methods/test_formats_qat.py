"""QAT in a number format (quant.format, issue 57): the format's fake quantization on the weights
from quant.delay on with a straight-through gradient, the record's bits_per_weight and policy_bytes
as a PTQ format cell's, a policy key of each format's own, the default (int) leaving every QAT key
as it was, and the refusals in one sentence before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from stable_baselines3 import PPO

from quarl.config import method_registry
from quarl.config.cells import resolve
from quarl.config.keys import cell_key, policy_key, quant_spec
from quarl.quantize import fake_quant as qat
from quarl.quantize import formats
from quarl.quantize.weights import inference_layers
from quarl.rl.algos import sb3_class
from quarl.store import query as results
from tests.conftest import FAST, ROOT, compose_cfg, run_quarl
from tests.methods.test_formats_ptq import format_cells
from tests.test_run import log_of

#: a QAT cell of a few seconds: one PPO rollout (8 envs x 32 steps), fake quant on at step 128
QUICK = [*(a for a in FAST if not a.startswith("train.steps=")), "train.steps=256"]
#: the keys of a QAT cell before formats existed
INTEGER_KEYS = {"method", "bits", "scheme", "granularity", "quantize_bias", "act_bits", "delay", "freeze_after"}


def test_the_default_format_leaves_every_qat_key_as_it_was():
    plain, said = compose_cfg("quant=qat"), compose_cfg("quant=qat", "quant.format=int")
    assert plain.quant.format == "int" and set(quant_spec(plain)) == INTEGER_KEYS
    assert cell_key(plain) == cell_key(said) and policy_key(plain) == policy_key(said)
    assert method_registry.get("qat").policy_tag(plain.quant) == "-qat8"


def test_old_qat_records_keep_their_cell_and_policy_keys(monkeypatch):
    """The QAT records of docs/reproduction: today's composition of their sweep's command gives
    their cell and policy keys (a record trained on a GPU composed as on a machine with CUDA)."""
    checked = 0
    for path in sorted((ROOT / "docs/reproduction/records").glob("*.record.json")):
        run = json.loads(path.read_text())["run"]
        overrides = Path(run["run_dir"]).name.split(",")
        if run["quant"] != "qat" or run["status"] != "done" or "+sweep" not in run["run_dir"]:
            continue
        if not all("=" in o for o in overrides) or checked >= 5:
            continue
        cuda = run.get("training_device") == "cuda"
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        cfg = compose_cfg(*overrides)
        method_registry.settle(cfg, warn=False)
        assert (cell_key(cfg), policy_key(cfg)) == (run["cell_key"], run["policy_key"]), path.name
        checked += 1
    assert checked == 5


def test_each_format_trains_a_policy_of_its_own():
    keyed = {
        name: resolve(compose_cfg("quant=qat", *overrides), warn=False)
        for name, overrides in {
            "mxfp4": ["quant.format=mxfp4"],
            "nvfp4": ["quant.format=nvfp4"],
            "int4": ["quant.bits=4"],
        }.items()
    }
    assert len({policy_key(cfg) for _, cfg in keyed.values()}) == 3
    assert len({key for key, _ in keyed.values()}) == 3
    key, cfg = keyed["mxfp4"]
    assert cfg.quant.bits == 4 and cfg.quant.act_bits == 32  # implied, and recorded as run
    assert key == resolve(compose_cfg("quant=qat", "quant.format=mxfp4", "quant.bits=4"), warn=False)[0]
    qat_method = method_registry.get("qat")
    assert qat_method.policy_tag(cfg.quant) == "-qat-mxfp4" and qat_method.describe(cfg.quant) == "qat mxfp4"


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (["quant.format=mxfp4", "quant.bits=6"], "quant.bits=6 disagrees with quant.format=mxfp4, which implies 4-bit"),
        (["quant.format=fp4"], "quant.format=fp4 is not allowed: choose one of int, fp8_e4m3,"),
        (["quant.format=mxfp4", "quant.act_bits=8"], "quant.format=mxfp4 takes no integer activations or inputs"),
        (["quant.format=mxfp4", "quant.backend=auto"],
         "cannot run quant.format=mxfp4: use quant.backend=fake (quantize-dequantize)."),
        (["quant.format=nvfp4", "+quant.layer_bits={a: 4}"], "quant.layer_bits is not a setting of quant=qat"),
        (["quant.format=nf4", "quant.freeze_after=200"], "quant.freeze_after freezes integer ranges, which quant.f"),
    ],
)
def test_a_format_cell_qat_cannot_run_is_refused_in_one_sentence(scratch, overrides, said):
    done = run_quarl(scratch, *QUICK, "quant=qat", *overrides, check=False)
    assert done.returncode == 1, log_of(done)
    assert said in log_of(done) and "Traceback" not in log_of(done)
    assert not (scratch / "outputs/results.sqlite").exists()  # refused before anything ran: no record


@pytest.mark.parametrize("name", formats.names())
def test_the_gradient_passes_straight_through_the_format(name):
    """loss.backward() through a Linear whose weight goes through the format's fake quantization
    (as QAT's layer computes it) gives the weight the gradient of its quantized copy: the identity."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(40, 8)
    fmt = formats.get(name)
    layer = qat.QuantLayer(linear, compose_cfg("quant=qat").quant, lambda granularity: fmt)
    qat.set_switches({"layer": layer}, enabled=True)
    x, g = torch.randn(5, 40), torch.randn(5, 8)
    (layer(x) * g).sum().backward()
    quantized = fmt.fake_quantize(linear.weight.detach()).requires_grad_()
    (F.linear(x, quantized, linear.bias.detach()) * g).sum().backward()
    assert not torch.equal(quantized, linear.weight)  # the forward pass is quantized
    assert linear.weight.grad is not None and torch.equal(linear.weight.grad, quantized.grad)
    assert torch.allclose(linear.weight.grad, g.T @ x)


def test_qat_in_a_format_computes_in_fp32_until_the_delay_then_in_the_format():
    cfg = compose_cfg("quant=qat", "quant.format=mxfp4", "train.steps=256")
    model = PPO("MlpPolicy", gym.make("CartPole-v1"), n_steps=64, seed=0, device="cpu")
    hook = method_registry.get("qat").training_hook(model, cfg)
    assert hook is not None and hook.schedule.delay == 128  # half the budget, as integer QAT's
    layers = hook.schedule.layers
    assert layers and all(
        isinstance(layer.weight_fq, qat.FormatQuant) and layer.input_fq is None for layer in layers.values()
    )
    layer = next(iter(layers.values()))
    x = torch.randn(3, layer.layer.weight.shape[1])
    assert torch.equal(layer(x), F.linear(x, layer.layer.weight, layer.layer.bias))  # before the delay
    qat.set_switches(layers, enabled=True)
    quantized = formats.get("mxfp4").fake_quantize(layer.layer.weight)
    assert torch.equal(layer(x), F.linear(x, quantized, layer.layer.bias))


def _cells(scratch: Path, shared_policies: Path, *fmts: str) -> dict[str, object]:
    return format_cells(scratch, shared_policies, "qat", tuple(QUICK), *fmts)


def test_a_format_cell_trains_in_the_format_and_records_its_bits(scratch, shared_policies):
    cells = _cells(scratch, shared_policies, "mxfp4", "nvfp4")
    mxfp4, nvfp4 = cells["mxfp4"], cells["nvfp4"]
    assert mxfp4["status"] == nvfp4["status"] == "done"
    assert mxfp4["quant.bits"] == nvfp4["quant.bits"] == 4 and mxfp4["quant.act_bits"] == 32
    assert mxfp4["quant.delay"] == 128
    assert mxfp4["policy_key"] != nvfp4["policy_key"]  # two formats, two trained policies
    assert mxfp4["policy_dir"] != nvfp4["policy_dir"] and "-qat-mxfp4-" in str(mxfp4["policy_dir"])
    fp32 = results.load(scratch / "outputs/results.sqlite", quant="fp32").iloc[0]
    assert mxfp4["policy_key"] != fp32["policy_key"]
    folder = Path(mxfp4["policy_dir"])
    model = sb3_class(mxfp4["algo"]).load(folder / "model.zip", device="cpu")
    quant = resolve(compose_cfg("quant=qat", "quant.format=mxfp4"), warn=False)[1].quant
    method_registry.get("qat").restore(model, quant, folder)  # as the cell evaluated it
    shapes = [tuple(layer.weight.shape) for layer in inference_layers(model).values()]
    total_bits = sum(formats.bits_per_weight("mxfp4", s) * np.prod(s) for s in shapes)
    assert mxfp4["bits_per_weight"] == pytest.approx(total_bits / sum(np.prod(s) for s in shapes))
    biases = sum(4 * layer.bias.numel() for layer in inference_layers(model).values())  # fp32
    assert mxfp4["policy_bytes"] == sum(formats.nbytes("mxfp4", s) for s in shapes) + biases
    wrapped = [m for m in model.policy.modules() if isinstance(m, qat.QuantLayer)]
    assert wrapped and all(bool(layer.weight_fq.enabled) for layer in wrapped)
    fmt = formats.get("mxfp4")
    with torch.no_grad():
        for layer in wrapped:  # fp32 shadow weights are stored: the evaluated ones are the format's
            evaluated = layer.weight_fq(layer.layer.weight)
            assert torch.equal(fmt.fake_quantize(evaluated), evaluated)
        assert any(not torch.equal(layer.weight_fq(layer.layer.weight), layer.layer.weight) for layer in wrapped)
