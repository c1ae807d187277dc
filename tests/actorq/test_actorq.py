"""ActorQ: distributed training with quantized actors, end to end and piece by piece."""

import os
import re
import signal
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
import torch

from quarl.actorq import execution, params
from quarl.actorq import settings as actorq_settings
from quarl.actorq.d4pg import project
from quarl.actorq.dqn import DQNLearner
from quarl.actorq.networks import policy_network, q_network
from quarl.actorq.replay import NStepAdder, RateLimiter
from quarl.store.sqlite import Store
from tests.conftest import ENV, ROOT, compose_cfg, run_quarl

TINY = ["eval.episodes=2", "eval.n_envs=2", "hydra.callbacks.collate.enabled=false", "actorq.actors=2",
        "actorq.log_interval_s=1"]
DQN = ["algo=dqn", "env=cartpole", "quant=actorq", "train.steps=3000", "actorq.min_replay=500",
       "algo.hyperparams.policy_kwargs.net_arch=[64,64]", *TINY]
D4PG = ["algo=d4pg", "env=dmc/cartpole_balance", "quant=actorq", "train.steps=2600", "actorq.min_replay=300",
        "algo.hyperparams.policy_layers=[64,64]", "algo.hyperparams.critic_layers=[64,64]",
        "algo.hyperparams.batch_size=64", "actorq.samples_per_insert=8", *TINY]


def stored(scratch):
    store = Store(scratch / "outputs/results.sqlite")
    runs = store.runs()
    return runs[runs["quant"] == "actorq"].iloc[0], store.curves(), store.actors()


def check_record(scratch, min_learner_steps: int) -> None:
    run, curves, actors = stored(scratch)
    assert run["status"] == "done" and run["n_episodes"] == 2
    assert run["learner_steps"] >= min_learner_steps and run["env_steps"] >= run["train.steps"]
    assert run["bytes_per_publish"] > 0 and run["publishes"] > 1 and run["actor_steps_per_s"] > 0
    assert len(curves) > 0 and curves["wall_s"].notna().all() and curves["wall_s"].is_monotonic_increasing
    # the start-up ends with the first experience, before the first episode ends
    assert 0 < run["first_experience_s"] <= curves["wall_s"].min()
    assert sorted(actors["actor"]) == [0, 1] and (actors["steps"] > 0).all()
    for column in ("inference_s", "env_s", "pull_s", "deserialize_s", "load_s", "send_s"):
        assert (actors[column] >= 0).all() and actors[column].sum() > 0, column
    assert actors["pulls"].sum() > 0
    for part in ("wait", "insert", "sample", "update"):  # the learner's side of the breakdown
        assert 0 < run[f"learner_{part}_s"] < run["train_time_s"], part
    assert run["learner_updates_per_s"] > 0 and run["stopped_by"] == "budget"


@pytest.mark.parametrize("backend", ["local", "ray"])
@pytest.mark.parametrize("algo", ["dqn", "d4pg"])
def test_tiny_run_completes_and_records_curve_and_breakdown(scratch, algo, backend, request):
    overrides = {"dqn": DQN, "d4pg": D4PG}[algo]
    if backend == "ray" and algo == "d4pg":  # joins the test run's Ray head; the DQN run starts a Ray of its own
        overrides = [*overrides, f"actorq.ray_address={request.getfixturevalue('ray_head')['address']}"]
    done = run_quarl(scratch, *overrides, f"actorq.backend={backend}")
    check_record(scratch, min_learner_steps=100)
    assert "int8 actor policy" in done.stdout + done.stderr


def test_a_time_limit_ends_the_run_and_pinned_actors_each_have_a_core(scratch):
    done = run_quarl(scratch, *DQN, "train.steps=1000000", "actorq.time_limit_s=6", "actorq.pin_actors=true")
    log = done.stdout + done.stderr
    run, _, _ = stored(scratch)
    assert run["status"] == "done" and run["stopped_by"] == "time_limit" and run["env_steps"] < 1_000_000
    assert "actorq.time_limit_s=6 s" in log and "Actor 0 started (pid" in log and ", core " in log


@pytest.mark.parametrize("cores, actors, expected", [
    (range(16), 14, list(range(2, 16))),  # the published layout: two cores left to the learner
    (range(2), 2, [0, 1]),  # no core to spare: the learner shares
    (range(2), 1, [1]),
    (range(2), 3, [0, 1, 0]),  # more actors than cores: in turn
    ([4, 5, 6, 7], 2, [6, 7]),  # only the cores this process may use (taskset)
])
def test_pinned_actors_leave_the_learner_its_cores(monkeypatch, cores, actors, expected):
    from quarl.actorq import transport

    monkeypatch.setattr(transport.os, "sched_getaffinity", lambda pid: set(cores))
    assert transport.actor_cores(actors) == expected


