"""`python run.py ARGS` without paying its imports each time.

A server process imports quarl's pipeline (torch, SB3, Hydra, and torch._dynamo, which building an
optimizer imports: about 5 s of CPU) and runs one tiny cell (`_warm_up`), then forks one child per
run. The child is a process of its own, as `python run.py` would be: its own working folder, stdout,
stderr, exit code, signal dispositions, Hydra and logging state; it runs run.py as `__main__` and
ends the way the interpreter does (threads joined, atexit handlers run, streams flushed). Runs go
side by side: the server reaps each and writes its exit code to a file the client polls, and the
client's handle is used as subprocess.Popen's is (signals, wait, communicate). The server is
single-threaded when it forks, and one per test process (pytest-xdist worker).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_PY = str(ROOT / "run.py")


def _exit_code(code: object) -> int:
    """The status the interpreter exits with for `sys.exit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _child(request: dict) -> None:
    """Become `python run.py ARGS` in the request's folder, writing to its output files; never returns."""
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.update(request["env"])
        if request["env"].get("PYTHONPATH"):  # where python would look first, after the script's folder
            sys.path[1:1] = request["env"]["PYTHONPATH"].split(os.pathsep)
        # the dispositions a shell gives `python run.py`, whatever the server inherited (a Ray driver in
        # the test process may have left SIGINT ignored)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        for fd, path in ((0, os.devnull), (1, request["out"]), (2, request["err"])):
            if fd == 2 and path == request["out"]:  # stderr=STDOUT
                os.dup2(1, 2)
                continue
            opened = os.open(path, os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_TRUNC)
            os.dup2(opened, fd)
            os.close(opened)
        module = request["module"]
        try:
            if module is None:
                sys.argv, sys.path[0] = [RUN_PY, *request["args"]], str(ROOT)  # as for `python run.py`
                runpy.run_path(RUN_PY, run_name="__main__")
            else:  # as for `python -m MODULE`
                sys.argv, sys.path[0] = [module, *request["args"]], os.getcwd()
                sys.modules.pop(module, None)
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except BaseException:  # noqa: BLE001  # the interpreter prints any uncaught exception
            traceback.print_exc()
        threading._shutdown()  # type: ignore[attr-defined]  # the interpreter joins non-daemon threads
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _reap(exit_files: dict[int, str]) -> None:
    """Collect every child that ended; write its exit code (negative: the signal) where its client looks."""
    while exit_files:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        path = exit_files.pop(pid)
        with contextlib.suppress(FileNotFoundError):  # the client is gone (its handle, and folder, collected)
            Path(path + ".tmp").write_text(str(os.waitstatus_to_exitcode(status)))
            os.replace(path + ".tmp", path)


#: The cell the server runs once in itself before its first fork, on a tiny budget: PPO with PTQ, as
#: most tests run, on Pendulum, whose continuous actions are evaluated in torch. A discrete-action
#: cell would load ONNX Runtime, whose import starts a thread, and the server must fork while it is
#: single-threaded.
WARM_UP = ["env=pendulum", "train.steps=256", "eval.episodes=1", "eval.n_envs=1", "train.progress=false",
           "eval.progress=false", "hydra.callbacks.collate.enabled=false"]


def _logging_state() -> dict[str, tuple]:
    """Every logger's level, handlers, filters and switches, by name ('' for the root)."""
    loggers = {"": logging.root, **{n: lg for n, lg in logging.Logger.manager.loggerDict.items()
                                   if isinstance(lg, logging.Logger)}}
    return {n: (lg.level, lg.handlers[:], lg.filters[:], lg.disabled, lg.propagate) for n, lg in loggers.items()}


def _warm_up() -> None:
    """Run WARM_UP's cell in the server itself, so that each child starts past what a process does
    on its first cell only (Hydra's plugin scan and parser caches, the method plugins, SB3's first
    model and update). A tiny PTQ run on CartPole took 0.78 s of CPU instead of 1.09 (median of 24);
    the suite's 159 runs, 256 s instead of 303.
    The cell runs in a folder of its own with its output discarded; afterwards the server's working
    folder, arguments, environment, logging and warning filters are as before, so a child still
    configures its logging and shows its warnings as a fresh `python run.py` does."""
    from hydra.core.plugins import Plugins
    from hydra.core.singleton import Singleton

    logs, environ, argv, path0 = _logging_state(), dict(os.environ), sys.argv, sys.path[0]
    disabled, saved_fds = logging.root.manager.disable, (os.dup(1), os.dup(2))
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            os.dup2(null, 1)
            os.dup2(null, 2)
            os.chdir(folder)
            sys.argv = [RUN_PY, *WARM_UP, f"store.path={folder}/results.sqlite", f"store.policies={folder}/policies"]
            sys.path[0] = str(ROOT)
            with contextlib.suppress(SystemExit):
                runpy.run_path(RUN_PY, run_name="__main__")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in zip((1, 2), saved_fds):
            os.dup2(saved, fd)
            os.close(saved)
        os.close(null)
        os.chdir(ROOT)
        sys.argv, sys.path[0] = argv, path0
        os.environ.clear()
        os.environ.update(environ)
        _restore_logging(logs, disabled)
        Singleton._instances.pop(Plugins, None)  # a child scans its own sys.path for plugins (PYTHONPATH may add some)
        for thread in threading.enumerate():  # tqdm's monitor, started by the cell's first bar
            if thread is not threading.main_thread() and hasattr(thread, "tqdm_cls"):
                thread.exit()
                atexit.unregister(thread._atexit_signal)
                thread.tqdm_cls.monitor = None


def _restore_logging(state: dict[str, tuple], disabled: int) -> None:
    """Put every logger back as `_logging_state` saw it (one made since: as logging makes it),
    closing the handlers added since."""
    kept = {id(h) for _, handlers, *_ in state.values() for h in handlers}
    for name in _logging_state():
        level, handlers, filters, off, propagate = state.get(name, (logging.NOTSET, [], [], False, True))
        lg = logging.getLogger(name or None)
        for handler in lg.handlers:
            if id(handler) not in kept:
                handler.close()
        lg.setLevel(level)
        lg.handlers[:], lg.filters[:], lg.disabled, lg.propagate = handlers, filters, off, propagate
    logging.root.manager.disable = disabled


def serve() -> None:
    """Read one JSON request a line from stdin and answer the pid of the child that runs it; children
    run side by side, and each one's exit code lands in its request's `exit` file when it ends."""
    # The imports every run would repeat: the app, its pipeline, the sweeper and the collate callback
    # (Hydra imports the last two from config.yaml on every run).
    # torch._dynamo: what torch imports when a run builds its first optimizer (about 1 s a run)
    import torch._dynamo  # noqa: F401

    import hydra_plugins.quarl_sweeper.quarl_sweeper  # noqa: F401
    import quarl.app
    import quarl.collate.callback
    import quarl.pipeline  # noqa: F401

    _warm_up()
    exit_files: dict[int, str] = {}
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0.05)
        _reap(exit_files)
        if not ready:
            continue
        line = sys.stdin.readline()
        if not line:
            return
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        exit_files[pid] = request["exit"]
        print(json.dumps({"pid": pid}), flush=True)


class WarmProcess:
    """One forked run, used as subprocess.Popen's result is (text output, stderr merged or apart)."""

    def __init__(self, pid: int, args: list[str], folder: tempfile.TemporaryDirectory, merged: bool) -> None:
        self.pid, self.args, self.returncode = pid, [sys.executable, *args], None
        self._folder, self._merged = folder, merged
        self._out, self._err, self._exit = (Path(folder.name) / n for n in ("stdout", "stderr", "exit"))

    def poll(self) -> int | None:
        if self.returncode is None and self._exit.exists():
            self.returncode = int(self._exit.read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.05)
        return self.returncode  # type: ignore[return-value]

    def communicate(self, timeout: float | None = None) -> tuple[str, str | None]:
        self.wait(timeout)
        return self._out.read_text(), None if self._merged else self._err.read_text()

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class WarmRun:
    """The client: starts the server with `env` on first use and stops it when the process ends."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.server: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def _started(self) -> subprocess.Popen:
        if self.server is None or self.server.poll() is not None:
            self.server = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           text=True, env=self.env, cwd=ROOT)
            atexit.register(self.server.kill)
        return self.server

    def start(self, cwd: Path, args: list[str], env: dict[str, str] | None = None, merged: bool = False,
              module: str | None = None) -> WarmProcess:
        """Start `python run.py ARGS` (with `module`, `python -m MODULE ARGS`) in `cwd`, `env` added to
        the server's environment; with `merged`, stderr goes to stdout (subprocess.STDOUT)."""
        folder = tempfile.TemporaryDirectory()
        out, err, exit_file = (str(Path(folder.name) / n) for n in ("stdout", "stderr", "exit"))
        for path in (out, err):
            Path(path).touch()
        request = {"cwd": str(Path(cwd).resolve()), "args": args, "module": module, "env": env or {}, "out": out,
                   "err": out if merged else err, "exit": exit_file}
        with self.lock:
            server = self._started()
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            line = server.stdout.readline()
        if not line:
            raise RuntimeError("the warm run.py server ended")
        command = [RUN_PY, *args] if module is None else ["-m", module, *args]
        return WarmProcess(json.loads(line)["pid"], command, folder, merged)

    def __call__(self, cwd: Path, args: list[str], timeout: float, env: dict[str, str] | None = None,
                 module: str | None = None) -> subprocess.CompletedProcess:
        """Run `python run.py ARGS` (or `python -m MODULE ARGS`) in `cwd` with `env` added to the server's
        environment; like subprocess.run(..., capture_output=True, text=True)."""
        proc = self.start(cwd, args, env, module=module)
        try:
            out, err = proc.communicate(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(proc.args, timeout, out, err) from None
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


if __name__ == "__main__":
    serve()
