"""hydra.sweeper.pruner: a trial's training reports its return to the trial (across processes, through
the study storage) and stops when the trial is pruned; a pruned trial is PRUNED in the study, its
cells are not stored as done, and the search resumes. `quarl trials` lists a study's trials."""

from __future__ import annotations

import io
import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from quarl.cli import main
from quarl.errors import QuarlError
from quarl.store import studies
from tests.conftest import FAST, run_quarl
from tests.test_search import study

optuna = pytest.importorskip("optuna")  # rl_zoo3 (the test extra) brings it

SEARCH = ["hydra/sweeper=optuna", "hydra.sweeper.sampler.seed=0", *FAST, "search.seeds=2",
          "algo.hyperparams.learning_rate=tag(log, interval(0.0001, 0.01))"]
# CartPole's return is at most 500: a threshold of 1000 prunes every trial at its first report
PRUNE_ALL = ["hydra.sweeper.pruner.name=threshold", "hydra.sweeper.pruner.lower=1000",
             "hydra.sweeper.pruner.n_warmup_steps=0"]
State = optuna.trial.TrialState


def ptq_cells(folder: Path) -> list[tuple]:
    with sqlite3.connect(folder / "outputs" / "results.sqlite") as con:
        return con.execute("SELECT seed, status, message FROM runs WHERE quant = 'ptq' ORDER BY seed").fetchall()


