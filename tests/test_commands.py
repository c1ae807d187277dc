"""What a user reads first: `python run.py --help` and the n/a message of a cell that cannot run.
The commands run as processes forked from a warm one (tests/warm_run.py); tests/actorq and the SLURM
jobs run `python run.py` in fresh interpreters."""

from __future__ import annotations

import pytest

from quarl.errors import IncompatibleCell
from quarl.rl.algos import check_action_kind, runnable
from tests.conftest import WARM, quarl_cli


def test_help_lists_the_groups_a_user_chooses_from(tmp_path):
    done = WARM(tmp_path, ["--help"], timeout=300)
    assert done.returncode == 0, done.stderr
    choices = done.stdout.split("== Config ==")[0]
    for line in ("algo=NAME", "env=NAME", "quant=NAME", "hydra/launcher=NAME", "+sweep=NAME"):
        assert line in choices, line
    assert "ptq_classic" in choices and "slurm" in choices and "atari/: " in choices and "d4pg" in choices
    assert "schema" not in choices and "tuned/" not in choices
    assert not list(tmp_path.iterdir())  # --help runs nothing and writes nothing


def test_quarl_run_is_run_py_from_any_folder(tmp_path):
    """`quarl run ARGS` hands ARGS to run.py's Hydra app: --help and --cfg job print the same."""
    for args in (["--help"], ["--cfg", "job", "algo=dqn", "quant.bits=4"]):
        outputs = [WARM(tmp_path, args, timeout=300), quarl_cli(tmp_path, "run", *args, timeout=300)]
        assert [done.returncode for done in outputs] == [0, 0], outputs[1].stderr
        assert outputs[1].stdout == outputs[0].stdout and "algo" in outputs[1].stdout
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("method, suggested, absent", [
    ("ptq", "pick an algorithm from a2c, ppo, ddpg, td3, sac; d4pg with quant=actorq", None),
    ("qat", "pick an algorithm from a2c, ppo, ddpg, td3, sac; d4pg with quant=actorq", None),
    ("actorq", "pick an algorithm from d4pg)", "ppo"),
])
def test_na_message_suggests_only_what_runs_with_the_method(method, suggested, absent):
    with pytest.raises(IncompatibleCell) as err:
        check_action_kind("dqn", "Pendulum-v1", "continuous", method)
    assert suggested in str(err.value)
    if absent:
        assert absent not in str(err.value).split("n/a:")[1]
    assert runnable("discrete", "actorq") == ["dqn"] and "d4pg" not in runnable("continuous", "ptq")


def test_every_quarl_option_says_what_it_does_and_its_default():
    """`quarl COMMAND --help` describes each option, and the default of each that has one."""
    import argparse

    from quarl import cli

    (commands,) = [a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in commands.choices.items():
        if name == "run":  # its --help is run.py's
            continue
        for option in command._actions:
            if isinstance(option, argparse._HelpAction):
                continue
            assert option.help, f"quarl {name} {option.dest} has no help"
            if option.default not in (None, False, []):
                assert "default" in option.help, f"quarl {name} {option.dest}: its help does not give its default"
    export = " ".join(commands.choices["export"].format_help().split())
    assert "default: the record's own" in export and "default: outputs/results.sqlite" in export
    results = commands.choices["results"].format_help()
    assert "E (rel_error) as a fraction" in " ".join(results.split())


def test_unwritable_output_and_bad_bits_are_one_sentence(tmp_path, caplog):
    """A folder the command cannot write into (here: under a regular file) and --bits that are not
    numbers end in one sentence and exit 1, never a traceback."""
    from quarl.cli import main
    from quarl.store.sqlite import Store
    from tests.records import record, write

    store = tmp_path / "r.sqlite"
    write(Store(store), [record("ppo", "cartpole", "fp32"), record("ppo", "cartpole", "ptq", 8)])
    (tmp_path / "file").write_text("not a folder")
    assert main(["collate", "--store", str(store), "--out", str(tmp_path / "file" / "out")]) == 1
    assert f"quarl: --out {tmp_path / 'file' / 'out'} cannot be written: {tmp_path / 'file'} is a file" in caplog.text
    assert main(["sensitivity", "--bits", "a,b"]) == 1
    assert "--bits a,b is not a list of whole numbers" in caplog.text and "Traceback" not in caplog.text


def test_a_full_disk_without_a_file_name_names_the_folder_written(tmp_path, caplog, monkeypatch):
    """The system's error may carry no file name (a full disk during a write): the sentence names
    the command's --out, not 'a file'."""
    import errno

    from quarl import cli

    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli, "cmd_collate", full)
    assert cli.main(["collate", "--out", str(tmp_path / "coll")]) == 1
    assert f"quarl: {tmp_path / 'coll'}: No space left on device." in caplog.text
