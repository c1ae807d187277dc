"""The Hydra application behind `run.py`: one job = one cell."""

from __future__ import annotations

import difflib
import functools
import logging
import shutil
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from quarl import CONF_DIR
from quarl.config import schema
from quarl.config.cells import label
from quarl.errors import QuarlError, ended, ending_like_ctrl_c
from quarl.store.disk import cannot_make, cannot_write
from quarl.store.records import Context

log = logging.getLogger("quarl")


class FirstOnly(logging.Filter):
    """Lets the first record containing `text` through and drops its repeats: submitit warns
    "Bypassing sacct error" on every poll of a SLURM cluster without accounting."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.seen = text, False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.text not in record.getMessage():
            return True
        if self.seen:
            return False
        self.seen = True
        record.msg, record.args = f"{record.getMessage()} (shown once; the sweep goes on)", None
        return True


def job(cfg: DictConfig) -> None:
    """Run the cell `cfg`; a user mistake ends the process with one line and exit code 1, and Ctrl-C,
    SIGTERM or SIGHUP with one line and exit code 130, 143 or 129 (quarl.errors.Terminated)."""
    hc = HydraConfig.get()
    ctx = Context(
        cfg=cfg,
        run_dir=Path(hc.runtime.output_dir),
        base_dir=Path(hc.runtime.cwd),
        multirun=hc.mode == RunMode.MULTIRUN,
    )
    try:
        with ending_like_ctrl_c():  # in a launcher's own process (submitit's keeps its SIGTERM handler)
            _job(ctx, list(hc.overrides.task))
    except QuarlError as exc:
        log.error("%s", exc)
        if not ctx.multirun:
            _drop_empty(ctx.run_dir, ctx.base_dir)
        sys.exit(1)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP
        how, code = ended(exc)
        log.error("%s: %s was not recorded. %s", how, label(cfg), resume_note(cfg))
        sys.exit(code)


def _job(ctx: Context, overrides: list[str]) -> None:
    """Check the cell (a single run: before torch and SB3 load) and run it."""
    cfg = ctx.cfg
    if not ctx.multirun:
        schema.check(cfg)  # a refused run ends before torch and SB3 are imported
        schema.check_overrides(cfg, overrides)
        for said in repeated_keys(overrides):
            log.warning("%s", said)
    from quarl.pipeline import run_cell  # torch and SB3: not needed where every cell is skipped

    run_cell(ctx)


def repeated_keys(overrides: list[str]) -> list[str]:
    """A sentence for each key the command line sets more than once (Hydra keeps the last, silently)."""
    given: dict[str, list[str]] = {}
    for override in overrides:
        key, sep, _ = override.partition("=")
        if sep:
            given.setdefault(key.lstrip("+~"), []).append(override)
    return [
        f"{key} is given {len(said)} times ({' '.join(said)}): the last, {said[-1]}, is used."
        for key, said in given.items()
        if len(said) > 1
    ]


RESUME = (
    "Run the same command again to go on: cells in the store are skipped, and a training resumes "
    "from its last checkpoint."
)
# ActorQ's learner and actors keep no checkpoint: its training starts over.
ACTORQ_RESTART = (
    "Run the same command again to go on: cells in the store are skipped, and an ActorQ training, which keeps "
    "no checkpoint, starts over from step 0."
)


def resume_note(cfg: DictConfig) -> str:
    """What running the same command again does for the cell `cfg`, once it was interrupted."""
    return ACTORQ_RESTART if cfg.quant.get("method") == "actorq" else RESUME


def _drop_empty(run_dir: Path, base_dir: Path) -> None:
    """Remove the run dir of a refused run when it holds nothing but Hydra's own files, and the
    folders above it (up to the launch folder) that it leaves empty."""
    if not run_dir.is_dir() or any(p.name != ".hydra" and p.suffix != ".log" for p in run_dir.iterdir()):
        return  # Hydra writes .hydra/ and the job's log before the job starts
    shutil.rmtree(run_dir, ignore_errors=True)
    for parent in run_dir.parents:
        if parent == base_dir or base_dir not in parent.parents or any(parent.iterdir()):
            break
        parent.rmdir()


#: The config groups `python run.py --help` lists, with how each is chosen.
HELP_GROUPS = (
    ("algo", "algo=NAME"),
    ("env", "env=NAME (other suites: env=SUITE/NAME)"),
    ("quant", "quant=NAME"),
    ("hydra/launcher", "hydra/launcher=NAME (with -m)"),
    ("sweep", "+sweep=NAME (with -m; src/quarl/conf/sweep/README.md)"),
)


@functools.lru_cache(maxsize=None)
def help_groups() -> str:
    """The user's config groups and their options, read from the conf folder (for `--help`; read
    once: Hydra resolves it for every job it composes)."""
    lines = []
    for group, how in HELP_GROUPS:
        names = options(group)
        top = [n for n in names if "/" not in n]
        nested = [n for n in names if "/" in n]
        lines.append(f"{how}\n    {', '.join(top)}")
        if nested:
            suites = sorted({n.split("/")[0] for n in nested})
            lines += [
                f"    {suite}/: {', '.join(n.split('/', 1)[1] for n in nested if n.startswith(suite + '/'))}"
                for suite in suites
            ]
    return "\n".join(lines)


CHOSEN_GROUPS = ("algo", "env", "quant")  # the groups whose options a typo most often misses


def options(group: str) -> list[str]:
    """The options of a config group, suite folders included ('cartpole', 'atari/pong')."""
    folder = CONF_DIR / group
    return sorted(p.relative_to(folder).with_suffix("").as_posix() for p in folder.rglob("*.yaml"))


def unknown_option(arg: str) -> str | None:
    """One sentence for a command-line choice (`env=pongg`, `-m env=pong,acrobot`) that names no
    option of its group, with the nearest options (`env=pong` -> atari/pong), else None."""
    key, sep, value = arg.partition("=")
    if not sep or key not in CHOSEN_GROUPS or any(c in value for c in "()[]{}*$"):
        return None  # not a plain choice: Hydra's own grammar and errors apply
    known = options(key)
    for name in (v.strip() for v in value.split(",")):
        if name in known:
            continue
        base = name.rsplit("/", 1)[-1]
        score = {o: difflib.SequenceMatcher(None, name, o).ratio() for o in known}
        alike = [o for o in known if difflib.SequenceMatcher(None, base, o.rsplit("/", 1)[-1]).ratio() >= 0.75]
        near = sorted(alike, key=lambda o: -score[o])[:3]
        hint = f"did you mean {' or '.join(f'{key}={n}' for n in near)}? " if near else ""
        return f"{key}={name} is not an option: {hint}python run.py --help lists every {key}."
    return None


RUN_DIRS = ("hydra.run.dir", "hydra.sweep.dir")


def unwritable_dir(arg: str) -> str | None:
    """One sentence where `arg` sets Hydra's run or sweep folder somewhere that cannot be written (a
    read-only mount, a file in the way), before Hydra would fail there with a traceback; else None."""
    key, sep, value = arg.partition("=")
    if not sep or key not in RUN_DIRS or not value or "${" in value:
        return None
    why = cannot_make(Path(value))
    if why is None:
        return None
    if why.endswith("is a file, not a folder"):
        return f"{key}={value} cannot be made: {why}."
    return f"{key}={value} cannot be written ({why}): give a folder quarl may write in."


def unwritable_cwd(args: list[str]) -> str | None:
    """One sentence where the working folder, which holds the default run dirs and store (outputs/),
    cannot be written (a read-only mount) and the command line moves neither run nor sweep folder
    there; else None. Hydra's own flags (--help, --cfg, ...) write nothing and are let through."""
    if any(arg.startswith("--") or arg.partition("=")[0] in RUN_DIRS for arg in args):
        return None
    cwd = Path.cwd()
    why = cannot_write(cwd)
    if why is None:
        return None
    return (
        f"The working folder {cwd} {why}, and quarl writes its run dirs and results there (outputs/): run it from "
        "a folder it may write in, or give hydra.run.dir=DIR (hydra.sweep.dir=DIR with -m) and store.path, "
        "store.policies in one."
    )


def main() -> None:
    """Entry point of `python run.py [overrides]` and `quarl run [overrides]`."""
    if not (CONF_DIR / "config.yaml").exists():
        sys.exit(
            f"quarl: no configs at {CONF_DIR}: the installed package lacks its conf folder; "
            "reinstall it (pip install . or pip install -e . in quarl's source tree)."
        )
    for arg in sys.argv[1:]:
        problem = unknown_option(arg) or unwritable_dir(arg)
        if problem:
            sys.exit(f"quarl: {problem}")
    problem = unwritable_cwd(sys.argv[1:])
    if problem:
        sys.exit(f"quarl: {problem}")
    schema.register()
    if not OmegaConf.has_resolver("quarl_groups"):
        OmegaConf.register_new_resolver("quarl_groups", help_groups)
    logging.getLogger("submitit").addFilter(FirstOnly("Bypassing sacct error"))
    try:
        with ending_like_ctrl_c():
            hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(job)()
    except KeyboardInterrupt as exc:  # in a launcher that waits on its jobs (a job reports its own cell)
        how, code = ended(exc)
        log.error("%s. %s", how, RESUME)
        sys.exit(code)
