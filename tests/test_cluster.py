"""Real clusters on this machine: sweeps through a single-node SLURM (slurm-wlm + munge), a cell
requeued mid-training and one past its time limit resume from their checkpoints, and ActorQ joins a
running Ray cluster. The services are started once for all xdist workers (tests/cluster/services.py)
and skipped, with the reason, without root or Debian's packages (.ci/run installs them): the
fixtures are in tests/cluster/fixtures.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from quarl.store import query as results
from tests.actorq.test_actorq import run_killing_actor_0
from tests.cluster import services
from tests.conftest import ENV, FAST, ROOT

TINY = FAST[1:]  # two evaluation episodes, no collation
# DQN trains in chunks of 256 env steps and checkpoints on chunk boundaries: 64 chunks, a checkpoint every 8.
# Long enough that a cell is still training when the test requeues or signals it after a checkpoint
# (with 4096 steps, a cell on an idle core could finish in the second between checkpoint and requeue).
# A requeued job ignores SLURM's SIGTERM (submitit bypasses it) and trains on until it is killed, about
# 5000 env steps later here; a job signalled for its time limit checkpoints and exits at once, so half
# the budget leaves that test as much margin.
STEPS = 16384
LONG_CELL = ["algo=dqn", f"train.steps={STEPS}", "train.checkpoint_every=2048"]
TIMED_OUT_STEPS = 8192
TIMED_OUT_CELL = ["algo=dqn", f"train.steps={TIMED_OUT_STEPS}", "train.checkpoint_every=1024"]


# ----------------------------------------------------------------------------- helpers


def slurm_cmd(slurm, *command: str) -> str:
    """A SLURM client command against the test cluster; its stdout."""
    done = subprocess.run(command, capture_output=True, text=True, env={**ENV, **slurm["env"]}, timeout=60)
    assert done.returncode == 0, f"{' '.join(command)}: {done.stderr}"
    return done.stdout


def start_sweep(scratch: Path, slurm, *overrides: str) -> subprocess.Popen:
    """`python run.py -m hydra/launcher=slurm hydra.launcher.partition=quarl OVERRIDES` in the
    background (one CPU and 1 GB per cell, so two cells run side by side on two cores)."""
    args = ["-m", "hydra/launcher=slurm", f"hydra.launcher.partition={slurm['partition']}",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1", *overrides]
    with open(scratch / "sweep.log", "a") as out:
        return subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], cwd=scratch, text=True,
                                env={**ENV, **slurm["env"]}, stdout=out, stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen, scratch: Path) -> str:
    """Wait for a sweep started by `start_sweep`; its output (it must succeed)."""
    rc = proc.wait(timeout=600)
    out = (scratch / "sweep.log").read_text()
    assert rc == 0, out
    return out


def wait_until(what: str, ready: Callable[[], object], proc: subprocess.Popen, scratch: Path, timeout: float = 300):
    """Poll `ready()` while the sweep runs; its first true value."""
    deadline = time.monotonic() + timeout
    while not (value := ready()):
        assert proc.poll() is None, f"the sweep ended before {what}:\n{(scratch / 'sweep.log').read_text()}"
        assert time.monotonic() < deadline, f"no {what} after {timeout:.0f} s"
        time.sleep(0.1)
    return value


def job_ids(scratch: Path) -> list[str]:
    """The SLURM job ids of the cells run in `scratch` (submitit's folder per job: `ID` for a lone
    cell, `ID_TASK` for each cell of an array)."""
    return sorted({p.parent.name for p in scratch.glob("outputs/multirun/*/*/.submitit/*/*_log.out")})


def job_logs(scratch: Path) -> str:
    """Everything the cells wrote: submitit's job logs and the run dirs' logs."""
    files = [*scratch.glob("outputs/multirun/*/*/.submitit/*/*_log.*"), *scratch.glob("outputs/multirun/*/*/*/*.log")]
    return "\n".join(p.read_text(errors="replace") for p in sorted(files))


def checkpoint_step(scratch: Path) -> int:
    """The env step of the cell's current training checkpoint (0: none yet)."""
    import torch

    for state in scratch.glob("outputs/policies/*.ckpt/state.pt"):
        try:
            return int(torch.load(state, weights_only=False)["counters"]["num_timesteps"])
        except (OSError, EOFError, RuntimeError, KeyError):  # replaced while we read it
            return 0
    return 0


