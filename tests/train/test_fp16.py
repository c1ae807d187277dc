"""float16 DQN updates with loss scaling (quarl.train.fp16): the scaled update is the float32 update
within float16's precision, clipping sees the unscaled gradients, and an inf skips the step."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from stable_baselines3 import DQN

from quarl.train.fp16 import FP16DQN
from quarl.train.stopping import StopAtReturn

LR = 0.05


def tiny_dqn(max_grad_norm: float = 10.0, optimizer: type = torch.optim.SGD, learning_rate: float = LR,
             **kwargs) -> FP16DQN:
    """A 4-16-2 Q-network on CartPole with a replay buffer of 300 random transitions and no update yet."""
    model = FP16DQN(
        "MlpPolicy",
        "CartPole-v1",
        learning_rate=learning_rate,
        buffer_size=1000,
        learning_starts=10_000,
        max_grad_norm=max_grad_norm,
        policy_kwargs={"net_arch": [16], "optimizer_class": optimizer},
        seed=0,
        device="cpu",
        **kwargs,
    )
    model.learn(300)  # fills the buffer (and sets the logger); learning_starts keeps it from training
    assert model._n_updates == 0
    return model


def _params(model: DQN) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.q_net.parameters()]


def _update(model: FP16DQN, fp16: bool) -> list[torch.Tensor]:
    """One update on batch 0 from the model's present weights (restored afterwards): the parameters' change."""
    before = _params(model)
    np.random.seed(0)  # SB3's replay buffer samples with numpy's global generator: the same batch
    model.train(1, batch_size=32) if fp16 else DQN.train(model, 1, batch_size=32)
    after = _params(model)
    with torch.no_grad():
        for p, b in zip(model.q_net.parameters(), before):
            p.copy_(b)
    return [a - b for a, b in zip(after, before)]


@pytest.mark.parametrize("max_grad_norm", [100.0, 1e-3], ids=["unclipped", "clipped"])
def test_the_scaled_fp16_update_is_the_fp32_update(max_grad_norm):
    """Plain SGD, so an update is -lr x the clipped gradient: the fp16 update matches SB3's fp32 one
    to float16's precision (the scale, 65536, is divided out). Clipped at 1e-3, the whole update's
    norm is lr x 1e-3 in both: had clipping seen the scaled gradients, fp16's would be 65536 times smaller."""
    model = tiny_dqn(max_grad_norm)
    fp32, fp16 = _update(model, fp16=False), _update(model, fp16=True)
    assert model.scaler.get_scale() == 2.0**16 and model.skipped_steps == 0
    norm32, norm16 = (torch.cat([d.flatten() for d in u]).norm().item() for u in (fp32, fp16))
    largest = max(d.abs().max().item() for d in fp32)
    assert norm32 > 0 and largest > 0
    for d32, d16 in zip(fp32, fp16):
        assert (d16 - d32).abs().max().item() <= 0.01 * largest
    if max_grad_norm < 1:  # the gradients' norm is far above 1e-3 here: clipping acted
        assert norm32 == pytest.approx(LR * max_grad_norm, rel=1e-4)
        assert norm16 == pytest.approx(LR * max_grad_norm, rel=1e-3)
    else:
        assert norm32 < LR * max_grad_norm
        assert norm16 == pytest.approx(norm32, rel=0.01)


def test_an_inf_gradient_skips_the_step_and_halves_the_scale():
    """An inf in one gradient: no parameter moves, Adam never steps (no state), the scale halves and
    the step is counted; the next clean update goes through."""
    model = tiny_dqn(optimizer=torch.optim.Adam)
    before = _params(model)
    weight = next(model.q_net.parameters())
    hook = weight.register_hook(lambda g: torch.full_like(g, float("inf")))
    model.train(1, batch_size=32)
    hook.remove()
    assert all(torch.equal(a, b) for a, b in zip(_params(model), before))
    assert model.policy.optimizer.state == {}
    assert model.scaler.get_scale() == 2.0**15 and model.skipped_steps == 1
    model.train(1, batch_size=32)
    assert not all(torch.equal(a, b) for a, b in zip(_params(model), before))
    assert model.scaler.get_scale() == 2.0**15 and model.skipped_steps == 1 and model._n_updates == 2


def test_a_scale_too_large_for_float16_backs_off_until_updates_go_through():
    """At 2^40 the scaled gradients overflow float16 inside backward: the first updates are skipped,
    each halving the scale (no growth within 2000 steps), until the scale fits and updates resume."""
    model = tiny_dqn(init_scale=2.0**40)
    before = _params(model)
    model.train(40, batch_size=32)
    skipped = model.skipped_steps
    assert 1 <= skipped < 40
    assert model.scaler.get_scale() == 2.0 ** (40 - skipped)
    assert not all(torch.equal(a, b) for a, b in zip(_params(model), before))
    assert model.logger.name_to_value["train/skipped_steps"] == skipped


def test_it_saves_and_loads_as_a_dqn_with_a_fresh_scaler(tmp_path):
    model = tiny_dqn(init_scale=2.0**10)
    model.train(2, batch_size=32)
    model.save(tmp_path / "m.zip")
    loaded = FP16DQN.load(tmp_path / "m.zip", device="cpu")
    assert loaded.scaler.get_scale() == 2.0**10 and loaded._n_updates == 2
    obs = np.zeros((1, 4), dtype=np.float32)
    assert torch.equal(loaded.q_net(torch.as_tensor(obs)), model.q_net(torch.as_tensor(obs)))
    assert {p.dtype for p in loaded.policy.parameters()} == {torch.float32}


