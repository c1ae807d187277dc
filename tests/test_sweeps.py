"""Sweeps at scale: named sweeps, the submitit launcher, plan and status."""

import re
from pathlib import Path

import pytest

from quarl.app import CONF_DIR
from quarl.config import method_registry, schema
from quarl.report import facts
from quarl.rl.matrix import applies
from quarl.store import query as results
from quarl.sweeps import expand, plan, status
from tests.conftest import FAST, ROOT, quarl_cli, run_quarl

SWEEPS = CONF_DIR / "sweep"


def sweep_table(text: str, heading: str = "# Named sweeps") -> dict[str, str]:
    """The table of named sweeps under `heading` in `text` (docs/sweeps.md, conf/sweep/README.md):
    sweep -> its second column."""
    section = text.split(f"{heading}\n", 1)[1].split("\n#", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", section, re.M))


def readme_sweep_counts() -> dict[str, str]:
    """The README's table of named sweeps: sweep -> its cells as written ('80 (20 n/a)')."""
    rows = re.findall(r"^\| ((?:`\w+`(?:, )?)+) \| ([^|]+) \|", (ROOT / "README.md").read_text(), re.M)
    counts = {}
    for names, cells in rows:
        found = re.findall(r"`(\w+)`", names)
        if all((SWEEPS / f"{n}.yaml").exists() for n in found):
            counts.update(zip(found, (c.strip() for c in cells.split(", "))))
    return counts


#: The README's main sweeps and their cells as it writes them: `quarl plan` must count the same.
README_COUNTS = readme_sweep_counts()


@pytest.mark.parametrize("sweep", sorted(README_COUNTS))
def test_plan_counts_the_cells_the_readme_gives_each_sweep(tmp_path, sweep):
    cells, not_applicable = re.fullmatch(r"(\d+)(?: \((\d+) n/a\))?", README_COUNTS[sweep]).groups()
    planned = plan(CONF_DIR, [f"+sweep={sweep}"], tmp_path / "empty.sqlite")
    assert len(planned) == int(cells) and planned["cell_key"].is_unique
    assert (planned["state"] == "n/a").sum() == int(not_applicable or 0)
    assert set(planned["state"]) <= {"to run", "n/a"}


def check_named_sweeps(conf: Path, docs: str, listing: str, readme: str) -> None:
    """Each sweep file of `conf`/sweep composes, says its command and cost, and has its row in `docs`
    (docs/sweeps.md, with the cells it expands to) and in `listing` (conf/sweep/README.md); `readme`
    (README.md) counts them all."""
    schema.register()  # the structured configs the sweeps compose (registered by the first compose otherwise)
    names = sorted(path.stem for path in (conf / "sweep").glob("*.yaml"))
    documented, listed = sweep_table(docs, "## Named sweeps"), sweep_table(listing)
    assert sorted(documented) == names and sorted(listed) == names
    for name in names:
        text = (conf / "sweep" / f"{name}.yaml").read_text()
        assert "# Run: python run.py -m +sweep=" in text and ("hour" in text or "minute" in text), name
        assert documented[name].split(" (")[0] == str(len(expand(conf, [f"+sweep={name}"]))), name
    assert re.search(rf"all {len(names)} \(`", readme), "the README's count of named sweeps"


def test_every_named_sweep_has_a_plan_a_cost_comment_and_its_rows_in_the_docs():
    check_named_sweeps(CONF_DIR, (ROOT / "docs" / "sweeps.md").read_text(), (SWEEPS / "README.md").read_text(),
                       (ROOT / "README.md").read_text())
    assert {"smoke", "ptq_classic"} <= set(README_COUNTS)  # the README's table is read


def smoke_methods() -> tuple[list[str], dict[str, tuple[str, str]]]:
    """The registered methods the smoke test runs: those that train every algorithm, over the smoke
    sweep's grid; the others, each in the first (algo, env) of that grid it can run."""
    grid, methods = facts.sweep("smoke", SWEEPS).grid, method_registry.registry()
    everywhere = [name for name, m in methods.items() if not m.baseline and m.algos is None]
    cells = {}
    for name, m in methods.items():
        if m.algos is None:
            continue
        runnable = [(a, e) for a in grid["algo"] if a in m.algos for e in grid["env"] if applies(CONF_DIR, a, e)]
        if not runnable:
            pytest.fail(f"quant={name} trains none of the smoke sweep's algorithms on its envs: give it a cell here.")
        cells[name] = runnable[0]
    return everywhere, cells


def test_smoke_sweep_runs_every_method_then_plan_and_status_see_it(scratch):
    """Every registered method end to end (`smoke_methods`); the trainings' length (300 steps, not
    the sweep's 1000) is not what this checks."""
    everywhere, cells = smoke_methods()
    short = ["+sweep=smoke", f"quant={','.join(everywhere)}", "train.steps=300", "actorq.actors=1"]
    run_quarl(scratch, *short, "hydra.callbacks.collate.enabled=false")
    for name, (algo, env) in cells.items():
        run_quarl(scratch, *short[2:], f"quant={name}", f"algo={algo}", f"env={env}", *FAST[1:], "train.progress=false")
    df = results.load(scratch / "outputs/results.sqlite")
    assert set(df["status"]) == {"done", "skipped"}
    assert set(df[df["status"] == "done"]["quant"]) == set(method_registry.registry())
    swept = df[df["quant"].isin(everywhere)]["status"].value_counts().to_dict()
    planned = plan(CONF_DIR, short, scratch / "outputs/results.sqlite")["state"].value_counts().to_dict()
    assert planned == {"done": swept["done"], "n/a": swept["skipped"]}  # each cell of the grid: run, or n/a
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
