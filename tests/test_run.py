"""`python run.py` end to end: records land, sweeps reuse policies, bad input gets one sentence."""

import json
import re
import sqlite3
import subprocess
import sys

import pytest

from quarl.errors import QuarlError
from quarl.store import query as results
from tests.conftest import ENV, FAST, ROOT, WARM, quarl_cli, run_quarl


def log_of(done: subprocess.CompletedProcess) -> str:
    return done.stdout + done.stderr


def test_single_run_records_fp32_baseline_and_quantized_cell(scratch, shared_policies):
    done = run_quarl(scratch, *FAST, "quant.bits=4", policies=shared_policies)
    df = results.load(scratch / "outputs/results.sqlite")
    assert sorted(df["quant"]) == ["fp32", "ptq"]
    ptq = df[df["quant"] == "ptq"].iloc[0]
    fp32 = df[df["quant"] == "fp32"].iloc[0]
    assert ptq["quant.bits"] == 4 and ptq["n_episodes"] == 2 and ptq["fp32_reward"] == fp32["reward_mean"]
    assert ptq["rel_error"] == pytest.approx((fp32["reward_mean"] - ptq["reward_mean"]) / abs(fp32["reward_mean"]))
    assert ptq["policy_bytes"] < ptq["fp32_bytes"] / 6  # 4-bit weights (8x smaller), fp32 biases
    for column in ("git_commit", "host", "started_at", "ended_at", "versions", "train_time_s", "eval_time_s"):
        assert ptq[column] is not None, column
    assert json.loads(ptq["versions"])["torch"].startswith("2.")
    # the JSON copy in the Hydra run dir holds the same record
    copies = {p.name: json.loads(p.read_text()) for p in (scratch / "outputs/runs").rglob("*record.json")}
    assert copies["record.json"]["run"]["cell_key"] == ptq["cell_key"]
    assert copies["baseline.record.json"]["run"]["cell_key"] == fp32["cell_key"]
    assert "E = " in log_of(done)  # the one-line summary
    # a second run at once (the cell is done: it skips in well under a second) keeps its own run dir,
    # named to the microsecond: two runs started in one second once shared one, and a record.json
    run_quarl(scratch, *FAST, "quant.bits=4", policies=shared_policies)
    dirs = sorted(p.name for p in (scratch / "outputs/runs").glob("*/*"))
    assert len(dirs) == 2 and all(re.fullmatch(r"\d\d-\d\d-\d\d\.\d{6}", d) for d in dirs), dirs


def test_sweep_trains_one_policy_per_algo_and_reuses_it(scratch):
    sweep = ["-m", "algo=dqn,a2c,ppo", "quant.bits=2,4,8", *FAST]
    first = log_of(run_quarl(scratch, *sweep))
    assert first.count("Training fp32 ") == 3
    df = results.load(scratch / "outputs/results.sqlite")
    assert (df["quant"] == "ptq").sum() == 9 and (df["quant"] == "fp32").sum() == 3
    assert set(df["status"]) == {"done"}
    assert df.groupby("algo")["policy_key"].nunique().eq(1).all()
    second = log_of(run_quarl(scratch, *sweep))
    assert "Training fp32 " not in second and "Recorded" not in second
    assert second.count("already in the store") == 9
    assert len(results.load(scratch / "outputs/results.sqlite")) == 12
    # force re-evaluates (and replaces) without retraining
    forced = log_of(run_quarl(scratch, *FAST, "algo=ppo", "quant.bits=2", "force=true"))
    assert "Training fp32 " not in forced and "E = " in forced
    assert len(results.load(scratch / "outputs/results.sqlite")) == 12


def test_parallel_jobs_train_a_shared_policy_once(scratch):
    procs = [WARM.start(scratch, [*FAST, "algo=a2c", f"quant.bits={b}"], merged=True) for b in (3, 5, 6)]
    logs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), logs
    assert sum(log.count("Training fp32 ") for log in logs) == 1
    df = results.load(scratch / "outputs/results.sqlite")
    assert sorted(df["quant.bits"]) == [3, 5, 6, 32]  # three cells and one fp32 baseline


