"""benchmarks/bench_actorq_gpu.py, the GPU study's prepared script, rehearsed on the CPU with tiny
budgets: every part runs, and its records are ones the report reads."""

import subprocess
import sys
import tarfile

import pandas as pd

from quarl.collate import load
from quarl.collate.actorq_timing import time_to_reward
from quarl.store.sqlite import Store
from tests.conftest import ENV, ROOT


def test_the_gpu_script_rehearses_on_the_cpu_and_writes_records_the_report_reads(tmp_path):
    out = tmp_path / "gpu"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/bench_actorq_gpu.py"), "--rehearse", "--out", str(out)],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert "CUDA smoke: passed on cpu" in log and "skipped, this CPU lists neither" in log
    with tarfile.open(out / "records.tar.gz") as tar:
        # DQN at the tuned rate and at the ablation's, and D4PG; fp32 and int8 each
        assert len([n for n in tar.getnames() if n.endswith(".record.json")]) == 6
    study = load(out / "results.sqlite")
    runs = study.done
    assert set(runs["training_device"]) == {"cpu"} and set(runs["stopped_by"]) <= {"time_limit", "target"}
    assert (runs["learner_updates_per_s"] > 0).all() and (runs["actor_steps_per_s"] > 0).all()
    ttr = time_to_reward(study, Store(out / "results.sqlite").curves())
    assert sorted(zip(ttr["algo"], ttr["training"], ttr["precision"])) == [
        ("d4pg", "d4pg", "fp32"),
        ("d4pg", "d4pg", "int8"),
        ("dqn", "dqn (actorq.samples_per_insert=8)", "fp32"),
        ("dqn", "dqn (actorq.samples_per_insert=8)", "int8"),
        ("dqn", "dqn (actorq.samples_per_insert=null)", "fp32"),
        ("dqn", "dqn (actorq.samples_per_insert=null)", "int8"),
    ]
    assert ttr.loc[(ttr["algo"] == "dqn") & (ttr["precision"] == "int8"), "speedup (paper)"].iloc[0] == 3.70
    table = (out / "actorq_gpu.md").read_text()
    assert "| dqn    | cartpole" in table and "198.22" in table
    assert "-bound (actors blocked " in table  # each row says which side held the run back
    amp = pd.read_csv(out / "amp.csv")
    assert list(amp["policy"]) == ["Policy A", "Policy B", "Policy C"] and list(amp["speedup (paper)"]) == [
        0.87,
        1.04,
        1.61,
    ]
    assert (amp[["updates/s fp32", "updates/s bf16", "env steps/s fp32", "env steps/s bf16"]] > 0).all().all()