def run_killing_actor_0(scratch, backend: str, *overrides: str, before_kill=None, steps: int = 10000,
                        kill_at: int = 1000) -> str:
    """A DQN ActorQ run of `steps` env steps whose actor 0 process is SIGKILLed once training is under
    way (a progress line with more than `kill_at` env steps; after `before_kill(pid)`); checks that it
    was restarted once and the run finished; returns the log."""
    args = [*DQN, f"train.steps={steps}", "actorq.log_interval_s=0.5", f"actorq.backend={backend}", *overrides]
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], cwd=scratch, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines, victim = [], None
    for line in proc.stdout:
        lines.append(line)
        if "Actor 0 started (" in line:  # local: "(pid N)", ray: "(Ray actor ID on HOST, pid N)"
            victim = int(line.split("pid ")[1].split(")")[0])
        done = re.search(r"(\d+)/\d+ env steps", line)
        if victim and done and int(done.group(1)) >= kill_at:  # training is under way
            if before_kill:
                before_kill(victim)
            os.kill(victim, signal.SIGKILL)
            break
    lines += proc.stdout.readlines()
    assert proc.wait(timeout=300) == 0, "".join(lines)
    log = "".join(lines)
    died = "Actor 0 died (killed by signal 9); restarted it" if backend == "local" else "Actor 0 died (ActorDiedError"
    assert died in log and "restarted it" in log
    run, _, actors = stored(scratch)
    assert run["status"] == "done" and run["actor_restarts"] == 1
    assert actors.set_index("actor").loc[0, "restarts"] == 1
    return log


def test_killed_actor_is_restarted_and_the_run_finishes(scratch):
    # On Ray the same run is tests/test_cluster.py's, joined to a running Ray cluster (a Ray started
    # for one run is covered by the tiny runs above).
    # Killed once its first life has sent experience (1000 of 10000 env steps: the 64-step chunks of
    # both actors are in by then), so actor 0 has a row even if its restarted life came up only as
    # the run ended; the 9000 steps left give that life several seconds to come up and act.
    run_killing_actor_0(scratch, "local")


@pytest.mark.parametrize("comm_bits", [8, 32])
def test_int8_actor_policy_equals_the_learners_up_to_quantization_error(comm_bits):
    torch.manual_seed(0)
    net = policy_network(17, [256, 256], 6)
    shapes = params.layer_shapes(net)
    packed = params.ParameterQuantizer(shapes, comm_bits).pack(net).copy()
    layers = execution.convert(params.unpack(packed, shapes, comm_bits), 8)
    actor = execution.build(layers, 8, squash=True)
    assert actor.precision == "int8"
    obs = np.random.default_rng(0).standard_normal((256, 17)).astype(np.float32)
    want = net(torch.from_numpy(obs)).detach().numpy()
    got = actor(obs)
    # per-tensor uint8 weights and activations: a few percent of the output range, never more
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max()
    assert np.abs(got - want).max() > 0  # it really ran in int8
    # the fp32 actor is the learner's network exactly (same weights, float32 arithmetic)
    fp32 = execution.build(execution.convert(params.unpack(packed, shapes, comm_bits), 32), 32, squash=True)
    if comm_bits == 32:
        np.testing.assert_allclose(fp32(obs), want, atol=1e-5)
    # the wire really carries fewer bytes at 8 bits
    assert params.packed_size(shapes, 8) < params.packed_size(shapes, 32) / 3.5


def test_dqn_int8_actor_acts_like_the_learner():
    torch.manual_seed(1)
    net = q_network(4, [64, 64], 2)
    shapes = params.layer_shapes(net)
    layers = execution.convert(params.unpack(params.ParameterQuantizer(shapes, 8).pack(net), shapes, 8), 8)
    obs = np.random.default_rng(1).standard_normal((512, 4)).astype(np.float32)
    q = net(torch.from_numpy(obs)).detach().numpy()
    got = execution.build(layers, 8, squash=False)(obs)
    margin = np.abs(q[:, 0] - q[:, 1])
    clear = margin > 2 * np.abs(got - q).max()
    assert clear.mean() > 0.8 and (got.argmax(1) == q.argmax(1))[clear].all()


def test_categorical_projection_matches_a_hand_worked_example():
    atoms = torch.tensor([0.0, 1.0, 2.0, 3.0])
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.5, 0.0, 0.0, 0.5]])
    rewards = torch.tensor([0.5, 1.0, 10.0])
    discounts = torch.tensor([0.5, 1.0, 0.0])
    got = project(probs, rewards, discounts, atoms)
    # row 0: r + 0.5 z = 0.5, 1.0, 1.5, 2.0 -> 0.5 splits 0.05/0.05 onto atoms 0/1; 1.0 -> atom 1 (0.2);
    #        1.5 splits 0.15/0.15 onto 1/2; 2.0 -> atom 2 (0.4)
    # row 1: 1 + z = 1, 2, 3, 4 -> atoms 1, 2, 3 and 4 clipped to 3
    # row 2: discount 0, reward 10 clipped to v_max: everything on atom 3
    want = torch.tensor([[0.05, 0.40, 0.55, 0.0], [0.0, 0.25, 0.25, 0.50], [0.0, 0.0, 0.0, 1.0]])
    torch.testing.assert_close(got, want)