def test_incompatible_cell_is_skipped_in_a_sweep_and_fails_a_single_run(scratch):
    done = run_quarl(scratch, "-m", "algo=dqn,ppo", "env=pendulum", *FAST)
    df = results.load(scratch / "outputs/results.sqlite")
    skipped = df[df["status"] == "skipped"]
    assert list(skipped["algo"]) == ["dqn"] and "needs discrete actions" in skipped.iloc[0]["message"]
    assert set(df[df["status"] == "done"]["algo"]) == {"ppo"}
    single = run_quarl(scratch, "algo=ddpg", "env=cartpole", *FAST, check=False)
    assert single.returncode == 1
    assert "algo=ddpg needs continuous actions but env CartPole-v1 has discrete actions" in log_of(single)
    assert "Traceback" not in log_of(single) and "Skipping" in log_of(done)


@pytest.mark.parametrize(
    "args, message",
    [
        (["quant.bits=1"], "quant.bits=1 is out of range: use 2..16, or 32"),
        (["quant.bits=40"], "quant.bits=40 is out of range"),
        (["quant.scheme=fancy"],
         "quant.scheme=fancy is not allowed: choose one of affine, symmetric, quarl_code, published"),
        (["eval.episodes=0"], "eval.episodes=0 must be a positive number of episodes"),
        (["algo=dqn", "env=mountaincar_continuous"], "algo=dqn needs discrete actions"),
        (["store.path=/proc/forbidden/results.sqlite"], "store.path=/proc/forbidden/results.sqlite cannot be opened"),
        (["quant.bits=four"], "Value 'four' of type 'str' could not be converted to Integer"),
        (["algo=sarsa"], "algo=sarsa is not an option: python run.py --help lists every algo"),
        (["env=pong"], "env=pong is not an option: did you mean env=atari/pong?"),
        (["+algo.hyperparams.learning_rat=0.1"], "algo.hyperparams.learning_rat is not a parameter of PPO"),
        (["+quant.bitz=4"], "quant.bitz is not a setting of quant=ptq (did you mean quant.bits?): it takes"),
        (["quant=fp16", "+quant.act_bits=8"], "quant.act_bits is not a setting of quant=fp16"),
        (["+train.stepz=5"], "train.stepz is not a setting of quarl (did you mean train.steps?)"),
        (["train.keep_best=2"], "train.keep_best=2 is not allowed: use train.keep_best=true or train.keep_best=false"),
        (["train.steps=99999999999999999999"], "train.steps=99999999999999999999 is out of range: use 1..10000"),
        (["store.policies=/proc/forbidden/policies"], "store.policies=/proc/forbidden/policies cannot be created"),
    ],
)
def test_bad_input_gets_one_clear_sentence_and_no_traceback(scratch, args, message):
    done = run_quarl(scratch, *FAST, *args, check=False)
    assert done.returncode == 1
    assert message in log_of(done)
    assert "Traceback" not in log_of(done)
    assert not (scratch / "outputs/policies").exists() or not any((scratch / "outputs/policies").glob("*/model.zip"))
    assert not (scratch / "outputs/runs").exists()  # a refused run leaves no run dir behind


def test_float_methods_record_the_width_they_use(scratch, shared_policies):
    """quant=fp16 quant.bits=4 runs the fp16 cell, says so and records 16 bits; a sweep over the
    shared setting makes one fp16 cell of it, silently."""
    single = run_quarl(scratch, *FAST, "quant=fp16", "quant.bits=4", policies=shared_policies)
    assert "quant=fp16 runs at 16 bits: quant.bits=4 does not apply to it" in log_of(single)
    sweep = run_quarl(scratch, "-m", *FAST, "quant=fp16,ptq", "quant.bits=4,8", policies=shared_policies)
    assert "does not apply" not in log_of(sweep)
    runs = results.load(scratch / "outputs/results.sqlite")
    assert sorted(zip(runs["quant"], runs["quant.bits"])) == [("fp16", 16), ("fp32", 32), ("ptq", 4), ("ptq", 8)]
    assert log_of(sweep).count("already in the store") == 2  # fp16 at quant.bits=4 and 8: the cell the run made


