"""PTQ of activations and inputs: calibrated static ranges, hand-worked numbers, disjoint seeds,
cell keys, bad input, and a tiny sweep that lands its ranges and its precision grids."""

import json
import sqlite3

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf, open_dict
from stable_baselines3 import DQN

from quarl.config.keys import cell_key
from quarl.config.schema import check
from quarl.deploy import acting_network
from quarl.errors import QuarlError
from quarl.evaluate.episodes import episode_seeds
from quarl.evaluate.greedy import GreedyActor
from quarl.quantize import calibration
from quarl.quantize.calibration import CalibratedFakeQuant, RangeObserver, calibration_seeds, quantize_activations
from quarl.quantize.weights import inference_layers, policy_bytes, quantize_policy
from tests.conftest import FAST, compose_cfg, quarl_cli, run_quarl


def test_fake_quant_of_a_calibrated_range_on_hand_worked_numbers():
    # [0, 1.5] at 2 bits: scale 0.5, zero point 0, levels 0, 0.5, 1, 1.5
    relu = CalibratedFakeQuant("l", 0.0, 1.5, 2)
    x = torch.tensor([0.7, 2.0, -0.3, 1.24, 1.26])
    assert relu(x).tolist() == pytest.approx([0.5, 1.5, 0.0, 1.0, 1.5])
    # [-1, 3] at 2 bits: scale 4/3, zero point round(0.75) = 1, levels -4/3, 0, 4/3, 8/3
    signed = CalibratedFakeQuant("l", -1.0, 3.0, 2)
    y = torch.tensor([1.0, -1.0, 3.0, 0.1])
    assert signed(y).tolist() == pytest.approx([4 / 3, -4 / 3, 8 / 3, 0.0])
    # a range that excludes 0 is widened to hold it (zero exactly representable): [2, 4] -> [0, 4]
    assert CalibratedFakeQuant("l", 2.0, 4.0, 8).scale.item() == pytest.approx(4 / 255)


def test_range_observer_minmax_and_percentile():
    obs = RangeObserver("minmax")
    obs.observe(torch.tensor([[1.0, -2.0], [0.5, 3.0]]))
    obs.observe(torch.tensor([7.0]))
    assert obs.range() == (-2.0, 7.0)
    pct = RangeObserver("percentile")
    values = torch.arange(100_001, dtype=torch.float32)  # 0..100000: the 0.01th / 99.99th percentiles are 10 / 99990
    for chunk in values.split(1000):
        pct.observe(chunk)
    assert pct.range() == pytest.approx((10.0, 99990.0))
    big = RangeObserver("percentile", cap=10_000)  # beyond the cap: a uniform sample, within a few %
    for chunk in values.split(1000):
        big.observe(chunk)
    lo, hi = big.range()
    assert big.count <= 10_000 and lo < 1000 and hi > 99_000


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
def test_calibration_seeds_are_disjoint_from_evaluation_seeds(seed):
    for eval_episodes in (1, 10, 100, 1000):
        cal = calibration_seeds(seed, 20, eval_episodes)
        assert len(set(cal)) == 20 and not set(cal) & set(episode_seeds(seed, eval_episodes))
    assert calibration_seeds(seed, 5, 10) == calibration_seeds(seed, 5, 10)  # deterministic


def test_a_calibration_seed_that_equals_an_evaluation_seed_is_skipped(monkeypatch):
    drawn = calibration_seeds(3, 4, 1)
    monkeypatch.setattr(calibration, "episode_seeds", lambda seed, n: drawn[:2])  # the stream's first two collide
    cal = calibration_seeds(3, 4, 2)
    assert not set(cal) & set(drawn[:2]) and cal[:2] == drawn[2:]


@pytest.fixture(scope="module")
def dqn():
    return DQN("MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [8, 8]}, seed=0, learning_starts=0,
               buffer_size=100)


def _ptq(**kw):
    quant = OmegaConf.structured(compose_cfg("quant=ptq").quant)
    with open_dict(quant):
        quant.update(kw)
    return quant


