"""A store that cannot be used, met by `python run.py` and the `quarl` commands: one sentence, exit 1,
no traceback, and nothing written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quarl import cli
from quarl.store.sqlite import Store
from tests.conftest import FAST, run_quarl
from tests.records import record, write
from tests.store.test_sqlite import _damage, _filled_store, read_only

COMMANDS = [["results"], ["status"], ["export", "--out", "x.onnx"], ["rebuild", "runs"]]


def one_error(caplog: pytest.LogCaptureFixture) -> str:
    """The one line a refused command logged."""
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "Traceback" not in caplog.text, caplog.text
    return errors[0].getMessage()


@pytest.mark.parametrize("how", ["truncated", "overwritten"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_damaged_store_is_one_sentence_in_every_command(tmp_path, monkeypatch, caplog, command, how):
    monkeypatch.chdir(tmp_path)
    write(Store(tmp_path / "other.sqlite"), [record("ppo", "cartpole")], run_root=tmp_path / "runs")  # to rebuild
    _filled_store(tmp_path / "r.sqlite")
    _damage(tmp_path / "r.sqlite", how)
    damaged = (tmp_path / "r.sqlite").read_bytes()
    monkeypatch.setattr(Store, "_ready", set())
    with caplog.at_level("INFO"):
        assert cli.main([*command, "--store", "r.sqlite"]) == 1
    message = one_error(caplog)
    assert message.startswith("quarl: The results store r.sqlite is damaged (")
    assert "quarl rebuild outputs --store r.sqlite" in message
    assert (tmp_path / "r.sqlite").read_bytes() == damaged and not (tmp_path / "x.onnx").exists()


def test_a_read_only_store_is_read_and_not_written(tmp_path, monkeypatch, caplog, capsys):
    path = tmp_path / "r.sqlite"
    write(Store(path), [record("ppo", "cartpole", bits=8)])
    write(Store(tmp_path / "other.sqlite"), [record("ppo", "cartpole", bits=4)], run_root=tmp_path / "runs")
    before = Store(path).runs()
    read_only(monkeypatch)
    assert cli.main(["results", "--store", str(path)]) == 0 and "cartpole" in capsys.readouterr().out
    with caplog.at_level("INFO"):
        assert cli.main(["rebuild", str(tmp_path / "runs"), "--store", str(path)]) == 1
    message = one_error(caplog)
    assert message.startswith(f"quarl: The results store {path} cannot be written (attempt to write a readonly")
    monkeypatch.undo()
    assert Store(path).runs().equals(before)


def test_run_py_on_a_damaged_store_is_one_sentence_and_trains_nothing(scratch):
    store = scratch / "damaged.sqlite"
    _filled_store(store)
    _damage(store, "overwritten")
    damaged = store.read_bytes()
    done = run_quarl(scratch, *FAST, "store.path=damaged.sqlite", "store.policies=policies", check=False)
    log = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in log, log
    assert f"The results store {store.resolve()} is damaged (database disk image is malformed)" in log
    assert store.read_bytes() == damaged
    assert not list(scratch.rglob("model.zip"))  # the store is read before any training


def _immutable(path: Path) -> None:
    """Make `path` unwritable, for root too (chattr +i), or skip where that cannot be done."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("running as root without `chattr +i`: no way to make a file read-only for this process")


def test_run_py_on_a_read_only_store_is_one_sentence_and_writes_nothing(scratch):
    store = scratch / "ro.sqlite"
    write(Store(store), [record("dqn", "acrobot", bits=4)])
    before = Store(store).runs()
    _immutable(store)
    try:
        done = run_quarl(scratch, *FAST, "store.path=ro.sqlite", "store.policies=policies", check=False)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(store)], check=False)
        store.chmod(0o644)
    log = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in log, log
    assert f"The results store {store.resolve()} cannot be written (attempt to write a readonly database)" in log
    assert Store(store).runs().equals(before)
    assert not list(scratch.rglob("model.zip"))  # refused at the running marker, before any training


# Inside a user and mount namespace (no root needed where the kernel allows them): bind the folder
# onto itself read-only, check that nothing can be written there, then run quarl's read commands.
_ON_READ_ONLY_MOUNT = """
mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" || exit 77
touch "$1/probe" 2>/dev/null && exit 78
cd "$1" && shift && exec "$@"
"""
_READS = """
import sys
from quarl import cli
from quarl.store.sqlite import Store
for command in (["results"], ["status"], ["collate", "--out", sys.argv[1], "algo=ppo"]):
    print("rc", command[0], cli.main([*command, "--store", "r.sqlite"]), flush=True)
store = Store("r.sqlite", read_only=True)
print("rows", len(store.runs()), "mode", store._mode)
"""


def test_a_store_on_a_read_only_mount_is_read(tmp_path):
    """A real read-only file system (a read-only bind mount in a user namespace), where SQLite
    cannot make the WAL's -shm file: `results`, `status` and `collate` (writing its --out elsewhere)
    read the store through ``immutable=1``. Skipped where namespaces or mounts are not allowed."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1): cannot make a read-only mount without root")
    folder = tmp_path / "mounted"
    folder.mkdir()
    write(Store(folder / "r.sqlite"), [record("ppo", "cartpole", bits=8), record("ppo", "cartpole", bits=4)])
    before = (folder / "r.sqlite").read_bytes()
    assert sorted(p.name for p in folder.iterdir()) == ["r.sqlite"]  # the writer folded its WAL in
    done = subprocess.run(
        [unshare, "-rm", "sh", "-c", _ON_READ_ONLY_MOUNT, "sh", str(folder), sys.executable, "-c", _READS,
         str(tmp_path / "collated")],
        capture_output=True, text=True, timeout=300,
    )
    if done.returncode in (1, 77) and "rc " not in done.stdout:  # unshare or mount refused here
        pytest.skip(f"no read-only mount here: {done.stderr.strip()[:200]}")
    assert done.returncode != 78, "the bind mount was writable"
    log = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in log and "cannot be written" not in log, log
    assert "rc results 0" in log and "rc status 0" in log and "rc collate 0" in log
    assert "rows 2 mode immutable=1" in log  # SQLite's read-only mode could not open it: immutable did
    assert (folder / "r.sqlite").read_bytes() == before and (tmp_path / "collated" / "README.md").is_file()
