"""The README's "Commands people run most", read from the README itself and run in its order in one
folder and one store, on tiny budgets: each command's output is checked, not its exit code alone.

Every command the README shows must have a check here (a new one fails the test until it gets one);
a command that needs a GPU or a SLURM cluster is named as such and left out, with the reason.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest

from quarl.store import query as results
from tests.conftest import ENV, ROOT, quarl_cli, run_quarl

#: What every run.py command gets on top of its own overrides: a tiny budget, a short evaluation.
TINY = ["train.steps=512", "eval.episodes=2", "eval.n_envs=2"]
#: And what a sweep gets besides: no collation at its end (`quarl collate` is a command of its own here).
NO_CALLBACK = ["hydra.callbacks.collate.enabled=false"]


def readme_commands() -> list[str]:
    """The commands of the README's "Commands people run most" block, comments dropped, continued lines joined."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Commands people run most", 1)[1]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    joined = re.sub(r"\\\n\s*", "", block)
    commands = [re.split(r"\s{2,}#", line, maxsplit=1)[0].strip() for line in joined.splitlines()]
    return [c for c in commands if c and not c.startswith("#")]


@dataclass
class Step:
    """How one README command runs here and what its output must show. `args` maps the README's
    arguments to the ones run here (tiny budgets); `check` gets the output and the folder."""

    check: Callable[[str, Path], None] | None
    args: Callable[[list[str]], list[str]] = lambda a: a
    skip: str | None = None


def _store(folder: Path) -> pd.DataFrame:
    return results.load(folder / "outputs/results.sqlite")


def _check_grid_sweep(out: str, folder: Path) -> None:
    runs = _store(folder)
    ptq = runs[(runs["quant"] == "ptq") & (runs["status"] == "done")]
    assert len(ptq) == 9 and set(ptq["algo"]) == {"dqn", "a2c", "ppo"} and set(ptq["quant.bits"]) == {2, 4, 8}
    assert out.count("Training fp32") == 3  # "trains exactly 3 policies"


def _check_classic(out: str, folder: Path) -> None:
    runs = _store(folder)
    code = runs[(runs["quant.scheme"] == "quarl_code") & (runs["status"] == "done")]
    assert set(code["algo"]) == {"dqn", "a2c", "ppo"} and len(code) == 24  # 3 algos x (2..8 and 32 bits), seed 0


def _check_classic_again(out: str, folder: Path) -> None:
    assert "already in the store as done" in out and "Training fp32" not in out


def _check_search(out: str, folder: Path) -> None:
    assert "Study " in out or "trial" in out.lower()
    assert (folder / "outputs/optuna.db").exists()


def _check_trials(out: str, folder: Path) -> None:
    assert re.search(r"^Study \S+ \(sqlite:///", out, re.MULTILINE) and "COMPLETE" in out


def _check_plan(out: str, folder: Path) -> None:
    assert re.search(r"^24 cells: .*6 n/a", out, re.MULTILINE), out[-500:]  # the README's table: 24 (6 n/a)


def _check_status(out: str, folder: Path) -> None:
    assert "done" in out and "dqn" in out and "cartpole" in out


def _check_results_dqn_4(out: str, folder: Path) -> None:
    table = [line for line in out.splitlines() if line.strip().startswith("dqn")]
    assert table and all(" 4 " in f" {line} " for line in table)


def _check_results_ppo_budget(out: str, folder: Path) -> None:
    assert any(line.strip().startswith("ppo") for line in out.splitlines()), out[-500:]


def _check_collate(out: str, folder: Path) -> None:
    verdicts = (folder / "outputs/collate/tables/verdicts.md").read_text()
    assert "### ptq (scheme=quarl_code)" in verdicts and "### ptq (scheme=affine)" in verdicts  # both judged
    assert verdicts.index("### ptq (scheme=quarl_code)") < verdicts.index("### ptq (scheme=affine)")


def _check_export_onnx(out: str, folder: Path) -> None:
    assert (folder / "ppo_cartpole_int8.onnx").stat().st_size > 0 and "Exported ppo policy (int8" in out


def _check_act_onnx(out: str, folder: Path) -> None:
    assert re.search(r"episode|return|reward", out, re.IGNORECASE), out


def _check_export_c16(out: str, folder: Path) -> None:
    assert (folder / "policy/policy.c").exists() and "actions identical to the integer reference" in out


def _check_backend_c16(out: str, folder: Path) -> None:
    runs = _store(folder)
    assert (runs.get("quant.backend") == "c_16x8").any() and "c_16x8" in out


def _check_export_huffman(out: str, folder: Path) -> None:
    assert (folder / "policy4/policy.c").exists() and "uffman" in out


def _check_actorq(out: str, folder: Path) -> None:
    runs = _store(folder)
    assert ((runs["quant"] == "actorq") & (runs["status"] == "done")).any()


def _check_stop_at_return(out: str, folder: Path) -> None:
    runs = _store(folder)
    assert (pd.to_numeric(runs.get("train.stop_at_return"), errors="coerce") == 475).any()


def _check_format(out: str, folder: Path) -> None:
    cell = _store(folder).query("`quant.format` == 'mxfp4'")
    assert len(cell) == 1 and round(float(cell["bits_per_weight"].iloc[0]), 2) == 4.35  # PPO's 64x64 policy


def _check_ledger(out: str, folder: Path) -> None:
    assert out.startswith("| job | cost (s) |") and "| smoke |" in out and "atari-ppo-pong-s0" in out, out[:500]