def test_quantized_activations_act_in_predict_and_in_the_acting_network(dqn):
    model = DQN("MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [8, 8]}, seed=1, buffer_size=100)
    model.policy.load_state_dict(dqn.policy.state_dict())
    names = list(inference_layers(model))
    ranges = {names[0]: (-2.0, 2.0), names[1]: (0.0, 1.0), names[2]: (0.0, 0.5)}
    obs = np.random.default_rng(0).uniform(-2.5, 2.5, size=(64, 4)).astype(np.float32)
    layers = [layer for layer in inference_layers(model).values()]
    quantize_activations(model, ranges, act=3, inputs=4)

    def fq(x, lo, hi, bits):  # by hand: affine, zero point on the grid, in float32 as the module computes
        scale = torch.tensor((hi - lo) / (2**bits - 1), dtype=torch.float32)
        zp = float(np.round(-lo / scale.item()))
        return (torch.clamp(torch.round(x * (1 / scale)) + zp, 0, 2**bits - 1) - zp) * scale

    with torch.no_grad():
        h = fq(torch.from_numpy(obs), -2.0, 2.0, 4)
        for i, layer in enumerate(layers):
            h = torch.nn.functional.linear(h, layer.weight, layer.bias)
            if i < 2:
                h = fq(torch.relu(h), *ranges[names[i + 1]], 3)
        q_values = model.policy.q_net(torch.from_numpy(obs))
    assert torch.equal(q_values, h)
    expected = h.argmax(dim=1).numpy()
    assert (model.predict(obs, deterministic=True)[0] == expected).all()
    assert (acting_network(model).act(obs) == expected).all()
    assert (GreedyActor(model, engine="onnx")(obs) == expected).all()
    assert (GreedyActor(model, engine="torch")(obs) == expected).all()
    with torch.no_grad():
        assert not torch.allclose(dqn.policy.q_net(torch.from_numpy(obs)), q_values, atol=1e-3)  # it did quantize


def test_layer_bits_quantize_named_layers_and_count_their_bytes(dqn):
    names = list(inference_layers(dqn))
    uniform8 = policy_bytes(dqn, _ptq(bits=8))
    mixed = _ptq(bits=8, layer_bits={names[0]: 2, names[1]: 4})
    assert policy_bytes(dqn, mixed) < uniform8
    w0 = inference_layers(dqn)[names[0]].weight
    expected = (w0.numel() * 2 + 7) // 8 + 8 + 4 * 8  # 2-bit weights + scale/zero point + fp32 bias
    assert (policy_bytes(dqn, _ptq(bits=32, layer_bits={names[0]: 2})) - policy_bytes(dqn, _ptq(bits=32))
            == expected - 4 * (w0.numel() + 8))
    with pytest.raises(QuarlError, match=r"quant.layer_bits names q_net.x, which this policy does not have: "
                                         r"its layers are q_net.q_net.0"):
        policy_bytes(dqn, _ptq(layer_bits={"q_net.x": 4}))


def test_default_ptq_cells_keep_their_keys():
    """A default PTQ cell (and one from a config written before these keys existed) has the key it had."""
    for overrides in (["quant=ptq"], ["quant=ptq", "quant.bits=4", "algo=ppo"],
                      ["quant=ptq", "quant.act_bits=32", "quant.input_bits=32"]):
        cfg = compose_cfg(*overrides)
        old = OmegaConf.create(OmegaConf.to_container(cfg))
        for key in ("input_bits", "calibration", "calibration_episodes", "layer_bits"):
            del old.quant[key]
        old.quant.act_bits = 8  # what a PTQ config held before: QAT's default, unused by PTQ
        assert cell_key(cfg) == cell_key(old)
    assert cell_key(compose_cfg("quant=ptq")) == cell_key(compose_cfg("quant=ptq", "quant.calibration=percentile"))
    keys = {cell_key(compose_cfg("quant=ptq", *o)) for o in (
        [], ["quant.act_bits=8"], ["quant.input_bits=8"], ["quant.act_bits=8", "quant.calibration=percentile"],
        ["quant.act_bits=8", "quant.calibration_episodes=3"], ["quant.layer_bits={q_net.q_net.0:4}"])}
    assert len(keys) == 6


@pytest.mark.parametrize("override, message", [
    ("quant.act_bits=1", "quant.act_bits=1 is out of range: use 2..16, or 32"),
    ("quant.input_bits=17", "quant.input_bits=17 is out of range: use 2..16, or 32"),
    ("quant.calibration_episodes=0", "quant.calibration_episodes=0 must be a positive number of episodes"),
    ("quant.calibration=mean", "quant.calibration=mean is not allowed: choose one of minmax, percentile"),
    ("quant.layer_bits={q_net.q_net.0:1}", "quant.layer_bits.q_net.q_net.0=1 is out of range: use 2..16, or 32"),
    ("quant.layer_bits={q_net.q_net.7:4}", "quant.layer_bits names q_net.q_net.7, which this policy does not have: "
                                           "its layers are q_net.q_net.0, q_net.q_net.2, q_net.q_net.4"),
])
def test_bad_input_is_one_sentence_before_anything_runs(override, message):
    with pytest.raises(QuarlError, match=message.replace(".", r"\.")):
        check(compose_cfg("quant=ptq", "algo=dqn", override))


def test_bad_layer_name_in_a_run_writes_nothing(scratch):
    done = run_quarl(scratch, "algo=dqn", "quant=ptq", "quant.layer_bits={q_net.q_net.7:4}", *FAST, check=False)
    assert done.returncode == 1 and "quant.layer_bits names q_net.q_net.7" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr and not (scratch / "outputs" / "results.sqlite").exists()
    assert not (scratch / "outputs" / "policies").exists()


def test_tiny_sweep_lands_records_with_ranges_and_precision_grids(scratch):
    run_quarl(scratch, "-m", "algo=dqn", "env=cartpole", "quant=ptq", "quant.act_bits=4,8,32",
              "quant.input_bits=4,8,32", "quant.calibration_episodes=2", *FAST)
    con = sqlite3.connect(scratch / "outputs" / "results.sqlite")
    rows = con.execute('SELECT "quant.act_bits", "quant.input_bits", act_ranges, action_agreement FROM runs '
                       "WHERE quant = 'ptq' AND status = 'done'").fetchall()
    assert len(rows) == 9
    for act, inp, ranges, agreement in rows:
        assert 0 < agreement <= 1  # measured on every record; its level follows the briefly trained weights
        if act == inp == 32:
            assert ranges is None
            continue
        ranges = json.loads(ranges)
        assert {r["role"] for r in ranges.values()} == (({"input"} if inp < 32 else set())
                                                        | ({"activation"} if act < 32 else set()))
        for r in ranges.values():
            assert r["bits"] == (inp if r["role"] == "input" else act)
        if act < 32:  # activations after ReLU: ranges start at 0
            assert all(r["lo"] == 0 for r in ranges.values() if r["role"] == "activation")
    done = quarl_cli(scratch, "collate", "--out", "coll", "--formats", "png")
    assert done.returncode == 0, done.stderr
    grid = (scratch / "coll" / "precision" / "dqn_cartpole.md").read_text()
    assert "weight bits x activation bits" in grid and "input bits x activation bits (weights 8 bits)" in grid
    assert (scratch / "coll" / "precision" / "dqn_cartpole.png").exists()


def test_onnx_int8_runs_static_int8_with_the_calibrated_ranges():
    """Weights, activations and inputs at 8 bits: onnx_int8 quantizes every weight layer's input with
    exactly the calibrated scale and zero point (static QDQ), and acts as the fake-quant policy."""
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    from quarl.deploy import compile_network

    model = DQN("MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [32, 32]}, seed=2, buffer_size=100)
    names = list(inference_layers(model))
    ranges = {names[0]: (-2.5, 2.5), names[1]: (0.0, 1.0), names[2]: (0.0, 0.8)}
    quant = _ptq(bits=8, scheme="symmetric", granularity="per_channel", act_bits=8, input_bits=8)
    quantize_policy(model, quant, calibrate=lambda _: ranges)  # weights on ONNX Runtime's own int8 grid
    net = acting_network(model)
    obs = np.random.default_rng(1).uniform(-2.5, 2.5, size=(2000, 4)).astype(np.float32)
    runner = compile_network(net, "onnx_int8", obs[:256])
    graph = onnx.load_model_from_string(runner.onnx_model).graph
    values = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    scales = [float(values[n.input[1]]) for n in graph.node if n.op_type == "QuantizeLinear"]
    expected = [m.scale.item() for m in net.modules() if isinstance(m, CalibratedFakeQuant)]
    assert scales == pytest.approx(expected, rel=1e-6) and len(scales) == 3
    # the same arithmetic up to float rounding, which moves a value across a level boundary now and
    # then; this untrained network's Q-values are nearly tied, so a few greedy actions flip
    assert np.mean(runner(obs) == net.act(obs)) >= 0.95


def test_collation_reads_ptq_records_from_before_activation_quantization_as_fp32_activations():
    import pandas as pd

    from quarl.collate.frame import Notes, _variant_labels

    done = pd.DataFrame({
        "quant": ["ptq", "ptq", "ptq", "ptq"],
        "quant.bits": [8, 8, 8, 8],
        "quant.act_bits": [8, 32, 4, 32],  # the first: written before PTQ had activation bits (QAT's 8, unused)
        "quant.input_bits": [None, 32, 32, 32],
        "quant.layer_bits.q_net.q_net.0": [None, None, None, 4],
    })
    labels = _variant_labels(done, Notes()).tolist()
    assert labels[0] == labels[1] != labels[2] != labels[3]
    assert "act_bits=4" in labels[2] and '"q_net.q_net.0": 4' in labels[3]