def test_dqn_target_is_double_q():
    """The online network picks the next action (0), the target network values it (10, not its max 20):
    target = 1 + 0.5 * 10 = 6, q = 1, Huber loss |1 - 6| - 0.5 = 4.5 (max-Q would give 9.5)."""
    learner = DQNLearner(actorq_settings.resolve(compose_cfg("algo=dqn", "quant=actorq")), torch.device("cpu"))
    learner.policy, learner.target = torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)
    for net, bias in ((learner.policy, [1.0, 0.0]), (learner.target, [10.0, 20.0])):
        torch.nn.init.zeros_(net.weight)
        net.bias.data = torch.tensor(bias)
    learner.optimizer = torch.optim.SGD(learner.policy.parameters(), lr=0.0)
    obs = np.ones((1, 4), np.float32)
    batch = {"obs": obs, "next_obs": obs, "action": np.zeros(1, np.int64), "reward": np.ones(1, np.float32),
             "discount": np.full(1, 0.5, np.float32)}
    assert learner.update(batch)["loss"] == pytest.approx(4.5)


def test_n_step_adder_discounts_and_bootstraps():
    adder = NStepAdder(n_step=2, gamma=0.5)
    obs = [np.full(1, i, np.float32) for i in range(5)]
    adder.add(obs[0], 0, 1.0, obs[1], False, False)
    adder.add(obs[1], 1, 2.0, obs[2], False, False)  # emits (s0, R = 1 + 0.5*2, discount 0.25, s2)
    adder.add(obs[2], 0, 4.0, obs[3], True, False)  # terminal: (s1, 2 + 0.5*4, 0, s3) and (s2, 4, 0, s3)
    data = adder.take()
    np.testing.assert_allclose(data["reward"], [2.0, 4.0, 4.0])
    np.testing.assert_allclose(data["discount"], [0.25, 0.0, 0.0])
    np.testing.assert_allclose(data["next_obs"][:, 0], [2, 3, 3])
    assert data["action"].dtype == np.int64


def test_rate_limiter_holds_both_sides_to_samples_per_insert():
    limiter = RateLimiter(samples_per_insert=4, min_replay=100, batch=8, slack=10)
    assert not limiter.can_sample(99) and limiter.can_insert(99)
    while limiter.can_sample(100):  # the slack lets 10 items' worth (40 samples) through
        limiter.sample()
    assert limiter.sampled == 40
    assert not limiter.can_insert(121) and limiter.can_insert(120)


