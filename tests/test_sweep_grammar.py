"""`quarl plan` lists the jobs `python run.py -m` launches, for every sweep grammar Hydra's sweeper has."""

import json
import os
from pathlib import Path

import pytest

from quarl.app import CONF_DIR
from quarl.errors import QuarlError
from quarl.sweeps import plan
from tests.conftest import ENV, WARM

PLUGINS = Path(__file__).parent / "plugins"  # hydra_plugins.quarl_recording_launcher: records jobs, runs none

TOP_ENVS = sorted(p.stem for p in (CONF_DIR / "env").glob("*.yaml"))  # glob(*) over env: its configs, not subgroups


def cells(planned) -> list[tuple]:
    return sorted(planned[["algo", "env", "quant", "quant.bits", "seed"]].itertuples(index=False, name=None))


def grid(algos, envs, quants, seeds) -> list[tuple]:
    """Every (algo, env, quant, quant.bits, seed) of the axes; `quants` holds (quant, bits) pairs."""
    return sorted((a, e, q, b, s) for a in algos for e in envs for q, b in quants for s in seeds)


PTQ8 = [("ptq", 8)]
SMOKE_QUANTS = [("fp16", 16), ("ptq", 8), ("qat", 8)]


@pytest.mark.parametrize(
    "args, expected",
    [(["env=glob(*)"], grid(["ppo"], TOP_ENVS, PTQ8, [0])),
     (["env=glob([cart*,pend*])"], grid(["ppo"], ["cartpole", "pendulum"], PTQ8, [0])),
     (["env=glob(*,exclude=[mountaincar*,acro*])"], grid(["ppo"], ["cartpole", "pendulum"], PTQ8, [0])),
     (["seed=range(0,3)"], grid(["ppo"], ["cartpole"], PTQ8, [0, 1, 2])),
     (["seed=range(1,7,3)", "quant.bits=choice(2,4)"], grid(["ppo"], ["cartpole"], [("ptq", 2), ("ptq", 4)], [1, 4])),
     (["algo=choice(dqn,a2c)", "quant.bits=2,4"], grid(["dqn", "a2c"], ["cartpole"], [("ptq", 2), ("ptq", 4)], [0])),
     (["+sweep=smoke"], grid(["dqn", "a2c", "ppo", "ddpg"], ["cartpole", "pendulum"], SMOKE_QUANTS, [0])),
     # the named sweep's algo axis narrowed on the command line, a seed axis added
     (["+sweep=smoke", "algo=choice(ppo,dqn)", "seed=range(0,2)", "env=glob([cart*])"],
      grid(["ppo", "dqn"], ["cartpole"], SMOKE_QUANTS, [0, 1]))],
)
def test_plan_enumerates_every_sweep_grammar(tmp_path, args, expected):
    planned = plan(CONF_DIR, args, tmp_path / "empty.sqlite")
    assert cells(planned) == expected and planned["cell_key"].is_unique


def test_plan_refuses_a_sweep_hydra_cannot_enumerate(tmp_path):
    with pytest.raises(QuarlError, match="INTERVAL_SWEEP"):
        plan(CONF_DIR, ["seed=interval(0,1)"], tmp_path / "empty.sqlite")


# Hydra's own basic sweeper, the reference (quarl's sweeper, the default, forms its jobs as quarl plan does)
HYDRA_BASIC = "hydra.sweeper._target_=hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


@pytest.mark.parametrize("sweeper", [[], [HYDRA_BASIC]], ids=["quarl", "hydra_basic"])
def test_plan_lists_the_jobs_run_py_launches_in_order(scratch, sweeper):
    """run.py -m with a launcher that records its jobs (quarl's sweeper passes none over: the store is empty)."""
    args = ["+sweep=smoke", "algo=choice(ppo,a2c)", "env=glob(*,exclude=[mountaincar*])", "seed=range(0,2)"]
    planned = plan(CONF_DIR, args, scratch / "outputs/results.sqlite")
    assert len(planned) == 2 * (len(TOP_ENVS) - 2) * 3 * 2
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGINS), ENV.get("PYTHONPATH")]))}
    launch = ["hydra.launcher._target_=hydra_plugins.quarl_recording_launcher.RecordingLauncher",
              "hydra.callbacks.collate.enabled=false", *sweeper]
    done = WARM(scratch, ["-m", *args, *launch], timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    launched = [" ".join(json.loads(line)) for line in (scratch / "launched.jsonl").read_text().splitlines()]
    assert launched == list(planned["overrides"])


def test_a_long_job_folder_name_is_cut_and_stays_distinct():
    """Names over 255 bytes make the file system refuse the job's folder: a long name is cut to
    MAX_DIRNAME bytes and ends with a hash of the whole."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from quarl.sweeps import MAX_DIRNAME, override_dirname

    parser = OverridesParser.create()
    layers = [f"algo.hyperparams.policy_layers=[{w},{w}]" for w in (64, 65)]
    names = []
    for layer in layers:
        overrides = parser.parse_overrides([layer, *(f"+extra{i}.long_setting_name={i}" for i in range(12))])
        names.append(override_dirname(overrides, [], ",", "="))
    assert all(len(n.encode()) <= MAX_DIRNAME for n in names) and names[0] != names[1]
    short = parser.parse_overrides(["algo=dqn", "seed=1"])
    assert override_dirname(short, [], ",", "=") == "algo=dqn,seed=1"  # as Hydra names it
