"""benchmarks/device/ledger.py, the device ledger (issue 59): job selection under a budget, done
derived from landed records, a bad entry refused, a call of trivial jobs on the CPU, landing a fake
call's files, and the real ledger's Atari job end to end on the CPU with a tiny budget."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import ENV, ROOT

sys.path.insert(0, str(ROOT / "benchmarks/device"))
import ledger  # noqa: E402  (benchmarks/device is no package)
import ledger_jobs  # noqa: E402
import ledger_land  # noqa: E402
import ledger_run  # noqa: E402

RECORD = json.loads(next((ROOT / "docs/reproduction/records").glob("*.record.json")).read_text())

BASE = """\
overhead_estimate_s: 30
vars: {word: hello}
jobs:
  - name: gate
    gate: true
    command: echo {word} gate
    measured_s: 2
    done_when: {}
"""


def write_ledger(tmp: Path, jobs: str, base: str = BASE) -> Path:
    path = tmp / "ledger.yaml"
    path.write_text(base + jobs)
    return path


def record(seed: int, bits: int, name: str) -> dict:
    """A landed record (a real one's layout) for dqn/cartpole at `seed` with `bits`-bit actors."""
    r = json.loads(json.dumps(RECORD))
    r["run"].update(algo="dqn", env="cartpole", cell_key=name, started_at="2026-11-29T00:00:00+00:00", status="done")
    r["config"]["seed"], r["config"]["quant"] = seed, {"actor_bits": bits}
    return r


DONE = "    done_when: {files: {glob: a}}\n"
RECORDS_JOB = """\
  - name: cells
    command: "true"
    estimate_s: 50  # never run
    done_when:
      records:
        where: {run.algo: dqn, run.env: cartpole}
        each: {config.seed: [0, 1], config.quant.actor_bits: [32, 8]}
"""


def test_jobs_are_picked_in_order_while_they_fit_the_budget(tmp_path):
    jobs = """\
  - name: first
    command: "true"
    measured_s: 100
    done_when: {files: {glob: never/*, count: 1}}
  - name: big
    command: "true"
    estimate_s: 300
    done_when: {files: {glob: never/*, count: 1}}
  - name: held
    hold: waits for something
    command: "true"
    measured_s: 10
    done_when: {files: {glob: never/*, count: 1}}
  - name: small
    command: "true"
    measured_s: 50
    done_when: {files: {glob: never/*, count: 1}}
  - name: long
    resumable: true
    min_s: 100
    command: "true"
    estimate_s: 5000
    done_when: {files: {glob: never/*, count: 1}}
"""
    book = ledger_jobs.load(write_ledger(tmp_path, jobs))
    landed = ledger_jobs.Landed([], tmp_path, tmp_path / "state")
    chosen = [(j.name, round(s)) for j, s in ledger_jobs.plan(book, 400, landed)]
    # 400 - 30 overhead - 2 gate = 368: first (100), big (300) no longer fits, small (50), long gets the rest
    assert chosen == [("gate", 2), ("first", 100), ("small", 50), ("long", 218)]
    assert [j.name for j, _ in ledger_jobs.plan(book, 150, landed)] == ["gate", "first"]
    assert ledger_jobs.plan(book, 20, landed) == []  # not even the gate fits
    assert ledger_jobs.pick(book, 60, landed, {"first"}).name == "small"
    assert ledger.main(["--ledger", str(tmp_path / "ledger.yaml"), "plan", "--only", "nosuchjob"]) == 2


def test_done_is_derived_from_the_landed_records(tmp_path):
    book = ledger_jobs.load(write_ledger(tmp_path, RECORDS_JOB))
    job = book.job("cells")
    records = [record(0, 32, "a"), record(0, 8, "b"), record(1, 32, "c")]
    landed = ledger_jobs.Landed(records, tmp_path, tmp_path)
    assert ledger_jobs.needs(job, landed) == "1 of 4 record cells: seed=1 actor_bits=8"
    assert "| cells | 50 | estimate | no | 1 of 4 record cells" in ledger_jobs.status_table(book, landed)
    landed.records.append(record(1, 8, "d"))
    assert ledger_jobs.needs(job, landed) is None
    assert "| cells | 50 | estimate | yes |  |" in ledger_jobs.status_table(book, landed)
    assert ledger_jobs.plan(book, 540, landed) == [(book.job("gate"), 2.0)]


def test_the_real_ledger_loads_and_says_what_is_done():
    book = ledger_jobs.load(ledger_jobs.LEDGER)
    table = ledger_jobs.status_table(book, ledger_jobs.Landed.read())
    assert "| actorq-cartpole | 116 | measured | yes |" in table  # the 2026-11-28 H200 records
    assert "| atari-ppo-pong-s0 | 1400 | estimate | no | 9 of 9 record cells" in table
    atari = book.job("atari-ppo-pong-s0").command
    assert "+sweep=ptq_table_atari algo=ppo env=atari/pong seed=0 train.device=cuda train.steps=1000000" in atari


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("  - name: x\n    command: 'true'\n    done_when: {files: {glob: a}}\n", "exactly one of measured_s"),
        (
            "  - name: x\n    command: 'true'\n    measured_s: 5\n    estimate_s: 5\n" + DONE,
            "exactly one of measured_s",
        ),
        ("  - name: x\n    command: 'true'\n    measured_s: -1\n    done_when: {files: {glob: a}}\n", "positive"),
        (
            "  - name: x\n    command: 'true'\n    measured_s: 5\n    done_when: {files: {glob: a}}\n    budget: 3\n",
            "unknown keys ['budget']",
        ),
        (
            "  - name: x\n    command: 'echo {nothing}'\n    measured_s: 5\n    done_when: {files: {glob: a}}\n",
            "the placeholder {nothing} is neither a var",
        ),
        ("  - name: x\n    command: 'true'\n    measured_s: 5\n", "done_when must name one of"),
        (
            "  - name: gate\n    command: 'true'\n    measured_s: 5\n    done_when: {files: {glob: a}}\n",
            "job names used twice: ['gate']",
        ),
        ("  - name: Bad Name\n    command: 'true'\n    measured_s: 5\n", "must be lower-case letters"),
    ],
)
def test_a_bad_entry_is_refused_with_what_is_wrong(tmp_path, capsys, entry, message):
    path = write_ledger(tmp_path, entry)
    with pytest.raises(ledger_jobs.LedgerError, match=message.replace("[", r"\[").replace("{", r"\{")):
        ledger_jobs.load(path)
    assert ledger.main(["--ledger", str(path), "status"]) == 2
    assert "ledger: ledger.yaml, job" in capsys.readouterr().err or message.startswith("job names")


