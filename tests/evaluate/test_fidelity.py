"""Measurement fixes: numbers that do not depend on settings outside the cell key, E n/a near a
zero fp32 reward, and action fidelity stored with every quantized record."""

import numpy as np
import pytest
from gymnasium import spaces

from quarl.evaluate.fidelity import AGREEMENT_TOLERANCE, compare, relative_error
from quarl.store import query as results
from tests.conftest import run_quarl

# Every action is computed from its own observation alone (quarl.evaluate.episodes), so these are equal bit
# for bit for any eval.n_envs: the executed policy's, and the fake-quant and fp32 evaluations'.
SAME = ["backend_reward", "backend_action_agreement", "backend_action_mad", "backend_bytes", "policy_bytes",
        "action_agreement", "action_mad", "reward_mean", "fp32_reward", "rel_error"]


def test_executed_int8_policy_gives_the_same_numbers_for_any_n_envs(scratch):
    """Dynamic int8 picks its activation scale per call: batching episodes together would let one
    episode's observations change another's actions, so `eval.n_envs` (not in the cell key) would
    change `backend_reward`; batched torch kernels would change the fake-quant rewards in their last
    bits. Continuous actions make any such change visible in the reward."""
    args = ["algo=ddpg", "env=pendulum", "train.steps=600", "eval.episodes=4", "quant.bits=8",
            "quant.backend=onnx_int8", "hydra.callbacks.collate.enabled=false"]
    rows = []
    for n_envs in (1, 4):
        run_quarl(scratch, *args, f"eval.n_envs={n_envs}", "force=true")
        rows.append(results.load(scratch / "outputs/results.sqlite", quant="ptq").iloc[0])
    one, four = rows
    for column in SAME:
        assert one[column] == four[column], column
    assert one["action_mad"] > 0 and 0 < one["backend_action_agreement"] <= 1


@pytest.mark.parametrize(
    "fp32, quantized, scale, expected",
    [
        (200.0, 150.0, 500.0, 0.25),
        (-100.0, -150.0, 500.0, 0.5),  # negative rewards: E > 0 is still a loss
        (-0.03, -5.0, 100.0, None),  # a DDPG that never learned MountainCarContinuous
        (1e-9, 5.0, None, -5e9),  # without a stated scale only an exact 0 is n/a
        (0.0, 5.0, None, None),
        (2.0, 1.0, 100.0, None),  # |R_fp32| = 2% of the scale: on the floor, n/a
        (2.5, 1.0, 100.0, 0.6),
    ],
)
def test_relative_error_is_na_near_zero_fp32_reward(fp32, quantized, scale, expected):
    error, note = relative_error(fp32, quantized, scale)
    if expected is None:
        assert error is None and "E is n/a" in note
    else:
        assert error == pytest.approx(expected) and note is None


def test_failed_fp32_policy_stores_e_as_na_with_its_reason(scratch):
    """A policy that never leaves MountainCarContinuous's start scores about 0: E must not divide by it."""
    run_quarl(scratch, "algo=ddpg", "env=mountaincar_continuous", "train.steps=300", "eval.episodes=2",
              "quant.bits=2", "hydra.callbacks.collate.enabled=false")
    cell = results.load(scratch / "outputs/results.sqlite", quant="ptq").iloc[0]
    if abs(cell["fp32_reward"]) < 2.0:
        assert np.isnan(cell["rel_error"]) and "too close to 0" in cell["rel_error_note"]
    else:  # the untrained policy happened to move: then E is an ordinary number
        assert np.isfinite(cell["rel_error"])


def test_action_agreement_hand_worked():
    discrete = spaces.Discrete(3)
    assert compare(np.array([0, 1, 2, 2]), np.array([0, 1, 1, 2]), discrete) == (0.75, None)
    box = spaces.Box(low=np.array([-2.0, 0.0]), high=np.array([2.0, 1.0]))  # ranges 4 and 1
    reference = np.array([[0.0, 0.5], [1.0, 0.5]])
    actions = np.array([[0.1, 0.5], [1.0, 0.6]])  # |diff| / range: (0.025, 0), (0, 0.1)
    agreement, mad = compare(reference, actions, box)
    assert agreement == 0.5 and AGREEMENT_TOLERANCE == 0.05  # only the first state is within 5% everywhere
    assert mad == pytest.approx((0.025 + 0 + 0 + 0.1) / 4)