def test_two_identical_sweeps_started_together_run_each_cell_once(scratch, shared_policies):
    sweep = ["-m", *FAST, "quant.bits=3,5", f"store.policies={shared_policies}"]
    procs = [WARM.start(scratch, sweep, merged=True) for _ in range(2)]
    logs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), logs
    assert sum(log.count("E = ") for log in logs) == 2, logs  # each quantized cell evaluated once
    runs = results.load(scratch / "outputs/results.sqlite")
    assert sorted(runs["quant.bits"]) == [3, 5, 32] and set(runs["status"]) == {"done"}


def test_ctrl_c_ends_in_one_line_and_leaves_no_marker(scratch):
    import signal
    import time

    # the run starts with Ctrl-C's default disposition, as from a shell (tests/warm_run.py sees to it)
    proc = WARM.start(scratch, ["train.steps=200000", "train.progress=false"], merged=True)
    store = scratch / "outputs/results.sqlite"
    deadline = time.monotonic() + 120
    try:  # a store being made is never read without its tables (quarl.store.sqlite._create_whole)
        while time.monotonic() < deadline and (not store.exists() or results.load(store).empty):
            time.sleep(0.5)  # the cell's `running` marker is written once it starts
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=120)[0]
    finally:
        proc.kill()  # no 200000-step training left behind where the test fails
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out
    assert "Interrupted: ppo/cartpole seed=0 ptq 8-bit affine per_tensor was not recorded" in out
    assert "Run the same command again to go on" in out
    assert results.load(store).empty  # no `running` marker left


# DQN checkpoints on its 256-step chunks: the first checkpoint comes at 1024 steps, long before the end.
SIGNALLED = ["algo=dqn", "train.steps=12288", "train.checkpoint_every=1024", "train.progress=false", *FAST[1:]]


def _start_run(scratch, *args):
    """`python run.py ARGS` in its own process, with the default dispositions a shell gives it."""
    return WARM.start(scratch, list(args), merged=True)


def _wait_for(what, found, proc, timeout=180):
    import time

    deadline = time.monotonic() + timeout
    while not found():
        assert proc.poll() is None, f"run.py ended before {what}:\n{proc.communicate()[0]}"
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.2)


def _checkpoint_step(policies):
    import torch

    from quarl.train.checkpoint import STATE_FILE

    for state in policies.glob(f"*.ckpt/{STATE_FILE}"):
        try:
            return int(torch.load(state, weights_only=False)["counters"]["num_timesteps"])
        except (OSError, EOFError, RuntimeError, KeyError):  # replaced while it was read
            return 0
    return 0