def _check_cfg_job(out: str, folder: Path) -> None:
    assert re.search(r"^algo:$", out, re.MULTILINE) and re.search(r"^  name: dqn$", out, re.MULTILINE), out[:500]
    assert "Recorded" not in out and "Training" not in out  # printed, ran nothing


def _budget(filters: list[str]) -> list[str]:
    """A filter on the default budget becomes one on this test's budget."""
    return [TINY[0] if f == "train.steps=100000" else f for f in filters]


def _tiny(args: list[str]) -> list[str]:
    return [*args, *TINY]


def _tiny_sweep(args: list[str]) -> list[str]:
    return [*args, *TINY, *NO_CALLBACK]


def _export(args: list[str]) -> list[str]:
    """The record of this folder's tiny run that the README's filters mean: its budget added as filters."""
    cut = next((i for i, a in enumerate(args) if a.startswith("--")), len(args))  # filters before the options
    return [*args[:cut], *TINY[:2], *args[cut:]]


GPU = "needs a GPU (CUDA): left out on a machine without one"
STEPS = {
    "python run.py -m algo=dqn,a2c,ppo quant.bits=2,4,8": Step(_check_grid_sweep, _tiny_sweep),
    "python run.py -m +sweep=ptq_classic": Step(_check_classic, lambda a: [*a, "seed=0", *TINY, *NO_CALLBACK]),
    "python run.py -m +sweep=ptq_classic train.steps=5000": Step(
        _check_classic_again, lambda a: [*a[:-1], "seed=0", *TINY, *NO_CALLBACK]),  # the same cells: all done
    "python run.py -m +search=width_bits_pareto": Step(
        _check_search, lambda a: [*a, "hydra.sweeper.n_trials=2", "hydra.sweeper.search.seeds=1", *TINY, *NO_CALLBACK]),
    "quarl trials": Step(_check_trials),
    "python run.py quant.format=mxfp4": Step(_check_format, _tiny),
    "quarl plan +sweep=smoke": Step(_check_plan),
    "quarl status": Step(_check_status),
    "quarl results algo=dqn quant.bits=4": Step(_check_results_dqn_4),
    "quarl results algo=ppo train.steps=100000": Step(_check_results_ppo_budget, _budget),
    "quarl collate": Step(_check_collate),
    "quarl export algo=ppo quant=ptq quant.bits=8 --out ppo_cartpole_int8.onnx": Step(_check_export_onnx, _export),
    "python examples/act_onnx.py ppo_cartpole_int8.onnx --episodes 3": Step(_check_act_onnx),
    "quarl export algo=ppo quant=ptq quant.bits=8 --format c --activations int16 --out policy/": Step(
        _check_export_c16, _export),
    "python run.py quant.backend=c_16x8": Step(_check_backend_c16, _tiny),
    "quarl export algo=ppo quant=ptq quant.bits=8 --format c --precision int4 --weight-coding huffman --out policy4/":
        Step(_check_export_huffman, _export),
    "python run.py algo=dqn env=cartpole quant=actorq actorq.actors=2 train.steps=150000 actorq.stop_at_return=475 "
    "algo.hyperparams.learning_rate=0.00063": Step(_check_actorq, lambda a: [*a, "train.steps=3000", *TINY[1:]]),
    "python run.py train.stop_at_return=475": Step(_check_stop_at_return, _tiny),
    "python run.py algo=dqn train.amp=true train.device=cuda": Step(None, skip=GPU),
    "python benchmarks/bench_actorq_gpu.py": Step(None, skip=GPU),
    "python benchmarks/device/ledger.py status": Step(_check_ledger),
    "python run.py -m hydra/launcher=slurm hydra.launcher.partition=gpu +sweep=ptq_classic": Step(
        None, skip="needs a SLURM cluster with a gpu partition: tests/test_cluster.py runs this launcher "
                             "on a real single-node cluster"),
    "python run.py --cfg job algo=dqn": Step(_check_cfg_job),
}


def _run(command: str, args: list[str], folder: Path) -> str:
    """One command as a user types it, in `folder`; its stdout and stderr together."""
    program, *rest = shlex.split(command)
    if program == "quarl":
        done = quarl_cli(folder, *args)
    elif rest[0] == "run.py":
        done = run_quarl(folder, *args, check=False)
    else:  # an example or benchmark script
        done = subprocess.run([sys.executable, str(ROOT / rest[0]), *args], cwd=folder, env=ENV,
                              capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"{command} -> {args}: exit {done.returncode}\n{out[-3000:]}"
    assert "Traceback" not in out, out[-3000:]
    return out


def test_every_readme_command_has_a_check():
    commands = readme_commands()
    assert len(commands) >= 15
    assert [c for c in commands if c not in STEPS] == [], "give each new README command a Step here"
    assert [c for c in STEPS if c not in commands] == [], "a Step for a command the README no longer shows"


def test_the_readme_commands_run_in_order_in_one_store(tmp_path: Path):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("the C exports need a host C compiler (cc)")
    left_out = []
    for command in readme_commands():
        step = STEPS[command]
        if step.check is None:
            left_out.append(f"{command}: {step.skip}")
            continue
        program, *rest = shlex.split(command)
        args = step.args(rest[1:] if program == "python" else rest)
        step.check(_run(command, args, tmp_path), tmp_path)
    assert len(left_out) == 3, left_out  # the GPU and SLURM commands, each with its reason