def release_when_held(slurm, job: str, proc: subprocess.Popen, scratch: Path) -> None:
    """SLURM holds a requeued job (reason BeginTime, about two minutes): start it now."""
    held = lambda: slurm_cmd(slurm, "squeue", "-h", "-j", job, "-o", "%T %r").split() == ["PENDING", "BeginTime"]  # noqa: E731
    wait_until(f"job {job} held after its requeue", held, proc, scratch, timeout=120)
    slurm_cmd(slurm, "scontrol", "update", f"jobid={job}", "StartTime=now")


def events(log: str, text: str) -> int:
    """How many times a line holding `text` was logged (a record lands in several files and formats:
    counted once per time stamp)."""
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}")
    return len({m.group() for line in log.splitlines() if text in line and (m := stamp.search(line))})


def resumed_steps(log: str) -> list[int]:
    """The steps the cell's runs resumed training at (each run logs it to two files)."""
    return sorted({int(n) for n in re.findall(r"Resuming from the checkpoint at step (\d+) of", log)})


def check_one_cell_finished_whole(scratch: Path, steps: int) -> None:
    """The store holds the cell and its fp32 baseline once each, done, and the policy took `steps`."""
    df = results.load(scratch / "outputs/results.sqlite")
    assert sorted(df["quant"]) == ["fp32", "ptq"] and (df["status"] == "done").all(), df[["quant", "status"]]
    assert df["cell_key"].is_unique
    (meta_file,) = scratch.glob("outputs/policies/*/meta.json")
    meta = json.loads(meta_file.read_text())
    assert meta["timesteps"] == steps and 0 < meta["resumed_at"] < steps
    assert not list(scratch.glob("outputs/policies/*.ckpt"))


# ----------------------------------------------------------------------------- SLURM


def test_slurm_sweep_lands_every_record_collates_and_shows_in_status(scratch, slurm):
    png_only = "hydra.callbacks.collate.formats=[png]"
    out = finish(start_sweep(scratch, slurm, "algo=ppo,a2c", *FAST[:3], png_only), scratch)
    store = scratch / "outputs/results.sqlite"
    df = results.load(store)
    assert sorted(zip(df["algo"], df["quant"])) == [("a2c", "fp32"), ("a2c", "ptq"), ("ppo", "fp32"), ("ppo", "ptq")]
    assert (df["status"] == "done").all()
    assert len(job_ids(scratch)) == 2 and events(job_logs(scratch), "Starting with JobEnvironment(job_id=") == 2
    (collated,) = scratch.glob("outputs/multirun/*/*/collate/README.md")  # the end-of-sweep callback
    assert list(collated.parent.rglob("*.png")) and not list(collated.parent.rglob("*.pdf"))  # its formats
    assert "Collated 4 records" in out
    # no accounting database here: submitit's sacct error is shown once, not on every poll
    assert "Call #1 - Bypassing sacct error" in out and "Call #2 - Bypassing sacct error" not in out
    status = subprocess.run([str(Path(sys.executable).parent / "quarl"), "status", "--store", str(store)],
                            capture_output=True, text=True, env=ENV, check=True).stdout
    assert [line.split()[-2:] for line in status.splitlines()
            if line.startswith(("a2c", "ppo"))] == [["done", "done"]] * 2


def test_an_optuna_search_runs_its_trials_as_slurm_jobs_telling_one_study(scratch, slurm):
    """hydra/sweeper=optuna through the SLURM launcher: two trials at once (n_jobs=2), each cell a
    SLURM job, all told to the one study in optuna.db beside the store; the same command again
    resumes the study and launches nothing."""
    from tests.test_search import study

    search = ["hydra/sweeper=optuna", "hydra.sweeper.sampler.seed=0", "hydra.sweeper.n_trials=2",
              "hydra.sweeper.n_jobs=2", "algo.hyperparams.learning_rate=tag(log, interval(0.0001, 0.01))", *TINY,
              "train.steps=1500"]
    finish(start_sweep(scratch, slurm, *search), scratch)
    trials = study(scratch).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"]
    assert len({t.params["algo.hyperparams.learning_rate"] for t in trials}) == 2
    df = results.load(scratch / "outputs/results.sqlite")
    ptq = df[df["quant"] == "ptq"]
    assert len(ptq) == 2 and (ptq["status"] == "done").all() and ptq["algo.hyperparams.learning_rate"].nunique() == 2
    jobs = job_ids(scratch)
    assert len(jobs) == 2 and events(job_logs(scratch), "Starting with JobEnvironment(job_id=") == 2
    out = finish(start_sweep(scratch, slurm, *search), scratch)
    assert "2 of 2 trials finished" in out and job_ids(scratch) == jobs


