"""Sweeps at scale: named sweeps, the submitit launcher, plan and status."""

import re

import pytest

from quarl.app import CONF_DIR
from quarl.config import schema
from quarl.store import query as results
from quarl.sweeps import expand, plan, status
from tests.conftest import FAST, ROOT, quarl_cli, run_quarl

PLANNED = [("smoke", 24, 6), ("ptq_classic", 120, 0), ("ptq_table_classic", 80, 20), ("qat_classic", 126, 0),
           ("ptq_table_atari", 126, 0), ("ptq_table_ddpg", 24, 0), ("ptq_atari", 504, 0), ("ptq_continuous", 72, 0),
           ("actorq_time_to_reward", 132, 66), ("ptq_table_published", 80, 40),
           ("ptq_robust", 384, 192)]


def readme_sweep_counts() -> dict[str, str]:
    """The README's table of named sweeps: sweep -> its cells as written ('80 (20 n/a)')."""
    rows = re.findall(r"^\| ((?:`\w+`(?:, )?)+) \| ([^|]+) \|", (ROOT / "README.md").read_text(), re.M)
    counts = {}
    for names, cells in rows:
        found = re.findall(r"`(\w+)`", names)
        if all((CONF_DIR / "sweep" / f"{n}.yaml").exists() for n in found):
            counts.update(zip(found, (c.strip() for c in cells.split(", "))))
    return counts


@pytest.mark.parametrize("sweep, cells, not_applicable", PLANNED)
def test_plan_counts_the_cells_of_each_named_sweep(tmp_path, sweep, cells, not_applicable):
    planned = plan(CONF_DIR, [f"+sweep={sweep}"], tmp_path / "empty.sqlite")
    assert len(planned) == cells and planned["cell_key"].is_unique
    assert (planned["state"] == "n/a").sum() == not_applicable
    assert set(planned["state"]) <= {"to run", "n/a"}
    written = readme_sweep_counts().get(sweep)  # the README's table says what plan counts
    assert written in (None, f"{cells} ({not_applicable} n/a)" if not_applicable else str(cells))


def test_every_sweep_in_the_readme_table_is_counted_by_plan():
    assert set(readme_sweep_counts()) <= {name for name, _, _ in PLANNED}


def test_every_named_sweep_has_a_plan_and_a_cost_comment():
    schema.register()  # the structured configs the sweeps compose (registered by the first compose otherwise)
    for path in (CONF_DIR / "sweep").glob("*.yaml"):
        text = path.read_text()
        assert "# Run: python run.py -m +sweep=" in text and ("hour" in text or "minutes" in text), path.name
        assert len(expand(CONF_DIR, [f"+sweep={path.stem}"])) > 0


def test_smoke_sweep_runs_every_method_then_plan_and_status_see_it(scratch):
    # every method end to end: the trainings' length (the sweep's 1000 steps) is not what this checks
    short = ["+sweep=smoke", "train.steps=300"]
    run_quarl(scratch, *short, "hydra.callbacks.collate.enabled=false")
    df = results.load(scratch / "outputs/results.sqlite")
    assert set(df["status"]) == {"done", "skipped"}
    assert set(df[df["status"] == "done"]["quant"]) == {"fp32", "fp16", "ptq", "qat"}
    assert (df["status"] == "skipped").sum() == 6 and (df["quant"] != "fp32").sum() == 24
    planned = plan(CONF_DIR, short, scratch / "outputs/results.sqlite")
    assert planned["state"].value_counts().to_dict() == {"done": 18, "n/a": 6}
    grid, failed = status(scratch / "outputs/results.sqlite", {"algo": "ddpg"})
    assert failed.empty and set(grid.loc[("ddpg", "cartpole", 0)]) == {"skipped", "-"}
    printed = quarl_cli(scratch, "status", "algo=ppo")
    assert printed.returncode == 0 and "ptq 8b" in printed.stdout and "done" in printed.stdout


