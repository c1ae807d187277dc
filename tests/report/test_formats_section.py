"""The report's number-format section from records written by hand: each format beside the integer
at the nearest bits per weight, format - integer paired by seed, Holm's correction over the section,
and records of formats and integers from different sweeps read together (a store that mixes them)."""

from __future__ import annotations

from pathlib import Path

from quarl.report import actorq_formats, build, formats
from quarl.report.campaign import Inputs, in_a_format
from quarl.store.record_files import write_json
from tests.collate.test_actorq_timing import _actorq_record
from tests.records import record

SWEEPS = Path(formats.facts.SWEEPS)
CARTPOLE = {"env.return_scale": 500.0, "env.kwargs.max_episode_steps": 500}


def _cell(seed: int, reward: float, bits: int, sweep: str, **config) -> dict:
    rec = record("ppo", "cartpole", bits=bits, seed=seed, reward=reward, fp32=500.0, scheme="quarl_code",
                 config={**CARTPOLE, **config}, run={"run_dir": f"outputs/{sweep}/algo=ppo,+sweep={sweep},seed={seed}"})
    return rec


def _records(folder: Path) -> None:
    """ptq_classic's fp32 and int4/6/8 cells (no quant.format key: written before formats), and
    ptq_formats' mxfp4 (4.35 bits per weight: nearest int4) and fp8_e4m3 (8.02: int8) cells."""
    records = []
    for seed in range(5):
        for bits, reward in ((32, 500.0), (4, 200.0 + 10 * seed), (6, 480.0), (8, 500.0)):
            records.append(_cell(seed, reward, bits, "ptq_classic"))
        records.append(_cell(seed, 400.0 + 12 * seed, 4, "ptq_formats", **{"quant.format": "mxfp4"}))
        records[-1]["run"]["bits_per_weight"] = 4.35
        records.append(_cell(seed, 500.0 - seed % 2, 8, "ptq_formats", **{"quant.format": "fp8_e4m3"}))
        records[-1]["run"]["bits_per_weight"] = 8.02
    for rec in records:
        write_json(rec, folder / build.record_name(rec))


def test_each_format_is_paired_with_the_integer_nearest_its_bits_per_weight(tmp_path: Path):
    _records(tmp_path / "records")
    inputs = Inputs.read(tmp_path / "records", tmp_path, SWEEPS, figures=True)
    ints, names = formats.options(SWEEPS)
    assert ints == [4, 6, 8] and names[0] == "fp8_e4m3" and "nf4" in names
    assert not in_a_format(inputs.runs).any()  # the paper's sections never pool a format cell
    runs = formats.records(inputs)
    ((series, env),) = formats.pairs(runs)
    rows = {r.label: r for r in formats.table(runs, series, env, ints, names)}
    assert list(rows) == ["fp32", "int4", "int6", "int8", "fp8_e4m3", "mxfp4"]
    assert rows["mxfp4"].compared == "int4" and rows["fp8_e4m3"].compared == "int8"
    assert rows["mxfp4"].diffs.tolist() == [200.0, 202.0, 204.0, 206.0, 208.0]  # paired seed by seed
    assert rows["mxfp4"].family == "MX float" and rows["fp8_e4m3"].family == "FP8"
    text = formats.section(inputs)
    assert "`mxfp4` | MX float | 4.35 |" in text and "4 (nominal)" in text
    assert "mxfp4 higher (paired interval above 0 after Holm's correction) (family of 2)" in text
    assert "equivalent within ±25 (TOST" in text  # fp8_e4m3 - int8: within 5% of 500
    assert (tmp_path / formats.FIGURES / formats.FIGURE).is_file()


def test_a_store_without_format_records_says_not_run_yet(tmp_path: Path):
    rec = _cell(0, 500.0, 32, "ptq_classic")
    write_json(rec, tmp_path / "records" / build.record_name(rec))
    inputs = Inputs.read(tmp_path / "records", tmp_path, SWEEPS, figures=False)
    text = formats.section(inputs)
    assert "Not run yet.\n\n### ActorQ actors in a number format\n\nNot run yet." in text


def test_actorq_format_actors_are_read_beside_fp32_actors_and_out_of_the_actorq_section(tmp_path: Path):
    """nvfp4 actors (recorded at actor_bits=32) beside fp32 and int8 ones: the formats section times
    them against fp32 in env steps, int8 beside them; the ActorQ section leaves the format out."""
    fp32 = [_actorq_record(32, s, reach_at=30.0) for s in (0, 1, 2)]
    int8 = [_actorq_record(8, s, reach_at=30.0) for s in (0, 1, 2)]
    nvfp4 = [_actorq_record(32, s, reach_at=t) for s, t in zip((0, 1, 2), (60.0, 70.0, None))]
    for rec in nvfp4:
        rec["config"]["quant"]["actor_format"] = "nvfp4"
        rec["run"].update(cell_key=rec["run"]["cell_key"] + "-nvfp4", actor_reward=-80.0, actor_action_agreement=0.9)
    for rec in fp32 + int8 + nvfp4:
        write_json(rec, tmp_path / "records" / build.record_name(rec))
    inputs = Inputs.read(tmp_path / "records", tmp_path, SWEEPS, figures=False)
    part = actorq_formats.section(inputs)
    rows = {line.split(" | ")[4]: line for line in part.splitlines() if line.startswith("| dqn |")}
    assert set(rows) == {"fp32", "int8", "nvfp4"}  # int8 actors of the same training beside them
    assert "| 3 | 2/3 | ≥ " in rows["nvfp4"] and "| ≤ " in rows["nvfp4"]  # a censored seed: bounds, not means
    assert "0.900 [0.900, 0.900]" in rows["nvfp4"]
    assert "n/a: a seed missed the target" in rows["nvfp4"]  # no paired verdict on a bound
    assert "equivalent within ±0.223 (TOST, α = 0.05) (family of 1)" in rows["int8"]  # the same steps, seed by seed
    assert set(inputs.campaign.time_to_reward["precision"]) == {"fp32", "int8"}
