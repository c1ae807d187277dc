"""hydra/sweeper=optuna: a search whose trials are stored cells, resumed from its study, judged on
record fields (several objectives: a Pareto front), with bad settings refused in one sentence."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml

from hydra_plugins.quarl_sweeper import search_space
from quarl.errors import QuarlError
from tests.conftest import FAST, run_quarl

optuna = pytest.importorskip("optuna")  # rl_zoo3 (the test extra) brings it

SEARCH = ["hydra/sweeper=optuna", "hydra.sweeper.sampler.seed=0", *FAST]


def study(folder: Path) -> optuna.Study:
    storage = f"sqlite:///{folder / 'outputs' / 'optuna.db'}"
    (name,) = optuna.get_all_study_names(storage)
    return optuna.load_study(study_name=name, storage=storage)


def stored(folder: Path) -> list[tuple]:
    with sqlite3.connect(folder / "outputs" / "results.sqlite") as con:
        return con.execute(
            'SELECT "algo.hyperparams.learning_rate", seed, status, reward_mean FROM runs WHERE quant = \'ptq\''
        ).fetchall()


def test_a_search_stores_its_trials_as_cells_and_resumes_its_study(scratch, shared_policies):
    args = ["-m", *SEARCH, "hydra.sweeper.n_trials=4", "hydra.sweeper.search.seeds=2",
            "algo.hyperparams.learning_rate=tag(log, interval(0.0001, 0.01))"]
    first = run_quarl(scratch, *args, policies=shared_policies)
    rows = stored(scratch)
    assert len(rows) == 8 and {status for _, _, status, _ in rows} == {"done"}  # 4 trials x 2 seeds
    assert len({rate for rate, _, _, _ in rows}) == 4 and {seed for _, seed, _, _ in rows} == {0, 1}
    trials = study(scratch).trials
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 4
    for trial in trials:  # the value is the mean of the two seeds' records, each kept
        per_seed = trial.user_attrs["reward_mean_per_seed"]
        assert len(per_seed) == 2 and trial.value == pytest.approx(sum(per_seed) / 2)
        assert "reward_mean_std" in trial.user_attrs and trial.user_attrs["seeds"] == [0, 1]
    assert "Best trial" in first.stderr + first.stdout
    sweep_dir = next((scratch / "outputs" / "multirun").glob("*/*/best_hyperparams.yaml")).parent
    best = yaml.safe_load((sweep_dir / "best_hyperparams.yaml").read_text())
    assert best == {"learning_rate": pytest.approx(study(scratch).best_params["algo.hyperparams.learning_rate"])}
    assert (sweep_dir / "search_history.png").stat().st_size > 0 and (sweep_dir / "trials.csv").exists()

    again = run_quarl(scratch, *args, policies=shared_policies)  # n_trials counts the study's total
    assert "Launching" not in again.stderr + again.stdout and "4 of 4 trials finished" in again.stderr + again.stdout
    assert len(study(scratch).trials) == 4 and len(stored(scratch)) == 8
    # quarl collate draws the store's searches too: the study's optimisation history
    from quarl.collate import collate

    database = scratch / "outputs/optuna.db"
    before = database.read_bytes()
    written = collate(scratch / "outputs/results.sqlite", scratch / "collated", formats=["png"])
    assert database.read_bytes() == before  # reading the searches writes nothing into them
    drawn = [p for p in written if p.name.startswith("search_") and p.name.endswith("_history.png")]
    assert len(drawn) == 1 and drawn[0].stat().st_size > 0


def test_two_objectives_make_a_pareto_front(scratch, shared_policies):
    run_quarl(scratch, "-m", *SEARCH, "hydra.sweeper.n_trials=4", "quant.bits=range(2, 9)",
              "search.objective=[reward_mean,policy_bytes]", "hydra.sweeper.direction=[maximize,minimize]",
              policies=shared_policies)
    found = study(scratch)
    assert [d.name for d in found.directions] == ["MAXIMIZE", "MINIMIZE"]
    front = found.best_trials
    assert front and all(len(t.values) == 2 for t in front)
    sweep_dir = next((scratch / "outputs" / "multirun").glob("*/*/search_pareto.png")).parent
    listed = yaml.safe_load((sweep_dir / "best_trial.yaml").read_text())
    assert {entry["trial"] for entry in listed} == {t.number for t in front}


@pytest.mark.parametrize(
    "args, sentence",
    [
        (["search.objective=rewrd"], "search.objective=rewrd is not a numeric field of a record: use one of"),
        (["hydra.sweeper.direction=up"], "hydra.sweeper.direction=up is not allowed: use maximize or minimize"),
        (["search.seeds=0"], "search.seeds=0 is not allowed: use a positive number of seeds per trial."),
        (["hydra.sweeper.n_trials=0"], "hydra.sweeper.n_trials=0 is not allowed: use a positive whole number."),
    ],
)
def test_bad_search_settings_are_one_sentence(scratch, args, sentence):
    done = run_quarl(scratch, "-m", *SEARCH, "quant.bits=range(2, 9)", *args, check=False)
    assert done.returncode == 1 and sentence in done.stderr + done.stdout
    assert "Traceback" not in done.stderr + done.stdout and not (scratch / "outputs" / "results.sqlite").exists()


def test_an_empty_search_space_is_one_sentence(scratch):
    done = run_quarl(scratch, "-m", *SEARCH, "quant.bits=4", check=False)
    assert done.returncode == 1 and "The search space is empty: give hydra.sweeper.params" in done.stderr + done.stdout


def test_the_grammar_maps_to_optuna_distributions():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    given = OverridesParser.create().parse_overrides(
        ["a=choice(32,64)", "b=range(1,8)", "c=tag(log, interval(0.0001, 0.01))", "d=int(interval(1, 5))",
         "++e.f=choice([64,64],[128])", "g=3", "a=choice(16,32)"]
    )
    params, fixed = search_space.space(given)
    dists = {p.name: p.distribution for p in params}
    assert dists["a"] == optuna.distributions.CategoricalDistribution([16, 32])  # given again: replaced
    assert dists["b"] == optuna.distributions.IntDistribution(1, 7)  # range's stop is excluded, as in a sweep
    assert dists["c"] == optuna.distributions.FloatDistribution(0.0001, 0.01, log=True)
    assert dists["d"] == optuna.distributions.IntDistribution(1, 5)
    assert [p for p in params if p.name == "e.f"][0].override("[64,64]") == "++e.f=[64,64]" and fixed == ["g=3"]
    with pytest.raises(QuarlError, match="seed cannot be searched"):
        search_space.space(OverridesParser.create().parse_overrides(["seed=0,1"]))
