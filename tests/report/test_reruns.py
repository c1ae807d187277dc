"""Runs of one setting from several machines or days: the records folder keeps both (a re-run of a
cell lands beside the earlier run, not over it), the report's ActorQ section shows each day apart,
and its throughput ratio is read from its own columns. The ActorQ prose types no number by hand."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from quarl.report import build, time_to_reward
from quarl.report.campaign import load_campaign
from quarl.store.record_files import write_json
from tests.collate.test_actorq_timing import _actorq_record
from tests.conftest import ROOT
from tests.records import record


def _two_days() -> list[dict]:
    """fp32 and int8 actors, three seeds each, run on 2026-11-27 and again (same cells) on 2026-11-28."""
    records = []
    for day, slow in (("2026-11-27", 60.0), ("2026-11-28", 40.0)):
        for bits, at in ((32, slow), (8, 30.0)):
            for seed in range(3):
                rec = _actorq_record(bits, seed, reach_at=at + seed, env_steps=5000 + 100 * seed,
                                     first_experience_s=1.0 + seed)
                rec["run"]["started_at"] = f"{day}T10:0{seed}:00+00:00"
                records.append(rec)
    return records


def test_archiving_a_rerun_of_a_cell_keeps_both_runs(tmp_path: Path):
    runs = _two_days()
    for i, rec in enumerate(runs):
        write_json(rec, tmp_path / "outputs" / f"job{i}" / "record.json")
    records = tmp_path / "records"
    assert build.archive(tmp_path / "outputs", records) == 12  # 6 cells, each run on two days
    assert build.archive(tmp_path / "outputs", records) == 12  # archiving again writes the same files
    first = runs[0]
    name = build.record_name(first)
    assert name == f"{first['run']['cell_key']}.20261127T100000.record.json"
    (records / name).rename(records / f"{first['run']['cell_key']}.record.json")  # as records were once named
    assert build.archive(tmp_path / "outputs", records) == 12  # the old name is rewritten, not doubled


def test_the_actorq_section_keeps_each_day_apart_and_its_ratio_reads_from_its_columns(tmp_path: Path):
    records = tmp_path / "records"
    for rec in [*_two_days(), record("dqn", "cartpole", seed=0), record("dqn", "cartpole", seed=0, reward=90.0)]:
        write_json(rec, records / build.record_name(rec))
    campaign = load_campaign(records)
    assert len(campaign.runs[campaign.runs["quant"] == "ptq"]) == 1  # a policy's re-run: the newest record
    ttr = campaign.time_to_reward
    assert sorted(ttr["batch"]) == ["2026-11-27"] * 2 + ["2026-11-28"] * 2 and (ttr["seeds"] == 3).all()
    section = time_to_reward.actorq_section(campaign, [], {"2026-11-28": "device_runs/2026-11-28_h200.md"})
    header, rows = _table(section)
    assert {r["started (UTC day)"] for r in rows} == {"2026-11-27", "[2026-11-28](device_runs/2026-11-28_h200.md)"}
    for day in ("2026-11-27", "2026-11-28"):
        of_day = [r for r in rows if day in r["started (UTC day)"]]
        fp32, int8 = (next(r for r in of_day if r["actors"] == p) for p in ("fp32", "int8"))
        rate = "env steps/s (from the first env step; geometric mean)"
        ratio = float(int8["throughput ratio (env steps/s, int8 / fp32)"].split(" ")[0])
        assert ratio == pytest.approx(float(int8[rate]) / float(fp32[rate]), abs=0.01)
        times = "time to target s (from the first env step; geometric mean), per seed"
        speedup = float(int8["speedup vs fp32 [95% CI]"].split(" ")[0])
        assert speedup == pytest.approx(float(fp32[times].split(" ")[0]) / float(int8[times].split(" ")[0]), abs=0.01)
    assert "Here 1 of 1 trainings ran on more than one day" in section and "started 2026-11-28:" in section
    by_day = r"int8 speedup by day .*: \d\.\d\d \[.*\] \(2026-11-27\), \d\.\d\d \[.*\] \(2026-11-28\)"
    assert re.search(by_day, section)


def _table(section: str) -> tuple[list[str], list[dict[str, str]]]:
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("| ").split(" | ")]
    return header, [dict(zip(header, (c.strip() for c in line.strip("| ").split(" | ")))) for line in lines[2:]]


def test_the_actorq_prose_types_no_number():
    """Every figure of the section comes from the records: the template's text, code spans and
    names with digits (fp32, int8, V100) aside, holds no digit."""
    text = (ROOT / "src/quarl/report/templates/actorq.md").read_text()
    text = re.sub(r"`[^`]*`|\{\{[^}]*\}\}|\b[A-Za-z]+[A-Za-z_]*\d+\w*", "", text)
    assert not re.findall(r".{20}\d.{10}", text)


def test_the_summary_names_each_setting_and_a_passing_average(tmp_path: Path):
    """The summary listed 'dqn 2048x2048x2048 on acrobot' five times with no setting, and passing
    averages without their caveat: each item now names its training and day, and says so."""
    records = tmp_path / "records"
    runs = _two_days()
    for rec in runs:
        if rec["run"]["started_at"].startswith("2026-11-28"):
            rec["run"]["reward_mean"] = -200.0  # the final policies score below the target, -107.45
        write_json(rec, records / build.record_name(rec))
    line = time_to_reward.summary_line(load_campaign(records))
    items = line.split(": ", 1)[1].split("; ")
    assert sum("started 2026-11-27: " in item for item in items) == 1
    assert sum("started 2026-11-28: " in item for item in items) == 1
    assert "a passing average" in line.split("started 2026-11-28: ", 1)[1]
    assert "a passing average" not in line.split("started 2026-11-27: ", 1)[1].split("started 2026-11-28")[0]


def test_the_intro_counts_the_cells_outside_actorq_whose_earlier_runs_it_sets_aside(tmp_path: Path):
    records = tmp_path / "records"
    records.mkdir()
    ptq = record("dqn", "cartpole", seed=0)
    for day in ("2026-11-27", "2026-11-28"):  # one PTQ cell run twice
        ptq["run"]["started_at"] = f"{day}T10:00:00+00:00"
        write_json(ptq, records / build.record_name(ptq))
    write_json(record("dqn", "cartpole", seed=1), records / "once.record.json")
    for rec in _two_days():  # ActorQ's re-runs are shown by day, not set aside
        write_json(rec, records / build.record_name(rec))
    assert build.superseded(records) == 1
    intro = build.note("intro", files=0, done=0, coverage="", superseded=1)
    assert "one cell outside ActorQ has earlier runs set aside" in intro
    assert "no cell outside ActorQ has run twice" in build.note("intro", files=0, done=0, coverage="", superseded=0)


def test_the_q_gap_reason_reads_each_seed_from_the_measured_file(tmp_path: Path):
    from quarl.report import mechanisms

    assert "not measured here" in mechanisms.q_gaps(tmp_path)
    columns = "int8 weights,median abs Q,median gap,median Q error,states where error > gap,action agreement,"
    (tmp_path / mechanisms.Q_GAPS).write_text(
        "# python benchmarks/bench_edge_agreement.py --algo dqn --seeds 0,1\n"
        + columns + "fp32 return,int8 return,seed,states\n"
        + "per tensor,76.0,0.043,0.265,0.944,0.745,500.0,500.0,0,5000\n"
        + "per channel,76.0,0.043,0.204,0.909,0.508,500.0,193.4,0,5000\n"
        + "per tensor,81.2,0.051,0.31,0.9,0.62,500.0,211.0,1,4000\n"
    )
    text = mechanisms.q_gaps(tmp_path)
    assert "measured on 2 policies" in text
    assert "seed 0: gap 0.043 on Q-values near 76, moved by 0.265 (more than the gap on 94% of the states), " \
           "agreement 74%, return 500 against fp32's 500" in text
    assert "seed 1:" in text and "return 211 against fp32's 500" in text
    assert "193" not in text  # per-channel rows are not quarl's PTQ default