def test_sigterm_ends_like_ctrl_c_keeps_the_checkpoint_and_the_next_run_resumes(scratch):
    """SIGTERM (SLURM's preemption and time limit, `timeout`, systemd, `docker stop`) mid-training,
    after a checkpoint: one line, exit 143, no `running` marker, no temporary folder in the policy
    cache, the checkpoint (and its curve so far) kept; the same command then resumes and finishes."""
    import signal

    policies, store = scratch / "outputs/policies", scratch / "outputs/results.sqlite"
    proc = _start_run(scratch, *SIGNALLED)
    _wait_for("a training checkpoint", lambda: _checkpoint_step(policies) > 0, proc)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 143, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out
    line = "Terminated by SIGTERM: dqn/cartpole seed=0 ptq 8-bit affine per_tensor was not recorded. Run the same"
    assert out.count(line) == 1, out
    assert results.load(store).empty  # no `running` marker left
    names = sorted(p.name for p in policies.iterdir() if not p.name.startswith("."))
    assert [n.rsplit(".", 1)[-1] for n in names if ".ckpt" in n] == ["ckpt", "curves"], names  # kept together
    assert not [n for n in names if ".tmp-" in n or n.endswith((".saving", ".old"))], names
    step = _checkpoint_step(policies)
    assert 0 < step < 12288

    again = run_quarl(scratch, *SIGNALLED)
    assert f"Resuming from the checkpoint at step {step} of 12288" in again.stdout + again.stderr
    df = results.load(store)
    assert sorted(df["quant"]) == ["fp32", "ptq"] and set(df["status"]) == {"done"}
    (meta,) = policies.glob("*/meta.json")
    assert json.loads(meta.read_text())["resumed_at"] == step
    assert sorted(p.name for p in policies.iterdir() if not p.name.startswith(".")) == [meta.parent.name]


def test_sighup_before_the_first_checkpoint_leaves_nothing_behind(scratch):
    """SIGHUP (a closed terminal) ends a run like Ctrl-C too: exit 129, no marker, and with no
    checkpoint yet, no temporary folder and no curve folder in the policy cache."""
    import signal

    policies, store = scratch / "outputs/policies", scratch / "outputs/results.sqlite"
    proc = _start_run(scratch, *SIGNALLED[:2], "train.checkpoint_every=0", *SIGNALLED[3:])
    _wait_for("the training's folders", lambda: list(policies.glob("*.tmp-*")), proc)
    proc.send_signal(signal.SIGHUP)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 129, out
    assert "Traceback" not in out and "Terminated by SIGHUP: dqn/cartpole seed=0 ptq" in out
    assert results.load(store).empty
    assert [p.name for p in policies.iterdir() if not p.name.startswith(".")] == []


@pytest.mark.parametrize("damage", ["garbage", "cut to 20000 bytes", "cut to 100000 bytes"])
def test_corrupt_cached_policy_is_reported_and_nothing_stored_is_damaged(scratch, damage):
    run_quarl(scratch, *FAST, "quant.bits=8")
    store = scratch / "outputs/results.sqlite"
    before = results.load(store)
    (model_zip,) = (scratch / "outputs/policies").glob("*/model.zip")
    data = model_zip.read_bytes()
    model_zip.write_bytes(b"garbage" if damage == "garbage" else data[: int(damage.split()[2])])
    done = run_quarl(scratch, *FAST, "quant.bits=4", check=False)
    assert done.returncode == 1 and "Traceback" not in log_of(done)
    assert f"The cached policy in {model_zip.parent} cannot be read" in log_of(done)
    assert "delete that folder" in log_of(done)
    assert results.load(store).equals(before)
    with sqlite3.connect(store) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.slow
def test_default_run_learns_cartpole(scratch):
    """`python run.py` with a reduced budget: PPO learns well past a random policy (~20)."""
    run_quarl(scratch, "train.steps=20000", "eval.episodes=5")
    df = results.load(scratch / "outputs/results.sqlite", quant="fp32")
    assert df.loc[0, "reward_mean"] > 150


def test_qat_cell_lands_with_its_training_curve(scratch):
    done = run_quarl(scratch, *FAST, "quant=qat", "quant.bits=4")
    assert "Training QAT 4-bit ppo" in log_of(done) and "QAT: fake quantization on at step" in log_of(done)
    store = scratch / "outputs/results.sqlite"
    df = results.load(store)
    cell = df[df["quant"] == "qat"].iloc[0]
    assert cell["quant.delay"] == 750 and cell["quant.act_bits"] == 8  # default delay: half of train.steps
    assert cell["fp32_reward"] == df[df["quant"] == "fp32"].iloc[0]["reward_mean"]
    from quarl.store.sqlite import Store

    curves = Store(store).curves()
    assert set(curves["cell_key"]) == set(df["cell_key"])  # the QAT and the fp32 training curves
    assert curves["step"].max() <= 1500 + 256 and (curves["reward"] > 0).all()  # PPO rounds up to whole rollouts
    late = run_quarl(scratch, *FAST, "quant=qat", "quant.bits=4", "quant.delay=5000")
    assert "QAT never switches on" in log_of(late)