def test_ptq_sweep_stores_action_agreement_that_grows_with_bits(scratch):
    """On a trained policy, 8-bit weights act like fp32 at least as often as 2-bit weights do, and far
    more often than a policy that ignores the state could. The briefly trained DQN's weights follow
    the CPU's floating-point kernels (8-bit agreement 0.87 on one Xeon, above 0.9 elsewhere): the
    bar is what chance cannot reach, not a number one machine gave."""
    run_quarl(scratch, "-m", "algo=dqn", "env=cartpole", "train.steps=8000", "eval.episodes=10", "quant.bits=2,8",
              "quant.granularity=per_tensor", "hydra.callbacks.collate.enabled=false")
    runs = results.load(scratch / "outputs/results.sqlite", quant="ptq").set_index("quant.bits")
    assert set(runs.index) == {2, 8} and (runs["agreement_states"] > 0).all()
    assert runs.loc[8, "action_agreement"] >= runs.loc[2, "action_agreement"]
    states = runs.loc[8, "agreement_states"]
    chance = 0.5 + 4 * np.sqrt(0.25 / states)  # two actions: a coin agrees half the time, 4 SDs above
    assert runs.loc[8, "action_agreement"] > chance
    assert runs["action_kl"].isna().all()  # DQN acts greedily: no distribution to compare


def test_actor_policy_evaluation_does_not_depend_on_n_envs():
    """ActorQ's int8 actors run one observation per call: so is `actor_reward` evaluated (the
    batched evaluation is shown to differ, so the test can tell the two apart)."""
    from types import SimpleNamespace

    import torch

    from quarl.actorq import execution, params
    from quarl.actorq.cell import GreedyPolicy
    from quarl.actorq.networks import policy_network
    from quarl.evaluate.episodes import evaluate
    from tests.conftest import compose_cfg

    torch.manual_seed(0)
    net = policy_network(3, [256, 256], 1)
    shapes = params.layer_shapes(net)
    layers = execution.convert(params.unpack(params.ParameterQuantizer(shapes, 8).pack(net), shapes, 8), 8)
    settings = SimpleNamespace(actor=SimpleNamespace(squash=True), action_low=[-2.0], action_high=[2.0])
    policy = GreedyPolicy(execution.build(layers, 8, squash=True), settings)
    env = compose_cfg("env=pendulum").env

    def reward(n_envs: int, per_observation: bool) -> list[float]:
        return evaluate(policy, env, episodes=4, seed=0, n_envs=n_envs, per_observation=per_observation).rewards

    assert reward(1, True) == reward(4, True)
    assert reward(1, False) != reward(4, False)  # one activation scale for four episodes changes actions


def test_settings_outside_the_keys_do_not_change_a_trained_policy(tmp_path):
    """train.checkpoint_every is left out of the policy key: saving checkpoints must leave the
    trained weights exactly as they are."""
    import torch
    from stable_baselines3 import DQN

    from quarl.train.trainer import train
    from tests.conftest import compose_cfg

    weights = []
    for i, overrides in enumerate((["train.checkpoint_every=0"], ["train.checkpoint_every=100"])):
        cfg = compose_cfg("algo=dqn", "train.steps=600", *overrides)
        folder = tmp_path / f"policy{i}"
        folder.mkdir()
        train(cfg, folder, progress=False, checkpoints=tmp_path / f"ckpt{i}")
        weights.append(DQN.load(folder / "model.zip").policy.state_dict())
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_a_gpu_training_is_another_policy_and_a_cpu_one_keeps_its_key(monkeypatch):
    import torch

    from quarl.config.keys import policy_key
    from tests.conftest import compose_cfg

    cpu = policy_key(compose_cfg("train.device=cpu"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert policy_key(compose_cfg("train.device=auto")) == cpu  # auto without a GPU trains on the CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert policy_key(compose_cfg("train.device=auto")) != cpu