def test_a_call_runs_trivial_jobs_and_lands_them(tmp_path, monkeypatch):
    """`run` on the CPU: the gate, a job leaving a record and a file, a resumable job cut at its
    timeout that keeps its state, a job too big to fit; then `land` of what it left."""
    monkeypatch.setattr(ledger_run, "STOP_GRACE_S", 1.0)
    monkeypatch.setattr(ledger_run, "RESERVE_S", 0.0)
    import quarl.report.build  # noqa: F401  (imported once here: packing after each job then takes no seconds)

    real = next((ROOT / "docs/reproduction/records").glob("*.record.json"))
    jobs = f"""\
  - name: maker
    command: mkdir -p {{out}}/runs/cell && cp {real} {{out}}/runs/cell/record.json && echo {{word}} > {{out}}/note.md
    estimate_s: 1
    leaves: [note.md]
    done_when: {{files: {{glob: never/*, count: 1}}}}
  - name: trainer
    resumable: true
    min_s: 2
    command: echo step >> {{state}}/ckpt.txt && sleep 60
    estimate_s: 500
    done_when: {{files: {{glob: never/*, count: 1}}}}
  - name: toobig
    command: "true"
    measured_s: 900
    done_when: {{files: {{glob: never/*, count: 1}}}}
"""
    path = write_ledger(tmp_path, jobs)
    out, state = tmp_path / "out", tmp_path / "state"
    args = ["--ledger", str(path), "--records", str(tmp_path / "none"), "--state", str(state), "run"]
    args += ["--budget-s", "5", "--spent-s", "1", "--out", str(out), "--work", str(tmp_path / "work")]
    assert ledger.main(args) == 0
    summary = json.loads((out / "ledger.json").read_text())
    ran = [(j["name"], j["completed"]) for j in summary["jobs"]]
    assert ran == [("gate", True), ("maker", True), ("trainer", False)]  # toobig does not fit
    assert summary["jobs"][2]["ended"].startswith("cut at its") and summary["jobs"][2]["seconds"] < 5
    back = ["files.tar.gz", "ledger.json", "log.txt", "records.tar.gz", "state.tar.00"]
    assert sorted(p.name for p in out.iterdir()) == back
    assert "hello gate" in (out / "log.txt").read_text()
    # back here
    runs, records, mkdocs = tmp_path / "runs", tmp_path / "records", tmp_path / "mkdocs.yml"
    mkdocs.write_text('nav:\n  - Runs:\n      - "old": reproduction/device_runs/old.md\n  - Next: next.md\n')
    (out / "ledger.json").write_text(json.dumps({**summary, "device": "GPU 0: NVIDIA H200 (UUID: x)"}))
    text = ledger_land.land(out, path, records, runs, state, mkdocs)
    assert "Records: 1 new" in text and len(list(records.glob("*.record.json"))) == 1
    page = next(runs.glob("*_h200.md"))
    assert "| maker | completed |" in page.read_text() and "| trainer | cut at its" in page.read_text()
    assert (runs / page.stem / "maker/note.md.txt").read_text() == "hello\n"  # .md kept off the site's pages
    assert (state / "trainer/ckpt.txt").read_text() == "step\n"
    assert json.loads((state / "trainer" / ledger_jobs.SPENT_FILE).read_text())["calls"] == 1
    assert f'- "{page.stem[:10]}, H200 (ledger)": reproduction/device_runs/{page.stem}.md' in mkdocs.read_text()
    book = ledger_jobs.load(path)
    assert book.job("maker").measured and book.overhead_measured and book.overhead_s == 1
    assert "# never run" not in path.read_text()


