"""`python run.py ARGS` without paying its imports each time.

A server process imports quarl's pipeline (torch, SB3, Hydra, and torch._dynamo, which building an
optimizer imports: about 5 s of CPU) once, then forks one child per run. The child is a process of
its own, as `python run.py` would be: its own working folder, stdout, stderr, exit code, signal
dispositions, Hydra and logging state; it runs run.py as `__main__` and ends the way the interpreter
does (threads joined, atexit handlers run, streams flushed). Runs go side by side: the server reaps
each and writes its exit code to a file the client polls, and the client's handle is used as
subprocess.Popen's is (signals, wait, communicate). The server is single-threaded when it forks, and
one per test process (pytest-xdist worker).
"""

from __future__ import annotations

import atexit
import contextlib
import json
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
