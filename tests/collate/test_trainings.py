"""`quarl.collate.trainings`: records of different trainings are never averaged together; what counts
as another training; the committed campaign records."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from quarl.collate import collate, load, trainings
from quarl.store.record_files import rebuild
from quarl.store.sqlite import Store
from tests.collate.studies import stored, two_trainings
from tests.conftest import ROOT
from tests.records import record


def test_two_trainings_of_one_algo_and_env_are_separate_series_named_by_what_differs(tmp_path: Path):
    path = stored(tmp_path, two_trainings())
    study = load(path)
    long, short = "ppo (train.steps=100000)", "ppo (train.steps=8192)"
    assert set(study.done.loc[study.done["env"] == "cartpole", "algo"]) == {long, short}
    assert set(study.done.loc[study.done["env"] == "acrobot", "algo"]) == {"ppo"}  # one training: the plain name
    assert set(study.done["base_algo"]) == {"ppo"}
    base = study.baselines.set_index(["algo", "env", "seed"])["fp32"]
    assert base[(long, "cartpole", 0)] == 500.0 and base[(short, "cartpole", 0)] == 300.0  # each its own fp32
    ptq8 = study.seeds[(study.seeds["method"] != "fp32") & (study.seeds["env"] == "cartpole")]
    assert set(ptq8.loc[ptq8["algo"] == long, "reward"]) == {490.0, 491.0}
    assert ((ptq8["algo"] == short) == ptq8["reward"].isin([244.0, 272.0])).all()
    note = next(n for n in study.notes if "2 trainings" in n)
    assert "differ in train.steps" in note
    for label, steps, records in ((long, "100000", 4), (short, "8192", 6)):
        typed = f"algo=ppo env=cartpole train.steps={steps}"
        assert f"'{label}' ({records} records: `quarl collate {typed}`)" in note
        picked = load(path, dict(kv.split("=") for kv in typed.split()))  # the label is the filter a user types
        assert set(picked.done["algo"]) == {"ppo"} and len(picked.done) == records
    assert len(load(path, {"train.steps": "null"}).done) == 4  # the stored null still selects the default budget

    out = tmp_path / "out"
    collate(path, out, formats=["png"])
    errors = {s: pd.read_csv(out / f"tables/errors_ppo-train-steps-{s}.csv").set_index("env").loc[["cartpole"]]
              for s in ("100000", "8192")}  # ptq at 8 bits with fp32 activations (act_bits=32) in both
    errors = {s: rows[rows["quantizer"].str.startswith("ptq (act_bits=32)")].iloc[0] for s, rows in errors.items()}
    assert errors["100000"]["fp32"] == 500.0 and errors["100000"]["int8"] == pytest.approx(490.5)
    assert errors["100000"]["E_int8 (%)"] == pytest.approx(100 * (500 - 490.5) / 500)
    assert errors["8192"]["fp32"] == 300.0 and errors["8192"]["int8"] == pytest.approx(272.0)
    assert errors["8192"]["E_int8 (%)"] == pytest.approx(100 * (300 - 272) / 300)
    assert errors["8192"]["fp32 (paper)"] == 500  # the paper's row is found by the plain algo name
    assert list(pd.read_csv(out / "tables/errors_ppo.csv")["env"]) == ["acrobot", "mean"]
    md = (out / "tables/errors_ppo-train-steps-8192.md").read_text()
    assert md.startswith("## PPO (train.steps=8192): fp32, fp16 and int8")
    grid = (out / "precision/ppo-train-steps-8192_cartpole.md").read_text()  # the activation grid of 8192 only
    assert "244.0" in grid and "272.0" in grid and "490" not in grid
    assert "490.5" in (out / "precision/ppo-train-steps-100000_cartpole.md").read_text()
    points = pd.read_csv(out / "sweet_spot/points.csv")
    assert set(points["algo"]) == {"ppo", long, short} and (points["n"] == 2).all()
    assert {f"sweet_spot/ppo-train-steps-{s}_cartpole.png" for s in ("100000", "8192")} <= {
        p.relative_to(out).as_posix() for p in out.rglob("*.png")}
    readme = (out / "README.md").read_text()
    assert f"| {short} | cartpole |" in readme and "`quarl collate algo=ppo env=cartpole train.steps=8192`" in readme


def test_what_counts_as_another_training(tmp_path: Path):
    """Keys of the training (hyperparameters, keep-best, its effective interval, a pretrained
    source) split series; the seed, the quantizer and a key an older record lacks do not."""
    def labels(*configs: dict) -> list[str]:
        records = [record("dqn", "cartpole", "fp32", seed=i % 2, steps=10_000, config=c)
                   for i, c in enumerate(configs)]
        runs = Store(stored(tmp_path, records, f"t{len(list(tmp_path.iterdir()))}.sqlite")).runs()
        return list(trainings.trainings(runs.sort_values("started_at"))[0])

    assert labels({}, {}) == ["dqn", "dqn"]  # two seeds of one training
    lr = "algo.hyperparams.learning_rate"
    assert labels({}, {lr: 0.001}) == [f"dqn ({lr}=null)", f"dqn ({lr}=0.001)"]  # unset: the algorithm's default
    keep = {"train.keep_best": True, "train.eval_episodes": 5}
    assert labels({**keep, "train.eval_every": None}, {**keep, "train.eval_every": 500}) == ["dqn", "dqn"]  # 10000//20
    assert labels({**keep, "train.eval_every": 500}, {**keep, "train.eval_every": 1000}) == [
        "dqn (train.eval_every=500)", "dqn (train.eval_every=1000)"]
    assert labels({}, {"train.keep_best": True}) == ["dqn (train.keep_best=false)", "dqn (train.keep_best=true)"]
    assert labels({"env.return_scale": 500}, {"env.return_scale": 200}) == ["dqn", "dqn"]  # measurement only
    assert labels({"env.frame_stack": 1}, {"env.frame_stack": 4}) == [
        "dqn (env.frame_stack=1)", "dqn (env.frame_stack=4)"]
    zoo = {"policy.source": "path", "policy.path": "logs/dqn/CartPole-v1_1"}
    assert labels({"policy.source": "train"}, zoo) == [
        "dqn (policy.source=train)", "dqn (policy.source=path, policy.path=logs/dqn/CartPole-v1_1)"]
    sb2 = {"zoo": "sb2", lr: 0.001, "algo.hyperparams.policy_kwargs.net_arch": [64]}
    assert labels({}, sb2) == ["dqn (zoo=rl_zoo3)", "dqn (zoo=sb2)"]  # the zoo names what it sets
    assert labels({}, {"train.robust": "sam", "train.robust_rho": 0.05}) == [
        "dqn (train.robust=null)", "dqn (train.robust=sam)"]
    sam = {"train.robust": "sam", "train.robust_rho": 0.05}
    assert labels(sam, {**sam, "train.robust_rho": 0.1}) == [
        "dqn (train.robust_rho=0.05)", "dqn (train.robust_rho=0.1)"]
    assert labels({}, {"train.stop_at_return": 475.0}) == [  # ended at its target: another policy
        "dqn (train.stop_at_return=null)", "dqn (train.stop_at_return=475)"]
    assert labels({}, {"train.stop_at_return": None}) == ["dqn", "dqn"]  # a record from before the option
    old = record("dqn", "cartpole", "fp32", seed=0, steps=10_000)  # written before train.keep_best existed
    new = record("dqn", "cartpole", "fp32", seed=1, steps=10_000, config={"train.keep_best": False,
                                                                         "algo.normalize": False})
    runs = Store(stored(tmp_path, [old, new], "old.sqlite")).runs()
    assert set(trainings.trainings(runs)[0]) == {"dqn"}


def test_the_campaign_records_hold_one_training_per_algo_and_env():
    """The committed records of quarl's default trainings collate as before: no (algo, env) of theirs
    but ActorQ's holds two trainings; the published agents' (zoo=sb2) and the robust ones are told
    apart from them by exactly that setting."""
    with __import__("tempfile").TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "r.sqlite")
        rebuild(ROOT / "docs/reproduction/records", store)
        runs = store.runs()
    runs = runs[(runs["status"] == "done") & (runs["quant"] != "actorq")]
    zoo = runs["zoo"].fillna("rl_zoo3") if "zoo" in runs.columns else pd.Series("rl_zoo3", index=runs.index)
    robust = runs["train.robust"] if "train.robust" in runs.columns else pd.Series(None, index=runs.index)
    defaults = runs[(zoo == "rl_zoo3") & robust.isna()]
    labels, found = trainings.trainings(defaults)
    assert found == [] and (labels == defaults["algo"]).all()
    _, every = trainings.trainings(runs)
    assert {key for t in every for key in t.keys} <= {"zoo", "train.robust"}