def test_requeued_cell_resumes_from_its_checkpoint(scratch, slurm):
    """`scontrol requeue` (what a preemption with PreemptMode=REQUEUE does) after the first checkpoint."""
    proc = start_sweep(scratch, slurm, *LONG_CELL, *TINY)
    wait_until("a training checkpoint", lambda: checkpoint_step(scratch), proc, scratch)
    (job,) = job_ids(scratch)
    slurm_cmd(slurm, "scontrol", "requeue", job)
    release_when_held(slurm, job, proc, scratch)
    finish(proc, scratch)
    log = job_logs(scratch)
    assert "DUE TO JOB REQUEUE" in log and events(log, "Starting with JobEnvironment(job_id=") == 2
    (resumed,) = resumed_steps(log)
    assert resumed > 0
    check_one_cell_finished_whole(scratch, STEPS)  # as many steps as an uninterrupted run
    assert "Restarts=1" in slurm_cmd(slurm, "scontrol", "show", "job", job)


def test_timed_out_cell_is_resubmitted_up_to_max_num_timeout_then_rerun_by_the_sweep(scratch, slurm):
    """SIGUSR2 is what SLURM sends a cell `signal_delay_s` before `timeout_min` (and what submitit's
    own tests send): submitit calls the launcher's checkpoint and requeues the job, at most
    `max_num_timeout` times; after that the cell is recorded as failed and re-running the sweep
    runs exactly it. Every run resumes the training checkpoint. (submitit takes the signal for a
    timeout once the job ran min(0.8 * timeout_min, timeout_min - 10) minutes, at once below 10
    minutes; before that it is a preemption, requeued without limit.)"""
    sweep = [*TIMED_OUT_CELL, *TINY, "hydra.launcher.timeout_min=5", "hydra.launcher.max_num_timeout=1"]
    proc = start_sweep(scratch, slurm, *sweep)
    first = wait_until("a training checkpoint", lambda: checkpoint_step(scratch), proc, scratch)
    (job,) = job_ids(scratch)
    slurm_cmd(slurm, "scancel", "--signal=USR2", job)  # 1st time limit: requeued (1 of max_num_timeout=1)
    release_when_held(slurm, job, proc, scratch)
    (resumed,) = wait_until("the resubmitted job's resume", lambda: resumed_steps(job_logs(scratch)), proc, scratch)
    assert resumed >= first
    wait_until("a checkpoint of the resumed run", lambda: checkpoint_step(scratch) > resumed, proc, scratch)
    slurm_cmd(slurm, "scancel", "--signal=USR2", job)  # 2nd: not requeued, the cell fails
    finish(proc, scratch)
    log = job_logs(scratch)
    assert events(log, "this job is timed-out") == 2 and events(log, "Requeued job") == 1
    assert "Job not requeued because: timed-out too many times" in log
    df = results.load(scratch / "outputs/results.sqlite").set_index("quant")
    assert df.loc["ptq", "status"] == "failed" and "timed-out too many times" in df.loc["ptq", "message"]

    again = finish(start_sweep(scratch, slurm, *sweep), scratch)  # what the user does: the same command
    assert "Call #" in again  # it went through SLURM again
    steps = resumed_steps(job_logs(scratch))
    assert len(steps) == 2 and 0 < steps[0] < steps[1]  # each run went on from the last checkpoint
    check_one_cell_finished_whole(scratch, TIMED_OUT_STEPS)


# ----------------------------------------------------------------------------- Ray


def test_actorq_joins_the_running_ray_cluster_and_survives_a_killed_actor(scratch, ray_head):
    chains = []
    log = run_killing_actor_0(scratch, "ray", f"actorq.ray_address={ray_head['address']}",
                              before_kill=lambda pid: chains.append(services.ancestors(pid)))
    # the actor process is a worker of the cluster's raylet, under the `ray start --head` we started:
    # the run joined that cluster instead of starting a Ray of its own
    assert ray_head["pids"]["ray"] in chains[0], chains
    assert "Actor 0 started (Ray actor" in log