def test_killed_training_resumes_from_its_checkpoint_and_finishes_the_budget(scratch):
    import time

    args = [*FAST[1:], "algo=dqn", "train.steps=4096", "train.checkpoint_every=1024"]  # 16 chunks of 256
    proc = WARM.start(scratch, args)
    policies = scratch / "outputs/policies"
    deadline = time.time() + 300
    while not list(policies.glob("*.ckpt/state.pt")):
        assert proc.poll() is None, "training ended before its first checkpoint"
        assert time.time() < deadline
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert not list(policies.glob("*/meta.json"))  # the policy is not finished
    assert list(results.load(scratch / "outputs/results.sqlite")["status"]) == ["running"]  # for quarl status
    done = run_quarl(scratch, *args)
    assert "Resuming from the checkpoint at step" in log_of(done)
    (meta_file,) = policies.glob("*/meta.json")
    meta = json.loads(meta_file.read_text())
    assert meta["timesteps"] == 4096 and 1024 <= meta["resumed_at"] < 4096
    curve = json.loads((meta_file.parent / "curve.json").read_text())
    assert curve[0]["step"] < meta["resumed_at"] < curve[-1]["step"]  # the curve spans the interruption
    assert not list(policies.glob("*.ckpt")) and not list(policies.glob("*.tmp-*"))
    assert list(results.load(scratch / "outputs/results.sqlite")["status"]) == ["done", "done"]


def test_killed_sweep_reruns_only_its_missing_cells_and_duplicates_nothing(scratch):
    import time

    sweep = ["-m", "quant.bits=2,3,4,5,6,7,8", *FAST[:1], "eval.episodes=10", *FAST[2:]]
    proc = WARM.start(scratch, sweep)
    store, deadline, done_before = scratch / "outputs/results.sqlite", time.time() + 300, []
    while not done_before:
        assert proc.poll() is None, "the sweep ended before it could be killed"
        assert time.time() < deadline
        time.sleep(0.05)
        if store.exists():
            try:
                df = results.load(store)
            except QuarlError:  # the sweep's first cell is creating the store's tables just now
                continue
            done_before = list(df[(df["quant"] == "ptq") & (df["status"] == "done")]["cell_key"])
    proc.kill()
    proc.wait()
    df = results.load(store)
    done_before = set(df[(df["quant"] == "ptq") & (df["status"] == "done")]["cell_key"])
    assert 1 <= len(done_before) < 7
    again = log_of(run_quarl(scratch, *sweep))
    assert again.count("already in the store as done") == len(done_before)
    assert again.count("| quantized ") == 7 - len(done_before)  # exactly the missing cells ran
    assert "Training" not in again  # the policy was finished before the kill
    df = results.load(store)
    assert len(df) == 8 and df["cell_key"].is_unique and (df["status"] == "done").all()


def test_a_failing_cell_is_recorded_and_the_sweep_goes_on_then_reruns(scratch):
    """A learning rate torch refuses fails while training: that cell is recorded failed with its
    reason; the other runs; a re-run retries only it (an invalid config is never run at all)."""
    sweep = ["-m", "algo.hyperparams.learning_rate=0.0003,-1", *FAST]
    first = log_of(run_quarl(scratch, *sweep))
    df = results.load(scratch / "outputs/results.sqlite")
    failed = df[df["status"] == "failed"]
    assert len(failed) == 1 and "Invalid learning rate" in failed.iloc[0]["message"]
    assert (df["status"] == "done").sum() == 2 and "failed: " in first and "Invalid learning rate" in first
    (error_file,) = (scratch / "outputs/multirun").rglob("error.txt")
    assert "Traceback" in error_file.read_text()
    again = log_of(run_quarl(scratch, *sweep))
    assert "already in the store as done" in again and "Invalid learning rate" in again
    assert again.count("Training fp32 ") == 1  # only the failing cell tries again


