"""Properties of collation and queries over generated stores (Hypothesis): stores that mix flagged
and sound fp32 baselines, PTQ schemes, backends, evaluation settings, budgets, missing seeds and
pruned, skipped or failed cells, as a day of real use leaves them.

Whatever the store: every command ends with exit 0 or one sentence; a mean averages seeds and
nothing else; each table row has one n per column; every interval lies inside what its quantity
can take; a weak fp32 baseline's mark is shown wherever its numbers are.
"""

from __future__ import annotations

import io
import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quarl import cli
from quarl.collate import load, outputs, tables, verdict_table
from quarl.store.flags import FLAGS
from quarl.store.sqlite import Store
from tests.records import record, write

#: Each env's settings as its config holds them, its fp32 rewards (sound, not solved, not learned)
#: and the range its returns take.
ENVS = {
    "cartpole": {"config": {"env.return_scale": 500.0, "env.random_return": 23.7}, "fp32": (500.0, 300.0, 20.0),
                 "range": (0.0, 500.0)},
    "acrobot": {"config": {"env.return_scale": 500.0, "env.random_return": -497.1}, "fp32": (-80.0, -150.0, -500.0),
                "range": (-500.0, 0.0)},
}
SETTINGS = [  # (scheme, backend, eval episodes, training steps): what a record's method line can differ in
    ("affine", "fake", 10, 1000), ("quarl_code", "fake", 10, 1000), ("affine", "onnx_int8", 10, 1000),
    ("affine", "fake", 5, 1000), ("affine", "fake", 10, 2000),
]
STATES = ["done", "done", "done", "pruned", "skipped", "failed"]

cell = st.fixed_dictionaries({
    "algo": st.sampled_from(["dqn", "ppo"]),
    "env": st.sampled_from(sorted(ENVS)),
    "seed": st.integers(0, 3),
    "fp32": st.integers(0, 2),  # which of the env's fp32 rewards this seed's policy has
    "setting": st.integers(0, len(SETTINGS) - 1),
    "bits": st.sampled_from([2, 8]),
    "loss": st.floats(0.0, 1.0),  # the quantized reward: fp32 moved this fraction towards the range's far end
    "status": st.sampled_from(STATES),
})


def records_of(cells: list[dict]) -> list[dict]:
    """The records a sweep of `cells` leaves: per cell its PTQ record, and the fp32 baseline of its
    policy under its evaluation (one per policy and evaluation, as the pipeline writes it)."""
    out, baselines, policies = [], {}, {}
    for c in cells:
        env = ENVS[c["env"]]
        scheme, backend, episodes, steps = SETTINGS[c["setting"]]
        fp32 = env["fp32"][policies.setdefault((c["algo"], c["env"], c["seed"], steps), c["fp32"])]  # one per policy
        low, high = env["range"]
        far = low if abs(fp32 - low) > abs(fp32 - high) else high
        reward = fp32 + c["loss"] * (far - fp32)
        config = {**env["config"], "quant.backend": backend, "env.id": {"cartpole": "CartPole-v1",
                                                                           "acrobot": "Acrobot-v1"}[c["env"]]}
        base = (c["algo"], c["env"], c["seed"], episodes, steps)
        baselines[base] = record(c["algo"], c["env"], "fp32", seed=c["seed"], reward=fp32, fp32=fp32, steps=steps,
                                 episodes=episodes, config=env["config"] | {"env.id": config["env.id"]})
        out.append(record(c["algo"], c["env"], "ptq", c["bits"], c["seed"], reward=reward, fp32=fp32, steps=steps,
                          episodes=episodes, scheme=scheme, status=c["status"], config=config,
                          action_agreement=1.0 - c["loss"] / 2, agreement_states=100))
    return list(baselines.values()) + out