def test_landing_a_fake_call(tmp_path):
    """A files_at folder as the device tool brings it back: records (a new one and one already
    landed), an AMP CSV appended with its run number, state in two parts, a resumable job now done."""
    jobs = """\
  - name: amp
    command: "true"
    # an old comment about the estimate
    estimate_s: 80
    land:
      append_csv: {file: amp.csv, to: AMP, number: run, per: device}
    done_when: {csv: {path: AMP, where: {device: NVIDIA H200}, distinct: [run], count: 2}}
  - name: agent
    resumable: true
    command: "true"
    estimate_s: 1000
    done_when:
      records:
        where: {run.algo: dqn}
        each: {config.seed: [0]}
"""
    amp = tmp_path / "amp.csv"
    amp.write_text(
        "policy,x,device,run\nPolicy A,1,NVIDIA H200,1\nPolicy A,1,NVIDIA H100,1\nPolicy A,1,NVIDIA H100,2\n"
    )
    path = write_ledger(tmp_path, jobs.replace("AMP", str(amp)))
    files_at, records, state = tmp_path / "files_at", tmp_path / "records", tmp_path / "state"
    files_at.mkdir()
    records.mkdir()
    (records / "old.record.json").write_text(json.dumps(record(5, 8, "old")))

    def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(files_at / "records.tar.gz", "w:gz") as tar:
        add(tar, "new.record.json", json.dumps(record(0, 8, "new")).encode())
        add(tar, "old.record.json", b"{}")  # already landed: kept as it was
        add(tar, "../evil.record.json", b"{}")  # not a plain name: skipped
    with tarfile.open(files_at / "files.tar.gz", "w:gz") as tar:
        add(tar, "amp/amp.csv", b"policy,x,device\nPolicy A,2,NVIDIA H200\n")
        add(tar, "amp/job.log", b"measured\n")
    whole = io.BytesIO()
    with tarfile.open(fileobj=whole, mode="w") as tar:
        add(tar, "agent/policies/model.bin", bytes(range(256)) * 40)
        add(tar, f"agent/{ledger_jobs.SPENT_FILE}", b'{"spent_s": 700.0, "calls": 2}')  # this call's 400 s added
    data = whole.getvalue()
    (files_at / "state.tar.00").write_bytes(data[:5000])
    (files_at / "state.tar.01").write_bytes(data[5000:])
    summary = {
        "started": "2026-11-30T10:00:00+00:00",
        "device": "GPU 0: NVIDIA H200 (UUID: GPU-1)\ntorch 2.11",
        "budget_s": 540,
        "overhead_s": 25.4,
        "vars": {},
        "ended": "3 s of the budget left",
        "jobs": [
            {"name": "amp", "seconds": 81.2, "timeout_s": 150, "rc": 0, "ended": "completed", "completed": True},
            {
                "name": "agent",
                "seconds": 400.0,
                "timeout_s": 400,
                "rc": 0,
                "ended": "completed",
                "completed": True,
                "resumable": True,
            },
        ],
    }
    (files_at / "ledger.json").write_text(json.dumps(summary))
    (state / "agent").mkdir(parents=True)
    (state / "agent" / "stale.txt").write_text("the state before this call: replaced by the one that came back")
    (files_at / "log.txt").write_text("all of it\n")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "2026-11-30_h200.md").write_text("an earlier call that day\n")
    text = ledger_land.land(files_at, path, records, runs, state, tmp_path / "no-mkdocs.yml")
    assert sorted(p.name for p in records.iterdir()) == ["new.record.json", "old.record.json"]
    assert json.loads((records / "old.record.json").read_text())["config"]["seed"] == 5
    assert "Records: 1 new" in text and (runs / "2026-11-30_h200_call2.md").exists()
    assert amp.read_text().splitlines()[-1] == "Policy A,2,NVIDIA H200,2"  # the H200's second run
    assert (tmp_path / "agents/agent/policies/model.bin").read_bytes() == bytes(range(256)) * 40  # done: moved
    assert not (state / "agent").exists() and not (tmp_path / "agents/agent/stale.txt").exists()
    book = ledger_jobs.load(path)
    assert ledger_jobs.needs(book.job("amp"), ledger_jobs.Landed.read(records, tmp_path, state)) is None
    text = path.read_text()
    assert "    # 2026-11-30_h200_call2: the job's own run by the ledger\n    measured_s: 81\n" in text
    assert "an old comment" not in text and "overhead_measured_s: 25" in text
    assert "    # 2026-11-30_h200_call2: 2 ledger call(s) in all\n    measured_s: 700\n" in text  # the agent's calls
    with pytest.raises(ledger_jobs.LedgerError, match="has landed already: .*2026-11-30_h200_call2.md"):
        ledger_land.land(files_at, path, records, runs, state, tmp_path / "no-mkdocs.yml")  # no rows twice
    with pytest.raises(ledger_jobs.LedgerError, match="no ledger.json"):
        ledger_land.land(tmp_path, path, records, runs, state, tmp_path / "no-mkdocs.yml")