def test_status_shows_failed_cells_with_their_error(scratch):
    # a learning rate torch's optimizer refuses fails while training (an invalid cell is never run)
    run_quarl(scratch, "-m", "algo.hyperparams.learning_rate=0.0003,-1", *FAST)
    printed = quarl_cli(scratch, "status")
    words = " ".join(printed.stdout.split())  # the message wraps to the terminal's width
    assert "failed" in words and "Invalid learning rate" in words
    assert "1 failed" in words


def test_plan_on_the_command_line(scratch):
    printed = quarl_cli(scratch, "plan", "algo=dqn,ddpg", "env=cartpole", "quant.bits=1,4")
    assert printed.returncode == 0
    last = printed.stdout.strip().splitlines()[-1]  # bits=1 is invalid first; ddpg at 4 bits is n/a
    assert last.startswith("4 cells:") and {"2 invalid", "1 n/a", "1 to run"} == set(last[9:].split(", "))
    bad = quarl_cli(scratch, "plan", "algo=nope")
    assert bad.returncode == 1 and "Could not find 'algo/nope'" in bad.stderr + bad.stdout
    assert "Traceback" not in bad.stderr


def test_submitit_local_launcher_runs_cells_as_processes_and_records_them_all(scratch):
    # two cells, each a process of its own, sharing one fp32 policy: one trains it, the other waits or finds it cached
    done = run_quarl(scratch, "-m", "hydra/launcher=local", "quant.bits=2,4", *FAST)
    assert "Submitit 'local' sweep output dir" in done.stdout + done.stderr
    df = results.load(scratch / "outputs/results.sqlite")
    assert (df["quant"] == "ptq").sum() == 2 and (df["quant"] == "fp32").sum() == 1
    assert set(df["status"]) == {"done"}
    assert list((scratch / "outputs/multirun").rglob(".submitit"))
    logs = "".join(p.read_text() for p in (scratch / "outputs/multirun").rglob("*_log.out"))  # the jobs' stdout
    assert logs.count("Training fp32 ppo") == 1


def test_plan_composes_each_job_exactly_as_hydra_does():
    """`quarl plan` composes once per set of group choices and applies value overrides itself."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from quarl.config import schema
    from quarl.sweeps import Composer

    schema.register()
    jobs = expand(CONF_DIR, ["+sweep=qat_classic", "train.steps=777", "++algo.hyperparams.gamma=0.9"])[::9]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        composer = Composer(CONF_DIR)
        for job in jobs:
            assert OmegaConf.to_yaml(composer(job)) == OmegaConf.to_yaml(compose("config", overrides=job)), job


def test_launcher_configs_are_hydras_own_with_one_composition_per_group_choice():
    """The sweep's launcher composes once per set of group choices (quarl.sweeps.SweepConfigs): every
    job's config, Hydra node included, is the one Hydra's own loader gives it, and the loader
    survives the pickling a submitit launcher puts it through."""
    import pickle

    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from quarl.config import schema
    from quarl.sweeps import SweepConfigs

    schema.register()
    args = ["+sweep=qat_classic", "train.steps=777", "++algo.hyperparams.gamma=0.9"]
    jobs = expand(CONF_DIR, args)[::7]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", overrides=[*args, "hydra.sweep.dir=elsewhere"],
                                           run_mode=RunMode.MULTIRUN)
        fast = SweepConfigs(loader, CONF_DIR)
        for job in [*jobs, [*jobs[0], "hydra.job.chdir=false"], [*jobs[1], "+extra=1"]]:
            ours, hydras = fast.load_sweep_config(master, job), loader.load_sweep_config(master, job)
            assert OmegaConf.to_container(ours) == OmegaConf.to_container(hydras), job
        assert len(fast.composed) < len(jobs)  # value overrides (bits, seeds) shared a composition
        again = pickle.loads(pickle.dumps(fast))
        assert again.composed == {} and OmegaConf.to_container(again.load_sweep_config(master, jobs[0])) == (
            OmegaConf.to_container(loader.load_sweep_config(master, jobs[0])))
