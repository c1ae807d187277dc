"""`python run.py ARGS` without paying its imports each time.

A server process imports quarl's pipeline (torch, SB3, Hydra, and torch._dynamo, which building an
optimizer imports: about 5 s of CPU) once, then forks one child per run. The child is a process of
its own, as `python run.py` would be: its own working folder, stdout, stderr, exit code, Hydra and
logging state; it runs run.py as `__main__` and ends the way the interpreter does (threads joined,
atexit handlers run, streams flushed). The server is single-threaded when it forks, and one per test
process (pytest-xdist worker).
"""

from __future__ import annotations

import atexit
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
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["out"], os.O_WRONLY | os.O_TRUNC),
                                (2, request["err"], os.O_WRONLY | os.O_TRUNC)):
            opened = os.open(path, flags)
            os.dup2(opened, fd)
            os.close(opened)
        sys.argv = [RUN_PY, *request["args"]]
        sys.path[0] = str(ROOT)  # as for `python run.py`
        try:
            runpy.run_path(RUN_PY, run_name="__main__")
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


def serve() -> None:
    """Read one JSON request a line from stdin; answer the child's pid, then its exit code."""
    # The imports every run would repeat: the app, its pipeline, the sweeper and the collate callback
    # (Hydra imports the last two from config.yaml on every run).
    # torch._dynamo: what torch imports when a run builds its first optimizer (about 1 s a run)
    import torch._dynamo  # noqa: F401

    import hydra_plugins.quarl_sweeper.quarl_sweeper  # noqa: F401
    import quarl.app
    import quarl.collate.callback
    import quarl.pipeline  # noqa: F401

    for line in sys.stdin:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(json.loads(line))
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)


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

    def _reply(self, server: subprocess.Popen, deadline: float | None) -> dict:
        assert server.stdout is not None
        if deadline is not None:
            ready, _, _ = select.select([server.stdout], [], [], max(0.0, deadline - time.time()))
            if not ready:
                raise TimeoutError
        line = server.stdout.readline()
        if not line:
            raise RuntimeError("the warm run.py server ended")
        return json.loads(line)

    def __call__(self, cwd: Path, args: list[str], timeout: float, env: dict[str, str] | None = None
                 ) -> subprocess.CompletedProcess:
        """Run `python run.py ARGS` in `cwd` with `env` added to the server's environment; like
        subprocess.run(..., capture_output=True, text=True)."""
        with self.lock, tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            out.touch()
            err.touch()
            server = self._started()
            assert server.stdin is not None
            request = {"cwd": str(cwd), "args": args, "env": env or {}, "out": str(out), "err": str(err)}
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            pid = self._reply(server, None)["pid"]
            try:
                rc = self._reply(server, time.time() + timeout)["rc"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self._reply(server, None)
                raise subprocess.TimeoutExpired([RUN_PY, *args], timeout, out.read_text(), err.read_text()) from None
            return subprocess.CompletedProcess([sys.executable, RUN_PY, *args], rc, out.read_text(), err.read_text())


if __name__ == "__main__":
    serve()
