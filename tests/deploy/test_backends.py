"""Real low-precision execution: acting networks reproduce `predict`, int8 runners agree with the
fake-quant policy, exported ONNX files act without quarl, and mistakes give clear errors."""

import json
import logging
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn as nn
from gymnasium import spaces
from omegaconf import OmegaConf
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from quarl.config import backend_registry
from quarl.config.schema import EnvConfig
from quarl.deploy import CHOICES, compile_network, compile_policy, execution, export, measure
from quarl.deploy.acting import acting_network
from quarl.errors import QuarlError
from quarl.quantize import fake_quant as qat
from quarl.quantize.weights import quantize_policy
from quarl.rl.envs import random_observations
from tests.conftest import ROOT  # noqa: E402

PTQ8 = OmegaConf.create(dict(method="ptq", bits=8, scheme="affine", granularity="per_tensor", quantize_bias=False))


def rollout_obs(env_id: str, n: int = 256, seed: int = 0) -> np.ndarray:
    """Observations the policy meets: states of random-action episodes."""
    return random_observations(env_id, n, seed)


def reload(model, tmp_path: Path, name: str):
    """A fresh copy of `model` (safe to quantize in place)."""
    model.save(tmp_path / name)
    return type(model).load(tmp_path / f"{name}.zip", device="cpu")


@pytest.fixture(scope="module")
def trained():
    """Briefly trained policies (a few seconds in all), so Q-values and logits are not all ties."""
    models = {
        "dqn_cartpole": DQN("MlpPolicy", "CartPole-v1", learning_starts=200, train_freq=1, target_update_interval=100,
                            policy_kwargs=dict(net_arch=[64, 64]), seed=0, device="cpu").learn(1500),
        "ppo_cartpole": PPO("MlpPolicy", "CartPole-v1", n_steps=256, batch_size=64, n_epochs=4, seed=0,
                            device="cpu").learn(1024),
        "ppo_pendulum": PPO("MlpPolicy", "Pendulum-v1", n_steps=256, batch_size=64, n_epochs=4, seed=0,
                            device="cpu").learn(1024),
        "ddpg_pendulum": DDPG("MlpPolicy", "Pendulum-v1", learning_starts=100, policy_kwargs=dict(net_arch=[64, 64]),
                              seed=0, device="cpu").learn(400),
    }
    return models


# --- acting_network reproduces SB3's deterministic predict -----------------------------------------


@pytest.mark.parametrize(
    "make, env_id",
    [
        (lambda: DQN("MlpPolicy", "CartPole-v1", seed=1, device="cpu"), "CartPole-v1"),
        (lambda: PPO("MlpPolicy", "CartPole-v1", seed=1, device="cpu"), "CartPole-v1"),
        (lambda: A2C("MlpPolicy", "Acrobot-v1", seed=1, device="cpu"), "Acrobot-v1"),
        (lambda: PPO("MlpPolicy", "Pendulum-v1", seed=1, device="cpu"), "Pendulum-v1"),
        (lambda: PPO("MlpPolicy", "Pendulum-v1", use_sde=True, policy_kwargs=dict(squash_output=True), seed=1,
                     device="cpu"),
         "Pendulum-v1"),
        (lambda: DDPG("MlpPolicy", "Pendulum-v1", seed=1, device="cpu"), "Pendulum-v1"),
        (lambda: SAC("MlpPolicy", "MountainCarContinuous-v0", seed=1, device="cpu"), "MountainCarContinuous-v0"),
    ],
)
def test_acting_network_reproduces_predict_exactly(make, env_id):
    model = make()
    obs = rollout_obs(env_id, 128)
    # untrained actor-critic policies output almost nothing: widen their action layer so the test
    # covers clipping and squashing, not only a mean near 0
    with torch.no_grad():
        for p in model.policy.parameters():
            p.mul_(3.0)
    net = acting_network(model)
    expected, _ = model.predict(obs, deterministic=True)
    actions = net.act(obs)
    assert actions.dtype == expected.dtype and actions.shape == expected.shape
    assert np.array_equal(actions, expected)
    one = net.act(obs[0])  # one observation: a batch of one
    assert np.array_equal(one[0], model.predict(obs[0], deterministic=True)[0])


