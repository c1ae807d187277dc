"""tests/warm_run.py: a run forked from the warm server (which ran a cell of its own first) prints,
logs and records what `python run.py` or `python -m quarl.cli` does in a fresh process."""

import re
import subprocess
import sys

from quarl.store import query as results
from tests.conftest import ENV, FAST, ROOT, quarl_cli, run_quarl

STAMP = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]", re.MULTILINE)


def _lines(text: str, folder) -> list[str]:
    """The run's output without its times and its launch folder."""
    return STAMP.sub("[time]", text).replace(str(folder), "FOLDER").splitlines()


def _fresh(folder, *command: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *command], cwd=folder, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def _same_output(forked: subprocess.CompletedProcess, fresh: subprocess.CompletedProcess, forked_in, fresh_in) -> None:
    for stream in ("stdout", "stderr"):
        assert _lines(getattr(forked, stream), forked_in) == _lines(getattr(fresh, stream), fresh_in), stream


def test_a_forked_run_prints_and_records_what_a_fresh_process_does(tmp_path):
    cell = [*FAST, "quant.bits=4", f"store.policies={tmp_path / 'policies'}"]
    for name in ("trained", "fresh", "forked"):
        (tmp_path / name).mkdir()
    run_quarl(tmp_path / "trained", *cell)  # trains the policy the other two load
    fresh = _fresh(tmp_path / "fresh", str(ROOT / "run.py"), *cell)
    assert "Recorded fp32 baseline" in fresh.stdout + fresh.stderr
    _same_output(run_quarl(tmp_path / "forked", *cell), fresh, tmp_path / "forked", tmp_path / "fresh")
    # quarl's other commands set up logging themselves (basicConfig), which a handler left over would undo
    store = tmp_path / "fresh/outputs/results.sqlite"
    fresh = _fresh(tmp_path, "-m", "quarl.cli", "results", "--store", str(store))
    assert "reward_mean" in fresh.stdout
    _same_output(quarl_cli(tmp_path, "results", "--store", str(store)), fresh, tmp_path, tmp_path)
    rows = [results.load(tmp_path / name / "outputs/results.sqlite").set_index("quant") for name in ("fresh", "forked")]
    assert rows[0]["reward_mean"].to_dict() == rows[1]["reward_mean"].to_dict()