def test_single_run_failure_leaves_no_marker(scratch):
    run_quarl(scratch, *FAST, "quant.bits=1", check=False)
    store = scratch / "outputs/results.sqlite"
    assert not store.exists() or results.load(store).empty  # validated before a store is even opened


def test_real_int8_execution_lands_reward_latency_and_bytes(scratch, shared_policies):
    done = run_quarl(scratch, *FAST, "quant.backend=onnx_int8", policies=shared_policies)
    cell = results.load(scratch / "outputs/results.sqlite", quant="ptq").iloc[0]
    assert cell["backend"] == "onnx_int8" and cell["backend_precision"] == "int8"
    assert cell["backend_reward"] == pytest.approx(cell["reward_mean"], rel=0.2)  # same episodes, int8 kernels
    assert 0 < cell["latency_ms"] < 100 and 0 < cell["fp32_latency_ms"] < 100
    assert cell["backend_bytes"] < cell["fp32_bytes"] / 3
    assert "Executed on onnx_int8 (int8)" in log_of(done)
    # the summary line ends with what the executed policy does: its own agreement, not fake quantization's
    summary = next(line for line in log_of(done).splitlines() if "(fake quantization)" in line)
    assert summary.endswith(f"| executed on onnx_int8: action agreement {cell['backend_action_agreement']:.3f}")


@pytest.mark.parametrize(
    "args, message",
    [
        (["quant=fp16", "quant.backend=onnx_int8"],
         "quant.backend=onnx_int8 executes integer policies of at most 8-bit weights"),
        (["quant.bits=12", "quant.backend=onnx_int8"], "not quant=ptq with quant.bits=12"),
        (["quant.bits=8", "quant.backend=onnx_int4"], "quant.backend=onnx_int4 executes integer policies of at most 4"),
        (["quant.bits=4", "quant.backend=onnx_int2"], "quant=qat with quant.bits<=2, or quant.backend=auto"),
        (["quant.backend=tensorrt"], "quant.backend=tensorrt is not allowed: choose one of fake, auto, torch, onnx"),
    ],
)
def test_impossible_backends_are_refused(scratch, args, message):
    done = run_quarl(scratch, *FAST, *args, check=False)
    assert done.returncode == 1 and message in log_of(done) and "Traceback" not in log_of(done)


def test_schema_backends_are_the_deploy_backends():
    from quarl.config.schema import exec_backends
    from quarl.deploy import CHOICES

    assert exec_backends() == ("fake", *CHOICES)


def test_quarl_export_writes_a_standalone_int8_policy_from_the_store(scratch, shared_policies):
    run_quarl(scratch, *FAST, policies=shared_policies)  # the record names the cache export loads from
    cli = ["export", "quant=ptq", "--out", "policy.onnx"]
    done = quarl_cli(scratch, *cli)
    assert done.returncode == 0 and (scratch / "policy.onnx").stat().st_size > 0
    again = quarl_cli(scratch, *cli)
    assert again.returncode == 1 and "already exists" in again.stderr
    act = subprocess.run([sys.executable, str(ROOT / "examples/act_onnx.py"), "policy.onnx", "--episodes", "2"],
                         cwd=scratch, capture_output=True, text=True, env=ENV)
    assert act.returncode == 0, act.stderr
    ambiguous = quarl_cli(scratch, "export", "--out", "x.onnx")  # no filter: the fp32 and the ptq record match
    assert ambiguous.returncode == 1 and "2 finished records match" in ambiguous.stderr