def test_acting_network_reproduces_a_qat_policy_with_its_fake_quantized_weights_and_activations():
    quant = OmegaConf.create(dict(method="qat", bits=4, act_bits=6, scheme="symmetric", granularity="per_channel",
                                  quantize_bias=False))
    model = DQN("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=[64, 64]), seed=0, device="cpu")
    layers = qat.attach(model, quant)
    obs = rollout_obs("CartPole-v1", 256)
    with torch.no_grad():
        model.policy.q_net(torch.from_numpy(obs * 3))  # observe activation ranges
    qat.set_switches(layers, enabled=True, frozen=True)
    net = acting_network(model)
    with torch.no_grad():
        q_policy = model.policy.q_net(torch.from_numpy(obs))
        q_net = net.body(net.prep(torch.from_numpy(obs)))
    assert torch.equal(q_policy, q_net)
    # the folded weights are the 4-bit ones: at most 15 levels per output channel
    linear = [m for m in net.body.modules() if isinstance(m, nn.Linear)]
    assert all(len(torch.unique(row)) <= 15 for m in linear for row in m.weight)
    assert np.array_equal(net.act(obs), model.predict(obs, deterministic=True)[0])
    # the int8 backend replaces the activation fake quants with its own and still agrees
    runner = compile_network(net, "onnx_int8", obs)
    assert (runner(obs) == net.act(obs)).mean() >= 0.95


def test_vecnormalize_is_folded_into_the_network():
    venv = VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0), clip_obs=2.0)
    model = PPO("MlpPolicy", venv, n_steps=128, n_epochs=2, seed=0, device="cpu").learn(512)
    venv.training = False
    raw = rollout_obs("CartPole-v1", 256) * 2
    expected, _ = model.predict(venv.normalize_obs(raw), deterministic=True)
    for transform in (venv, venv.normalize_obs):
        net = acting_network(model, transform)
        with torch.no_grad():
            normalized = net.prep(torch.from_numpy(raw)).numpy()
        assert np.allclose(normalized, venv.normalize_obs(raw), atol=1e-5)
        assert np.abs(normalized).max() <= 2.0
        assert np.array_equal(net.act(raw), expected)
    with pytest.raises(QuarlError, match="cannot be folded"):
        acting_network(model, lambda o: o)


# --- int8 execution agrees with the fake-quant (PTQ 8-bit) policy ---------------------------------


@pytest.mark.parametrize("name, env_id", [("dqn_cartpole", "CartPole-v1"), ("ppo_cartpole", "CartPole-v1")])
def test_int8_actions_agree_with_fake_quant_policy_discrete(trained, tmp_path, name, env_id):
    model = reload(trained[name], tmp_path, name)
    quantize_policy(model, PTQ8)
    obs = rollout_obs(env_id, 512, seed=3)
    fake_quant, _ = model.predict(obs, deterministic=True)
    runner = compile_policy(model, "onnx_int8", obs)
    assert runner.backend == "onnx_int8" and runner.precision == "int8"
    int8 = runner(obs)
    assert int8.dtype == np.int64 and int8.shape == fake_quant.shape
    assert (int8 == fake_quant).mean() >= 0.95
    assert len(np.unique(fake_quant)) > 1  # a policy that always does the same thing proves nothing


@pytest.mark.parametrize("name", ["ppo_pendulum", "ddpg_pendulum"])
def test_int8_actions_agree_with_fake_quant_policy_continuous(trained, tmp_path, name):
    model = reload(trained[name], tmp_path, name)
    quantize_policy(model, PTQ8)
    obs = rollout_obs("Pendulum-v1", 512, seed=3)
    fake_quant, _ = model.predict(obs, deterministic=True)
    int8 = compile_policy(model, "onnx_int8", obs)(obs)
    span = float(model.action_space.high[0] - model.action_space.low[0])
    error = np.abs(int8 - fake_quant) / span
    assert int8.dtype == np.float32 and int8.shape == fake_quant.shape
    assert error.max() <= 0.05 and error.mean() <= 0.01
    assert fake_quant.std() > 1e-3  # the actions vary


