"""train.stop_at_return (quarl.train.stopping): a training ends once the last 10 training episodes
average the target; null trains the whole budget, under the keys it always had."""

from __future__ import annotations

import collections
import json
import logging
from types import SimpleNamespace

import numpy as np
import pytest

from quarl.config.keys import policy_key, training_spec
from quarl.train.stopping import StopAtReturn, recent_mean
from tests.conftest import compose_cfg
from tests.train.interrupted import Killed, KilledAfterCheckpoint


class Loop:
    """SB3's rollout loop around `callback`: each step's finished episode reaches the callback in
    `infos`, and the model's `ep_info_buffer` only after it (as SB3 does)."""

    def __init__(self, callback: StopAtReturn) -> None:
        self.callback = callback
        self.model = SimpleNamespace(ep_info_buffer=collections.deque(maxlen=100), num_timesteps=0)
        callback.model = self.model  # what init_callback sets, without an env

    def step(self, r: float | None) -> bool:
        """One env step that ends an episode of return `r` (None: none ends); what `on_step` answered."""
        self.model.num_timesteps += 1
        infos = [{"episode": {"r": r, "l": 1, "t": 0.0}}] if r is not None else [{}]
        self.callback.update_locals({"infos": infos})
        answer = self.callback.on_step()
        self.model.ep_info_buffer.extend(info["episode"] for info in infos if "episode" in info)
        return answer


def play(callback: StopAtReturn, returns: list[float | None]) -> list[bool]:
    loop = Loop(callback)
    return [loop.step(r) for r in returns]


def test_it_stops_once_the_last_ten_episodes_average_the_target(caplog):
    caplog.set_level(logging.INFO, logger="quarl.train.stopping")
    stop = StopAtReturn(100)
    # nine episodes of 100: fewer than ten, it goes on; the tenth, 99: mean 999/10 = 99.9, just below;
    # a step without an episode changes nothing; then 101: the last ten are 8 x 100, 99, 101, mean 100.0
    answers = play(stop, [100.0] * 9 + [99.0, None, 101.0])
    assert answers == [True] * 11 + [False]
    assert (stop.stopped_at, stop.mean) == (12, 100.0)
    assert caplog.messages == [
        "Mean return of the last 10 training episodes 100.0 >= 100 (train.stop_at_return) after 12 env steps: stopping."
    ]
    # the window slides: 0 and nine of 100 average 90 (below 95); one more 100 pushes the 0 out
    assert play(StopAtReturn(95), [0.0] + [100.0] * 9 + [None, 100.0]) == [True] * 11 + [False]
    assert recent_mean([1.0] * 9) is None and recent_mean([5.0, 1.0, 3.0], window=2) == 2.0


def test_only_episodes_that_end_while_eligible_count():
    """QAT: episodes played before fake quant was on do not count, however high their returns."""
    steps = SimpleNamespace(done=0)
    stop = StopAtReturn(100, eligible=lambda: steps.done >= 6)
    loop = Loop(stop)
    for _ in range(20):  # five episodes of 500 before it is eligible, then more while it is
        steps.done += 1
        if not loop.step(500.0):
            break
    assert steps.done == 15  # eligible from step 6: its tenth counted episode ends at step 15
    assert stop.counted == 10 and stop.stopped_at == 15


def test_the_target_enters_the_policy_key_only_when_set():
    plain, null = compose_cfg(), compose_cfg("train.stop_at_return=null")
    target = compose_cfg("train.stop_at_return=475")
    assert "stop_at_return" not in training_spec(plain)
    assert training_spec(null) == training_spec(plain) and policy_key(null) == policy_key(plain)
    assert training_spec(target) == {**training_spec(plain), "stop_at_return": 475.0}
    assert policy_key(target) != policy_key(plain)


@pytest.mark.parametrize("args, message", [
    (["train.stop_at_return=inf"], "train.stop_at_return=inf must be a finite mean return"),
    (["train.stop_at_return=much"], "train.stop_at_return"),
    (["policy.source=hub", "policy.repo=sb3/ppo-CartPole-v1", "train.stop_at_return=200"],
     "policy.source=hub trains nothing"),
])
def test_impossible_targets_get_one_sentence(args, message):
    from quarl.config.schema import check
    from quarl.errors import QuarlError

    with pytest.raises(Exception, match=message.replace(".", r"\.")) as raised:
        check(compose_cfg(*args))
    assert raised.type is QuarlError or "train.stop_at_return" in str(raised.value)


def first_reached(curve: list[dict[str, float]], target: float) -> int:
    """The env step at which the last 10 episodes of a training curve first average `target`."""
    returns = [p["reward"] for p in curve]
    return next(int(curve[i - 1]["step"]) for i in range(10, len(curve) + 1) if np.mean(returns[i - 10 : i]) >= target)


def test_a_training_with_a_reachable_target_ends_before_its_budget(tmp_path):
    """PPO on CartPole with a target of 60 (a random policy's return is about 22) and a 50k-step budget:
    it stopped after 3336 steps here."""
    from quarl.train.cache import obtain

    cfg = compose_cfg("train.steps=50000", "train.stop_at_return=60", "train.progress=false")
    policy = obtain(cfg, tmp_path)
    meta = policy.meta
    assert meta["timesteps"] < 50_000 and meta["spec"]["stop_at_return"] == 60.0
    assert meta["stop_at_return"]["stopped_at"] == meta["timesteps"]  # the steps it really took
    last = [p["reward"] for p in policy.curve[-10:]]
    assert np.mean(last) >= 60 and meta["stop_at_return"]["mean_return"] == pytest.approx(np.mean(last))
    assert first_reached(policy.curve, 60) == policy.curve[-1]["step"] == meta["timesteps"]  # not a step later
    assert meta["train_time_s"] > 0


def test_a_resumed_training_counts_the_episodes_before_its_checkpoint(tmp_path, monkeypatch):
    """Killed after its first checkpoint, the training resumes with the checkpoint's finished episodes
    (SB3 itself starts a resumed run with none), so it stops where the curve first reaches the target."""
    import torch

    from quarl.train import checkpoint
    from quarl.train import trainer as training

    cfg = compose_cfg("train.steps=50000", "train.stop_at_return=60", "train.checkpoint_every=1024",
                      "train.progress=false")
    folder, ckpt = tmp_path / "policy", tmp_path / "policy.ckpt"
    folder.mkdir()
    kill = KilledAfterCheckpoint(monkeypatch)
    started: list[tuple[int, list[float]]] = []  # what the stopper knows when a training (re)starts
    monkeypatch.setattr(StopAtReturn, "_on_training_start",
                        lambda self: started.append((self.counted, [e["r"] for e in self.model.ep_info_buffer])))
    with pytest.raises(Killed):
        training.train(cfg, folder, progress=False, checkpoints=ckpt)
    extra = torch.load(ckpt / checkpoint.STATE_FILE, weights_only=False)["extra"]
    kill.lift()
    training.train(cfg, folder, progress=False, checkpoints=ckpt)
    assert extra["stop"] == len(extra["curve"]) > 10  # every episode before the checkpoint counted
    assert started == [(0, []), (extra["stop"], [p["reward"] for p in extra["curve"][-100:]])]
    meta = json.loads((folder / "meta.json").read_text())
    curve = json.loads((folder / "curve.json").read_text())
    assert meta["resumed_at"] == kill.saved[0] == 1024 and meta["timesteps"] < 50_000
    assert first_reached(curve, 60) == meta["stop_at_return"]["stopped_at"] == meta["timesteps"]