@pytest.mark.skipif(importlib.util.find_spec("ale_py") is None, reason="ale_py (quarl[atari]) is not installed")
def test_the_atari_job_trains_quantizes_and_evaluates_on_the_cpu(tmp_path):
    """The real ledger's atari-ppo-pong-s0, with a tiny budget on the CPU: PPO trains 256 steps (2
    envs), then fp16, int8 and 2 bits are evaluated (one short game each); records and state come back."""
    import ale_py.roms

    if not (Path(ale_py.roms.__file__).parent / "pong.bin").exists():
        pytest.skip("the Pong ROM is missing")
    out, state = tmp_path / "out", tmp_path / "state"
    # 2 envs in this process (subproc=false: env processes add 10 s here; tests/train/test_subproc_envs.py
    # has them): one rollout of 128 steps each
    tiny = ["steps=256", "device=cpu", "episodes=1", "bits=2", "ckpt=128", "subproc=false"]
    tiny += ["extra=algo.n_envs=2 env.kwargs.max_episode_steps=400"]  # games of at most 100 agent steps
    command = [sys.executable, str(ROOT / "benchmarks/device/ledger.py"), "--records", str(tmp_path / "records")]
    command += ["--state", str(state), "run", "--only", "atari-ppo-pong-s0", "--budget-s", "400", "--spent-s", "0"]
    command += ["--out", str(out), "--work", str(tmp_path / "work"), *[f"--var={v}" for v in tiny]]
    done = subprocess.run(command, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + (out / "log.txt").read_text()
    summary = json.loads((out / "ledger.json").read_text())
    assert [(j["name"], j["ended"]) for j in summary["jobs"]] == [("atari-ppo-pong-s0", "completed")]
    with tarfile.open(out / "records.tar.gz") as tar:
        runs = [json.load(tar.extractfile(m)) for m in tar.getmembers()]  # type: ignore[arg-type]
    assert sorted(r["config"]["quant"]["bits"] for r in runs) == [2, 8, 16, 32]  # fp32, fp16, int8, 2 bits
    assert {(r["run"]["env"], r["run"]["training_device"], r["config"]["train"]["steps"]) for r in runs} == {
        ("atari/pong", "cpu", 256)
    }
    assert summary["state"].startswith("2 part(s)") and (state / "atari-ppo-pong-s0/results.sqlite").exists()
    log = (out / "log.txt").read_text()
    assert "Training fp32 ppo on PongNoFrameskip-v4 for 256 steps" in log and "Using cached policy" in log
    shutil.rmtree(tmp_path / "work")