@pytest.mark.parametrize("backend, tolerance",
                         [("torch", 0.0), ("onnx", 1e-5), ("torch_fp16", 0.02), ("torch_bf16", 0.05)])
def test_float_backends_agree_with_the_policy(trained, backend, tolerance):
    model = trained["ppo_pendulum"]
    obs = rollout_obs("Pendulum-v1", 256, seed=4)
    expected, _ = model.predict(obs, deterministic=True)
    runner = compile_policy(model, backend, obs)
    assert runner.precision == execution.BACKENDS[backend]
    assert np.abs(runner(obs) - expected).max() <= tolerance * 4.0  # Pendulum's action span is 4


def test_int8_bytes_are_a_quarter_of_fp32_and_half_precision_a_half():
    model = PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=dict(pi=[256, 256, 256], vf=[8])), seed=0,
                device="cpu")
    with torch.no_grad():  # SB3 initialises biases to 0 and ONNX drops zero tensors: make them real
        for name, p in model.policy.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.1, 0.1)
    net = acting_network(model)
    fp32 = compile_network(net, "torch").nbytes
    assert abs(compile_network(net, "onnx").nbytes - fp32) <= 64  # + the head's few constants
    assert 3.8 <= fp32 / compile_network(net, "onnx_int8").nbytes <= 4.0
    assert compile_network(net, "torch_fp16").nbytes == fp32 // 2


class Frames(gym.Env):
    """Atari-shaped observations (4 stacked 84x84 frames) for a Nature CNN policy."""

    observation_space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    action_space = spaces.Discrete(6)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


def test_cnn_int8_is_static_and_calibrated(tmp_path):
    model = PPO("CnnPolicy", Frames(), n_steps=8, batch_size=8, seed=0, device="cpu")
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (128, 4, 84, 84), dtype=np.uint8)
    net = acting_network(model)
    assert net.obs_dtype == np.uint8
    expected, _ = model.predict(frames, deterministic=True)
    assert np.array_equal(net.act(frames), expected)
    runner = compile_network(net, "onnx_int8", frames)
    import onnx

    ops = {n.op_type for n in onnx.load_model_from_string(runner.onnx_model).graph.node}
    assert "QuantizeLinear" in ops and "DynamicQuantizeLinear" not in ops  # static QDQ
    assert (runner(frames) == expected).mean() >= 0.9
    with pytest.raises(QuarlError, match="calibration observations"):
        compile_network(net, "onnx_int8")
    target = tmp_path / "cnn.onnx"
    with pytest.raises(QuarlError, match="calibration observations"):
        export(model, target, precision="int8")
    assert list(tmp_path.iterdir()) == []  # nothing half-written


# --- export: a standalone file ---------------------------------------------------------------------