def _one_sentence(text: str) -> bool:
    return "Traceback" not in text


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(cell, min_size=1, max_size=10))
def test_every_generated_store_collates_and_lists_honestly(tmp_path_factory: pytest.TempPathFactory, cells, capsys):
    folder = tmp_path_factory.mktemp("store")
    path = folder / "r.sqlite"
    write(Store(path), records_of(cells))

    # quarl results and --csv: exit 0, and a weak baseline's mark on every row that compares with it
    assert cli.main(["results", "--store", str(path)]) == 0
    table = capsys.readouterr().out
    assert cli.main(["results", "--store", str(path), "--csv"]) == 0
    listed = pd.read_csv(io.StringIO(capsys.readouterr().out), keep_default_na=False)
    assert table.count("\n") == len(listed) + 1  # one line per record, below one header
    marks = listed["fp32_flag"] if "fp32_flag" in listed else pd.Series("", index=listed.index)
    assert all(flag.split(" ", 1)[0] in FLAGS.values() for flag in marks if flag)
    for i, row in listed[listed["status"] == "done"].iterrows():
        assert (marks[i].split(" ", 1)[-1] if marks[i] else None) == _expected_flag(row), row.to_dict()

    study = load(path)
    assert all(_one_sentence(n) for n in study.notes)
    done = study.done
    for algo, env in sorted(set(zip(study.seeds["algo"], study.seeds["env"]))):
        # a mean averages seeds only: each seed counted once, whatever its number of records
        for method in study.integer_methods(algo):
            table = tables.error_table(study, algo, method).set_index("env")
            rows = done[(done["algo"] == algo) & (done["env"] == env) & (done["method"] == method)
                        & (done["bits"] == 8)]
            if len(rows):
                per_seed = rows.groupby("seed")["reward_mean"].mean()
                assert table.loc[env, "int8"] == pytest.approx(per_seed.mean())
                counts = table.loc[env, "seeds"]  # one n per column of the row
                assert str(len(per_seed)) in str(counts)
        # the flag of every (algo, env) is the weakest of its seeds'
        marks = study.flag(algo, env)
        kinds = {_expected_flag(r) for _, r in done[(done["algo"] == algo) & (done["env"] == env)].iterrows()}
        kinds.discard(None)
        assert (marks != "") == bool(kinds)

    # intervals inside what their quantity can take
    for algo in sorted(set(study.seeds["algo"])):
        agreement = tables.agreement_table(study, algo)
        if len(agreement):
            assert not ((agreement["low"] < 0) | (agreement["high"] > 1)).any()  # NaN: one seed, no interval
    for method in study.ptq_methods() or [None]:
        judged = verdict_table.verdict_table(study, method, study.pairs(method) if method else None)
        for _, row in judged.iterrows():
            if row["quantity"].startswith("E") or pd.isna(row["low"]):
                continue
            low, high = ENVS[row["env"]]["range"]
            assert low - 1e-9 <= row["low"] <= row["mean"] + 1e-9 <= row["high"] + 2e-9 <= high + 3e-9, row.to_dict()

    # the tables as collation writes them, each PTQ quantizer judged in its own section
    written = outputs.write_tables(study, folder / "out")
    assert written and all(p.exists() for p in written)
    verdicts = folder / "out/tables/verdicts.csv"
    if verdicts.exists() and len(study.ptq_methods()) > 1:
        sections = set(pd.read_csv(verdicts)["quantizer"].str.split(":").str[0])
        judged = {m for m in study.ptq_methods() if study.pairs(m) & _paper_pairs(study)}
        assert judged <= sections <= set(study.ptq_methods())  # (the first also holds pairs no quantizer has)


def _expected_flag(row: pd.Series) -> str | None:
    """The weak-baseline kind a record's fp32 reward gives, computed here by hand."""
    env = ENVS[row["env"]]
    fp32 = float(row["fp32_reward"])
    if fp32 <= env["config"]["env.random_return"] + 0.05 * env["config"]["env.return_scale"]:
        return "not learned"
    return "not solved" if fp32 < {"cartpole": 475.0, "acrobot": -100.0}[row["env"]] else None


def _paper_pairs(study) -> set[tuple[str, str]]:
    """The (algo, env) pairs of the study the paper's PTQ table has."""
    from quarl.collate import published

    return {(a, e) for a, e in itertools.product(set(study.seeds["algo"]), set(study.seeds["env"]))
            if published.lookup(a, e) is not None}


def test_the_generator_makes_what_the_properties_need():
    """One store of every kind: flagged and sound baselines, two schemes, left-out states."""
    cells = [{"algo": "dqn", "env": "cartpole", "seed": s, "fp32": f, "setting": k, "bits": 8, "loss": 0.1,
              "status": st_} for s, f, k, st_ in [(0, 0, 0, "done"), (1, 2, 1, "done"), (2, 1, 0, "pruned")]]
    recs = records_of(cells)
    assert {r["run"]["quant"] for r in recs} == {"fp32", "ptq"}
    assert {r["config"]["quant"]["scheme"] for r in recs if r["run"]["quant"] == "ptq"} == {"affine", "quarl_code"}
    kinds = [_expected_flag(pd.Series({"env": "cartpole", "fp32_reward": r["run"]["fp32_reward"]})) for r in recs]
    assert set(kinds) == {None, "not learned", "not solved"}
    assert recs[-1]["run"]["status"] == "pruned" and np.isclose(recs[-1]["run"]["reward_mean"], 300.0 - 30.0)