def test_store_from_before_actorq_gets_the_new_curve_columns(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as con:  # a store as quarl wrote it before ActorQ: its curves had no wall time
        con.execute("CREATE TABLE runs (cell_key TEXT PRIMARY KEY, status TEXT)")
        con.execute("CREATE TABLE episodes (cell_key TEXT, episode INTEGER, seed INTEGER, reward REAL, length INTEGER)")
        con.execute("CREATE TABLE curves (cell_key TEXT NOT NULL, step INTEGER NOT NULL, reward REAL, length INTEGER)")
        con.execute("INSERT INTO curves VALUES ('k', 1, 2.0, 3)")
    curves = Store(path).curves()
    assert {"wall_s", "actor"} <= set(curves.columns) and len(curves) == 1


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["actorq.actors=0"], "actorq.actors=0 must be at least 1"),
        (["quant.actor_bits=4"], "quant.actor_bits=4 cannot be executed by an actor: use 8 (int8), 16 (fp16) or 32"),
        (["algo=d4pg"], "algo=d4pg needs continuous actions but env CartPole-v1 has discrete actions"),
        (["train.stop_at_return=100"],
         "train.stop_at_return=100.0 ends SB3 and QAT trainings; quant=actorq ends at its own target: use "
         "actorq.stop_at_return instead"),
        (["actorq.backend=ray"], "actorq.backend=ray needs Ray, which is not installed"),
        (["actorq.time_limit_s=0"], "actorq.time_limit_s=0.0 must be positive (or null)"),
    ],
)
def test_bad_input_gets_one_clear_line(scratch, overrides, message):
    args = ["algo=dqn", "quant=actorq", *overrides]
    if "actorq.backend=ray" in overrides:  # a fresh Python on which `import ray` fails
        fake = scratch / "noray" / "ray"
        fake.mkdir(parents=True)
        (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
        done = subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=scratch, capture_output=True,
                              env={**ENV, "PYTHONPATH": str(fake.parent)}, text=True, timeout=120)
    else:  # `python run.py ARGS` as a process forked from a warm one (tests/warm_run.py): no imports to wait for
        done = run_quarl(scratch, *args, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 1 and message in out and "Traceback" not in out, out


@pytest.mark.slow
def test_dqn_actorq_reaches_the_published_cartpole_return(scratch):
    """Two int8 actors learn CartPole to ActorQ's published CartPole return (198.22; a random policy
    scores about 22), and `actorq.stop_at_return` ends the run there, well inside the budget. The target
    is not the 475 at which CartPole counts as solved: DQN with ActorQ's 3-step targets oscillates near
    the top, and one CI run peaked at a 10-episode mean of 468.6 in 300k steps, while every run seen
    passed 200 early. Learning rate 6.3e-4 (rl-zoo3's 2.3e-3 is tuned for SB3's 1-step DQN)."""
    from quarl.collate.actorq_timing import smoothed

    done = run_quarl(scratch, "algo=dqn", "env=cartpole", "quant=actorq", "actorq.actors=2", "train.steps=150000",
                     "actorq.stop_at_return=200", "algo.hyperparams.learning_rate=0.00063", "eval.episodes=10",
                     "hydra.callbacks.collate.enabled=false")
    run, curves, _ = stored(scratch)
    assert smoothed(curves, run["cell_key"])["return"].max() >= 200
    assert run["env_steps"] < 150000 and "(actorq.stop_at_return)" in done.stdout + done.stderr
    assert run["status"] == "done" and run["n_episodes"] == 10


def fake_actorq_record(bits: int, seed: int, period: int, seconds_per_step: float) -> dict:
    """An ActorQ record whose training return climbs 0 -> 500 over 20k env steps at a fixed pace."""
    key = f"aq{bits}-{seed}-{period}"
    steps = np.arange(1, 201) * 100
    curve = [{"step": int(s), "wall_s": float(s * seconds_per_step), "reward": float(min(500, s / 40)), "length": 100,
              "actor": int(i % 2)} for i, s in enumerate(steps)]
    actors = [{"actor": a, "steps": 10000, "steps_per_s": 1 / seconds_per_step / 2, "wall_s": 10000 * seconds_per_step,
               "inference_s": 5.0 * bits / 32, "env_s": 1.0, "pull_s": 0.1, "deserialize_s": 0.05, "load_s": 0.2,
               "pulls": 100, "restarts": 0} for a in (0, 1)]
    config = {"algo": {"name": "dqn"}, "env": {"name": "cartpole", "id": "CartPole-v1"}, "seed": seed,
              "quant": {"method": "actorq", "actor_bits": bits, "bits": 8}, "actorq": {"update_period": period}}
    run = {"cell_key": key, "status": "done", "algo": "dqn", "env": "cartpole", "quant": "actorq",
           "reward_mean": 500.0, "started_at": f"2026-01-01 {seed}", "n_episodes": 10}
    return {"run": run, "config": config, "episodes": [], "curve": curve, "actors": actors}


def test_collation_writes_convergence_time_to_reward_and_breakdown(tmp_path):
    from quarl.collate import collate

    store = Store(tmp_path / "r.sqlite")
    for seed in (0, 1):
        for period in (10, 1000):
            store.write(fake_actorq_record(32, seed, period, 0.004))
            store.write(fake_actorq_record(8, seed, period, 0.001))
    written = collate(tmp_path / "r.sqlite", tmp_path / "out", formats=["png"])
    names = {p.relative_to(tmp_path / "out").as_posix() for p in written}
    assert {"actorq/convergence_dqn_cartpole.png", "actorq/time_to_reward.csv", "actorq/breakdown.csv",
            "actorq/breakdown_dqn_cartpole.png"} <= names
    assert {n.split("/")[0] for n in names} == {"actorq", "README.md"}  # no PTQ sweet spots or E tables
    import pandas as pd

    ttr = pd.read_csv(tmp_path / "out/actorq/time_to_reward.csv")
    int8 = ttr[(ttr["precision"] == "int8") & (ttr["update_period"] == 10)].iloc[0]
    # the paper's CartPole target 198.22: reached at step 7950 (return s/40, 10-episode mean) -> 4x faster
    assert int8["target"] == pytest.approx(198.22) and int8["speedup_vs_fp32"] == pytest.approx(4.0)
    assert int8["speedup (paper)"] == pytest.approx(3.70) and int8["reached"] == "2/2"
    bd = pd.read_csv(tmp_path / "out/actorq/breakdown.csv")
    assert set(bd["update_period"]) == {10, 1000}
    assert bd.loc[bd["precision"] == "int8", "inference (ms/step)"].iloc[0] == pytest.approx(0.125)