STANDALONE = """
import sys, json
import numpy as np, onnxruntime as ort
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
meta = session.get_modelmeta().custom_metadata_map
obs = np.load(sys.argv[2]).astype(meta["quarl.obs_dtype"])
np.save(sys.argv[3], session.run(["action"], {"obs": obs})[0])
print(json.dumps(sorted(m for m in ("quarl", "stable_baselines3", "torch") if m in sys.modules)))
"""


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_exported_policy_acts_in_a_fresh_process_without_quarl(trained, tmp_path, precision):
    venv = VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0))
    model = PPO("MlpPolicy", venv, n_steps=128, n_epochs=2, seed=0, device="cpu").learn(256)
    venv.training = False
    obs = rollout_obs("CartPole-v1", 256, seed=5)
    path = export(model, tmp_path / "policy.onnx", precision=precision, obs_transform=venv, calibration_obs=obs)
    np.save(tmp_path / "obs.npy", obs)
    done = subprocess.run([sys.executable, "-c", STANDALONE, str(path), str(tmp_path / "obs.npy"),
                           str(tmp_path / "act.npy")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []  # neither quarl, SB3 nor torch imported
    actions = np.load(tmp_path / "act.npy")
    runner = compile_policy(model, {"fp32": "onnx", "int8": "onnx_int8"}[precision], obs, obs_transform=venv)
    assert np.array_equal(actions, runner(obs))
    expected, _ = model.predict(venv.normalize_obs(obs), deterministic=True)
    assert (actions == expected).mean() >= (1.0 if precision == "fp32" else 0.95)


def test_example_script_acts_in_the_env_stored_in_the_file(trained, tmp_path):
    path = export(trained["ppo_cartpole"], tmp_path / "policy.onnx")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "act_onnx.py"), str(path), "--episodes", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "env CartPole-v1" in done.stdout and done.stdout.count("return") == 2


def test_export_refuses_an_existing_path_and_leaves_it_untouched(trained, tmp_path):
    target = tmp_path / "policy.onnx"
    target.write_bytes(b"someone's file")
    with pytest.raises(QuarlError, match="already exists: choose another path or delete it"):
        export(trained["ppo_cartpole"], target)
    assert target.read_bytes() == b"someone's file"
    assert [p.name for p in tmp_path.iterdir()] == ["policy.onnx"]
    with pytest.raises(QuarlError,
                       match="precision=int3 is not supported for export: choose one of fp32, int8, int4, int2"):
        export(trained["ppo_cartpole"], tmp_path / "other.onnx", precision="int3")
    with pytest.raises(QuarlError, match="must end in .onnx"):
        export(trained["ppo_cartpole"], tmp_path / "policy.bin")
    assert [p.name for p in tmp_path.iterdir()] == ["policy.onnx"]


# --- backends: choice, fallback and errors --------------------------------------------------------


def test_missing_backend_package_is_a_clear_error(trained, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    net = acting_network(trained["ppo_cartpole"])
    for backend in ("onnx", "onnx_int8"):
        with pytest.raises(QuarlError, match="needs the Python package onnxruntime.*pip install onnxruntime"):
            compile_network(net, backend)
    with caplog.at_level(logging.WARNING, logger="quarl.deploy.execution"):
        runner = compile_network(net, "auto")
    assert runner.backend == "torch" and "not installed" in caplog.text


def test_a_layer_int8_cannot_quantize_is_named(trained):
    net = acting_network(trained["ppo_cartpole"])
    net.body[1].insert(1, nn.LayerNorm(64))  # after the first Linear of the policy net
    with pytest.raises(QuarlError, match=r"cannot quantize layer body\.1\.1 \(LayerNorm\)"):
        compile_network(net, "onnx_int8")
    assert compile_network(net, "torch_fp16").precision == "fp16"  # float backends run it


def test_unknown_backend_names_the_choices(trained):
    with pytest.raises(QuarlError, match=f"backend=int4 is not known: choose one of {', '.join(CHOICES)}."):
        compile_policy(trained["ppo_cartpole"], "int4")


@pytest.mark.parametrize("int8_ms, chosen", [(0.5, "onnx_int8"), (0.95, "onnx"), (3.0, "onnx")])
def test_auto_runs_int8_only_where_it_is_faster_and_says_why(trained, monkeypatch, caplog, int8_ms, chosen):
    monkeypatch.setattr(execution, "quick_median_ms",
                        lambda runners, obs: {"torch": 2.0, "onnx": 1.0, "onnx_int8": int8_ms})
    with caplog.at_level(logging.INFO, logger="quarl.deploy.execution"):
        runner = compile_policy(trained["dqn_cartpole"], "auto")
    assert runner.backend == chosen
    assert runner.timings_ms == {"torch": 2.0, "onnx": 1.0, "onnx_int8": int8_ms}
    if chosen == "onnx":
        assert "falling back to fp32 on onnx" in runner.reason
        assert any(r.levelno == logging.WARNING and "not faster than fp32" in r.message for r in caplog.records)
    else:
        assert "running int8" in runner.reason


def test_auto_exports_its_candidates_network_once(trained, monkeypatch):
    """backend=auto builds onnx, onnx_int8, onnx_int4 and onnx_int2 runners of one network (a float policy:
    int8 needs no copy without activation fake quants): one export; outside auto, every call exports."""
    from torch.onnx._internal.exporter import _core

    from quarl.deploy import onnx_io

    exported = []
    real = _core.export
    monkeypatch.setattr(_core, "export", lambda net, *a, **k: exported.append(net) or real(net, *a, **k))
    net = acting_network(trained["dqn_cartpole"])
    runner = compile_network(net, "auto")
    assert set(runner.timings_ms) >= {"onnx", "onnx_int8"} and exported == [net]
    example = np.zeros((1, 4), np.float32)
    assert onnx_io.to_onnx(net, example) == onnx_io.to_onnx(net, example) and exported == [net] * 3


def test_measure_is_one_thread_and_restores_the_thread_count(trained):
    runner = compile_policy(trained["ppo_cartpole"], "torch")
    before = torch.get_num_threads()
    result = measure(runner, rollout_obs("CartPole-v1", 4), warmup=5, calls=50)
    assert torch.get_num_threads() == before
    assert result["threads"] == 1 and result["calls"] == 50
    assert 0 < result["median_ms"] <= result["p90_ms"]


def test_a_runner_stands_in_for_the_model_in_quarl_evaluate(trained):
    from quarl.evaluate.episodes import evaluate

    env_cfg = OmegaConf.structured(EnvConfig(name="cartpole", id="CartPole-v1"))
    model = trained["ppo_cartpole"]
    reference = evaluate(model, env_cfg, episodes=3, seed=0, n_envs=3)
    runner = compile_policy(model, "torch")
    assert evaluate(runner, env_cfg, episodes=3, seed=0, n_envs=3).rewards == reference.rewards
    obs = rollout_obs("CartPole-v1", 2)
    assert runner.predict(obs[0])[0].shape == () and runner.predict(obs)[0].shape == (2,)
    with pytest.raises(QuarlError, match="eval.deterministic=true"):
        runner.predict(obs, deterministic=False)


@pytest.mark.parametrize("backend", list(backend_registry.registry()))
def test_every_backend_runs_an_evaluation_of_a_policy_it_accepts(trained, tmp_path, backend):
    """Each registered backend executes the PPO CartPole policy, PTQ-quantized to its widest weights
    where it takes integer policies only (calibrated on visited states where it calibrates), through
    two evaluation episodes; where its package or compiler is missing, the skip names it."""
    from quarl.evaluate.episodes import evaluate

    spec = backend_registry.get(backend)
    model = reload(trained["ppo_cartpole"], tmp_path, backend)
    if spec.max_bits is not None:
        quantize_policy(model, OmegaConf.merge(PTQ8, {"bits": spec.max_bits}))
    if spec.formats:  # a backend of a number format's cells: the policy in its first format
        quantize_policy(model, OmegaConf.merge(PTQ8, {"format": spec.formats[0]}))
    obs = rollout_obs("CartPole-v1", 256, seed=5)
    try:
        runner = compile_policy(model, backend, obs)
    except QuarlError as exc:
        if "is not installed" not in str(exc):
            raise
        pytest.skip(str(exc))
    assert runner.backend == backend and runner.precision == spec.precision
    env_cfg = OmegaConf.structured(EnvConfig(name="cartpole", id="CartPole-v1"))
    episodes = evaluate(runner, env_cfg, episodes=2, seed=0, n_envs=2)
    assert len(episodes.rewards) == 2 and all(np.isfinite(episodes.rewards))
    fake_quant, _ = model.predict(obs, deterministic=True)
    assert np.mean(runner(obs) == fake_quant) >= 0.8  # it executes this policy