def test_invalid_cell_in_a_sweep_leaves_no_record_and_plan_calls_it_invalid(scratch, shared_policies):
    sweep = ["-m", "quant.bits=1,8", *FAST]
    done = run_quarl(scratch, *sweep, policies=shared_policies, check=False)
    runs = results.load(scratch / "outputs/results.sqlite")
    assert sorted(runs["quant"]) == ["fp32", "ptq"] and set(runs["status"]) == {"done"}  # the valid cell ran
    assert done.returncode == 1 and "Traceback" not in log_of(done)
    assert "1 of this sweep's cells are invalid and were not run: quant.bits=1" in log_of(done)
    assert "quant.bits=1 is out of range" in log_of(done)
    overrides = [a for a in sweep[1:] if not a.startswith("hydra.")]
    plan = subprocess.run([sys.executable, "-m", "quarl.cli", "plan", *overrides], cwd=scratch, capture_output=True,
                          text=True, env=ENV, timeout=300)
    assert "invalid" in plan.stdout and "1 done" in plan.stdout, plan.stdout + plan.stderr


@pytest.mark.parametrize("seed", ["-1", "4294967296", "99999999999999999999"])
def test_a_seed_out_of_range_gets_one_sentence_naming_the_bounds(scratch, seed):
    done = run_quarl(scratch, *FAST, f"seed={seed}", check=False)
    assert done.returncode == 1 and f"seed={seed} is out of range: use an integer from 0 to 2147483647" in log_of(done)
    assert "Traceback" not in log_of(done) and not (scratch / "outputs/results.sqlite").exists()


def test_a_cached_policy_that_fails_for_another_reason_is_kept(tmp_path, monkeypatch):
    """Only a damaged file earns the advice to delete a policy that may have taken hours to train."""
    from quarl.errors import QuarlError
    from quarl.train.cache import obtain
    from tests.conftest import compose_cfg

    policy = obtain(compose_cfg("train.steps=600", "eval.episodes=1"), tmp_path)
    from stable_baselines3 import PPO

    def incompatible(*args, **kwargs):
        raise AttributeError("'PPO' object has no attribute 'from_a_newer_version'")

    monkeypatch.setattr(PPO, "load", incompatible)
    with pytest.raises(QuarlError) as err:
        policy.load()
    message = str(err.value)
    assert "AttributeError" in message and "keep the folder" in message and "delete" not in message
    assert isinstance(err.value.__cause__, AttributeError)  # the cause is kept for a full traceback


def test_cuda_without_a_gpu_warns_and_the_record_names_the_cpu(scratch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: train.device=cuda trains on it")
    done = run_quarl(scratch, *FAST, "quant.bits=8", "train.device=cuda")
    assert "train.device=cuda but no GPU is visible: training runs on the CPU." in log_of(done)
    runs = results.load(scratch / "outputs/results.sqlite")
    assert set(runs["training_device"]) == {"cpu"} and set(runs["train.device"]) == {"cuda"}


def test_a_store_written_before_the_move_loads_and_its_done_cells_are_skipped(scratch):
    """The committed campaign records were written by quarl before its restructuring (and before a
    record stored an fp16 cell's true width): rebuilt into a store, the same named-sweep command
    finds its cells done and runs nothing."""
    from quarl.store.record_files import rebuild
    from quarl.store.sqlite import Store

    store = scratch / "outputs" / "results.sqlite"
    store.parent.mkdir(parents=True)
    assert rebuild(ROOT / "docs/reproduction/records", Store(store)) > 700
    cell = ["+sweep=ptq_table_classic", "algo=ppo", "env=cartpole", "quant=fp16,ptq", "seed=2",
            "hydra.callbacks.collate.enabled=false"]
    done = run_quarl(scratch, "-m", *cell)
    assert log_of(done).count("already in the store as done") == 2, log_of(done)
    assert "Training" not in log_of(done) and not (scratch / "outputs/policies").exists()