def _td_loss(model: DQN) -> float:
    """The Huber TD loss in float32 over the whole replay buffer, against the (never synced) target network."""
    data = model.replay_buffer._get_samples(np.arange(model.replay_buffer.size()))
    with torch.no_grad():
        next_q = model.q_net_target(data.next_observations).max(dim=1)[0].reshape(-1, 1)
        target = data.rewards + (1 - data.dones) * model.gamma * next_q
        return F.smooth_l1_loss(model.q_net(data.observations).gather(1, data.actions.long()), target).item()


def test_fp16_updates_fit_the_td_targets_as_fp32_updates_do():
    """300 Adam updates on the same batches from the same weights (train() never syncs the target
    network, so the targets hold still): fp16 brings the TD loss down as far as fp32 does (measured:
    0.653 -> 0.0173 in both, within 0.02%)."""
    losses = []
    for fp16 in (False, True):
        model = tiny_dqn(optimizer=torch.optim.Adam, learning_rate=1e-3)
        start = _td_loss(model)
        np.random.seed(0)
        model.train(300, batch_size=32) if fp16 else DQN.train(model, 300, batch_size=32)
        losses.append(_td_loss(model))
        assert losses[-1] < 0.1 * start
    assert losses[1] == pytest.approx(losses[0], rel=0.05)


@pytest.mark.slow
def test_fp16_dqn_learns_cartpole():
    """rl-zoo3's CartPole DQN (narrower, at most 10k steps) as FP16DQN, seeds 0-2: the mean return is
    well above a random policy's 23.7. Each training ends once its last 10 training episodes average
    100 (quarl.train.stopping): measured with torch 2.13 on one thread, after 3414, 3086 and 3107 steps,
    scoring 110, 109 and 169 (seeds 3 and 4: 2979 and 3410 steps, 126 and 181); the whole 10k steps
    scored 131, 143 and 127 (seeds 3 and 4: 49 and 203) in three times as long."""
    from stable_baselines3.common.evaluation import evaluate_policy

    returns = []
    for seed in range(3):
        model = FP16DQN("MlpPolicy", "CartPole-v1", learning_rate=2.3e-3, batch_size=64, buffer_size=20_000,
                        learning_starts=1000, target_update_interval=10, train_freq=256, gradient_steps=128,
                        exploration_fraction=0.16, exploration_final_eps=0.04, policy_kwargs={"net_arch": [64, 64]},
                        seed=seed, device="cpu")
        model.learn(10_000, callback=StopAtReturn(100))
        returns.append(evaluate_policy(model, model.get_env(), n_eval_episodes=10)[0])
    assert np.mean(returns) > 2.5 * 23.7, returns


def test_the_report_shows_fp16_beside_bf16_where_amp_csv_has_it(tmp_path):
    """An older run (bf16 only) and a newer one with fp16 in one amp.csv: fp16's cells come from the
    run that measured it, bf16's from both; a file without fp16 columns keeps the older table."""
    import pandas as pd

    from quarl.report.mixed_precision import AMP_FILE, section

    def run(number: int, fp16: bool) -> list[dict]:
        rows = []
        for policy in ["Policy A", "Policy B", "Policy C"]:
            fp32, bf16, steps32, steps16 = (100.0, 120.0, 400.0, 400.0) if number == 1 else (200.0, 160.0, 300.0, 360.0)
            row = {"policy": policy, "updates/s fp32": fp32, "updates/s bf16": bf16, "update speedup": bf16 / fp32,
                   "env steps/s fp32": steps32, "env steps/s bf16": steps16, "end-to-end speedup": steps16 / steps32,
                   "device": "NVIDIA H100", "run": number}
            if fp16:
                row |= {"updates/s fp16": 250.0, "update speedup fp16": 250.0 / fp32, "env steps/s fp16": 450.0,
                        "end-to-end speedup fp16": 450.0 / steps32, "fp16 skipped (timed)": 3,
                        "fp16 skipped (end to end)": 1}
            rows.append(row)
        return rows

    pd.DataFrame(run(1, False) + run(2, True)).to_csv(tmp_path / AMP_FILE, index=False)
    text = section(tmp_path)
    # updates/s: fp32 (100+200)/2, bf16 (120+160)/2, fp16 250 (run 2 alone); speedups: bf16 1.2 and 0.8,
    # fp16 250/200; env steps/s: (400+300)/2, (400+360)/2, 450; end to end: bf16 1.0 and 1.2, fp16 450/300
    row = (
        "| Policy A | 3 conv (128 filters) + FC 128 | 127 / 156 | 0.87x (as printed; 127/156 = 0.81) | 2 | "
        "150.0 / 140.0 / 250.0 | 1.00x (0.80-1.20) / 1.25x | 350 / 380 / 450 | 1.10x (1.00-1.20) / 1.50x "
        "| 3 timed, 1 end to end |"
    )
    assert row in text and "fp16 columns (1 run)" in text and "predate" not in text
    pd.DataFrame(run(1, False)).to_csv(tmp_path / AMP_FILE, index=False)
    older = section(tmp_path)
    assert "| quarl: updates/s fp32 / bf16 | update speedup |" in older and "predate bench_amp's fp16" in older