def test_a_pruned_trial_stops_its_training_is_pruned_in_the_study_and_the_search_resumes(scratch, capsys):
    first = run_quarl(scratch, "-m", *SEARCH, "hydra.sweeper.n_trials=2", *PRUNE_ALL)
    trials = study(scratch).trials
    assert [t.state for t in trials] == [State.PRUNED] * 2
    for trial in trials:  # the first seed reported once (a tenth of 1,500 steps in) and was pruned there
        pruned = trial.user_attrs["pruned"]
        assert pruned["seed"] == 0 and pruned["report"] == 1 and pruned["step"] < 1500
        assert list(trial.intermediate_values) == [1] and trial.user_attrs["seeds"] == [0, 1]
    cells = ptq_cells(scratch)  # 2 trials x 2 seeds, none stored as done: a later run runs them again
    assert len(cells) == 4 and {status for _, status, _ in cells} == {"pruned"}
    assert all(message.startswith("Pruned: trial ") for _, _, message in cells)
    assert all("(this is seed 1)" in message for seed, _, message in cells if seed == 1)  # stopped, not reported
    assert not list((scratch / "outputs" / "policies").glob("ppo-*[0-9a-f]"))  # no pruned policy in the cache
    assert "Pruned trial 0: pruned at report 1 of 10" in first.stderr + first.stdout

    again = run_quarl(scratch, "-m", *SEARCH, "hydra.sweeper.n_trials=2", *PRUNE_ALL)  # pruned trials count
    assert "Launching" not in again.stderr + again.stdout and "2 of 2 trials finished" in again.stderr + again.stdout

    run_quarl(scratch, "-m", *SEARCH, "hydra.sweeper.n_trials=3", "hydra.sweeper.pruner.name=none")
    trials = study(scratch).trials
    assert [t.state for t in trials] == [State.PRUNED, State.PRUNED, State.COMPLETE]
    assert not trials[2].intermediate_values  # with no pruner the training reports nothing

    assert main(["trials", "--store", str(scratch / "outputs" / "results.sqlite")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "3 trials: 1 COMPLETE, 2 PRUNED" in lines[0]
    assert lines[1].split()[:5] == ["trial", "state", "seeds", "reward_mean", "reward_mean"]
    assert "pruned at report 1 of 10 of seed 0's training" in lines[2] and "learning_rate" in lines[1]


def _listed_study(folder: Path) -> None:
    """A study as a search leaves it: one complete trial of two seeds, one pruned, one failed."""
    storage = f"sqlite:///{folder / 'optuna.db'}"
    made = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    made.set_user_attr("objectives", ["reward_mean"])
    made.set_user_attr("seeds", 2)
    made.set_user_attr("pruner", studies.check_pruner(None))
    space = {"algo.hyperparams.learning_rate": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)}
    for rate in (0.001, 0.0002, 0.005):
        made.enqueue_trial({"algo.hyperparams.learning_rate": rate})
    done = made.ask(space)
    for key, value in {"seeds": [0, 1], "reward_mean_per_seed": [500.0, 342.4], "reward_mean_std": 78.8}.items():
        done.set_user_attr(key, value)
    made.tell(done, 421.2)
    pruned = made.ask(space)
    pruned.report(21.5, 4)
    pruned.set_user_attr("seeds", [0, 1])
    pruned.set_user_attr("pruned", {"seed": 0, "report": 4, "of": 10, "step": 1024, "return": 21.5})
    made.tell(pruned, state=State.PRUNED)
    failed = made.ask(space)
    failed.set_user_attr("failed_cells", "seed 1: failed: ValueError: nan")
    made.tell(failed, state=State.FAIL)


def test_quarl_trials_lists_each_trial_with_its_seeds_spread_and_parameters(tmp_path, capsys):
    _listed_study(tmp_path)
    before = (tmp_path / "optuna.db").read_bytes()
    assert main(["trials", "--store", str(tmp_path / "results.sqlite")]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "optuna.db").read_bytes() == before  # read only
    header, columns, *rows = out.strip().splitlines()
    assert header.startswith("Study s (sqlite:///") and header.endswith(
        "maximize reward_mean, 2 seed(s) a trial, last pruner median (n_startup_trials=5, n_warmup_steps=3, "
        "interval_steps=1; 10 reports a training); 3 trials: 1 COMPLETE, 1 FAIL, 1 PRUNED"
    )
    assert columns.split() == ["trial", "state", "seeds", "reward_mean", "reward_mean", "per", "seed", "reward_mean",
                               "std", "note", "learning_rate"]
    assert rows[0].split() == ["0", "COMPLETE", "0,", "1", "421.2", "500,", "342.4", "78.8", "0.001"]
    assert rows[1].split()[:2] == ["1", "PRUNED"] and rows[1].split()[-1] == "0.0002"
    assert "pruned at report 4 of 10 of seed 0's training (env step 1024): training return 21.5" in rows[1]
    assert rows[2].split()[:2] == ["2", "FAIL"] and "seed 1: failed: ValueError: nan" in rows[2]

    assert main(["trials", "--store", str(tmp_path / "results.sqlite"), "--csv"]) == 0
    csv = capsys.readouterr().out.splitlines()
    assert csv[0].startswith("study,trial,state,seeds,reward_mean,") and len(csv) == 4
    assert main(["trials", "--store", str(tmp_path / "results.sqlite"), "--study", "t"]) == 1
    assert main(["trials", "--store", str(tmp_path / "elsewhere" / "results.sqlite")]) == 1


def test_quarl_trials_csv_of_two_studies_puts_each_value_under_its_own_column(tmp_path, capsys):
    """A second study with other objectives and parameters: one header, the union of both studies'
    columns, each row's values under its own names (they followed the first study's header)."""
    _listed_study(tmp_path)
    other = optuna.create_study(study_name="widths", storage=f"sqlite:///{tmp_path / 'optuna.db'}",
                                directions=["maximize", "minimize"])
    other.set_user_attr("objectives", ["reward_mean", "policy_bytes"])
    trial = other.ask({"quant.bits": optuna.distributions.IntDistribution(2, 8)})
    other.tell(trial, [480.0, 1234.0])
    assert main(["trials", "--store", str(tmp_path / "results.sqlite"), "--csv"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype=str, keep_default_na=False)
    assert list(table["study"]) == ["s", "s", "s", "widths"]
    widths = table[table["study"] == "widths"].iloc[0]
    assert widths["policy_bytes"] == "1234" and widths["bits"] == str(trial.params["quant.bits"])
    assert widths["learning_rate"] == "" and table[table["study"] == "s"]["bits"].eq("").all()


@pytest.mark.parametrize(
    "node, sentence",
    [
        ({"name": "hyperband"}, "hydra.sweeper.pruner.name=hyperband is not a pruner: use median, percentile"),
        ({"n_warmup_steps": -1}, "hydra.sweeper.pruner.n_warmup_steps=-1 is not allowed: use a whole number, 0 or"),
        ({"reports": 0}, "hydra.sweeper.pruner.reports=0 is not allowed: use a whole number, 1 or more."),
        ({"lower": 3}, "hydra.sweeper.pruner.lower=3 is a setting of the threshold pruner, not of median"),
        ({"name": "threshold"}, "The threshold pruner needs hydra.sweeper.pruner.lower or upper"),
        ({"name": "percentile", "percentile": 120}, "hydra.sweeper.pruner.percentile=120 is not allowed: use 0 to"),
        ({"patience": 3}, "hydra.sweeper.pruner.patience is not a setting of a pruner: the median pruner takes"),
    ],
)
def test_bad_pruner_settings_are_one_sentence(node, sentence):
    with pytest.raises(QuarlError, match="^" + re.escape(sentence)):
        studies.check_pruner(node)


def test_a_bad_pruner_stops_the_search_before_anything_runs(scratch):
    done = run_quarl(scratch, "-m", *SEARCH, "hydra.sweeper.pruner.n_warmup_steps=-1", check=False)
    out = done.stderr + done.stdout
    assert done.returncode == 1 and "hydra.sweeper.pruner.n_warmup_steps=-1 is not allowed" in out
    assert "Traceback" not in out and not (scratch / "outputs" / "results.sqlite").exists()


def test_the_pruner_defaults_and_where_a_search_does_not_prune():
    from hydra_plugins.quarl_sweeper import search_space

    assert studies.check_pruner(None) == studies.check_pruner({"name": "median"}) == {
        "name": "median", "reports": 10, "n_startup_trials": 5, "n_warmup_steps": 3, "interval_steps": 1}
    one = search_space.settings({"objective": "-reward_mean"}, "minimize")
    assert search_space.pruning(None, one)[0]["sign"] == -1  # the reports follow the objective's sign
    two = search_space.settings({"objective": ["reward_mean", "policy_bytes"]}, ["maximize", "minimize"])
    assert search_space.pruning(None, two) == (None, "Optuna prunes single-objective studies only")
    size = search_space.settings({"objective": "policy_bytes"}, "minimize")
    assert search_space.pruning(None, size)[0] is None  # the training return does not track it
    assert search_space.pruning("none", one) == (None, "hydra.sweeper.pruner.name=none")
