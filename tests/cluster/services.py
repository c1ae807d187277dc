"""A real single-node SLURM cluster (munge, slurmctld, slurmd) and a Ray head on this machine.

The test suite starts them through `shared()` (one set for all xdist workers, stopped by the last
user); by hand (as root, with Debian's `slurm-wlm` and `munge` installed):

    python -m tests.cluster.services start slurm /tmp/quarl-cluster   # prints `export SLURM_CONF=...`
    python -m tests.cluster.services start ray /tmp/quarl-cluster     # prints the Ray address
    python -m tests.cluster.services stop all /tmp/quarl-cluster

Everything lives in one folder (config, state, logs, sockets, on ports picked free): nothing under
/etc or /run is touched, and a system munge or SLURM keeps running beside it. Only the processes
started here are stopped, by their ids.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from filelock import FileLock

log = logging.getLogger(__name__)

PARTITION = "quarl"
SLURM_TOOLS = ("munged", "munge", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
# Ray enables token authentication when ~/.ray/auth_token exists (any local `ray.init()` writes it),
# and a driver given an explicit address sends no token unless RAY_AUTH_MODE=token: the test head
# runs without it, the same on every machine.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    """A TCP port nothing listens on now (from the kernel's ephemeral range, clear of Ray's worker ports)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def slurm_missing() -> Optional[str]:
    """Why a SLURM cluster cannot be started here (None when it can)."""
    if os.geteuid() != 0:
        return "a SLURM cluster on this machine needs root (munged runs as the munge user, slurmd as root)"
    absent = [tool for tool in SLURM_TOOLS if shutil.which(tool) is None]
    try:
        pwd.getpwnam("munge")
    except KeyError:
        absent.append("the munge user")
    if absent:
        return ("needs Debian's slurm-wlm and munge packages (apt-get install -y slurm-wlm munge): "
                f"missing {', '.join(absent)}")
    return None


def ray_missing() -> Optional[str]:
    """Why a Ray head cannot be started here (None when it can)."""
    if shutil.which("ray", path=str(Path(sys.executable).parent)) is None:
        return "needs Ray (pip install 'quarl[ray]'): no `ray` command next to this Python"
    return None


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def parent_of(pid: int) -> Optional[int]:
    """The parent process id of `pid` (None once it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def ancestors(pid: int) -> list[int]:
    """`pid`'s parent, its parent's parent, ... up to init."""
    out, current = [], parent_of(pid)
    while current and current not in out:
        out.append(current)
        current = parent_of(current)
    return out


def _wait_for(what: str, ready: Callable[[], bool], timeout: float, logs: list[Path], pids: dict[str, int]) -> None:
    """Poll `ready()` until it holds; on timeout or a dead daemon raise with the end of its logs."""
    deadline = time.monotonic() + timeout
    while not ready():
        dead = [name for name, pid in pids.items() if not alive(pid)]
        if dead or time.monotonic() > deadline:
            tails = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-2000:]}" for p in logs if p.exists())
            reason = f"{', '.join(dead)} exited" if dead else f"not ready after {timeout:.0f} s"
            raise RuntimeError(f"{what}: {reason}\n{tails}")
        time.sleep(0.3)


def _ok(*command: str, env: Optional[dict] = None) -> bool:
    return subprocess.run(command, capture_output=True, env=env).returncode == 0


def _daemon(command: list[str], out: Path, env: Optional[dict] = None, **kwargs: Any) -> int:
    """Start a foreground daemon in its own session, output to `out`; its pid."""
    with open(out, "ab") as sink:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env, **kwargs)
    return proc.pid


def stop_pids(pids: dict[str, int], grace: float = 15.0) -> None:
    """SIGTERM each process (in the given order), SIGKILL what is left after `grace` seconds."""
    for name, pid in pids.items():
        if alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if alive(pid):
                log.warning("%s (pid %d) ignored SIGTERM; killing it", name, pid)
                os.kill(pid, signal.SIGKILL)
        _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


# ----------------------------------------------------------------------------- SLURM


def _node_line() -> str:
    """This host as a SLURM node: `slurmd -C`'s CPUs, sockets, cores, threads and memory."""
    first = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    return f"{first} NodeAddr=127.0.0.1 State=UNKNOWN"


def slurm_conf(folder: Path, munge_socket: Path) -> str:
    """slurm.conf for a one-node cluster: this host as controller and node, one partition."""
    host = socket.gethostname().split(".")[0]
    return "\n".join([
        "ClusterName=quarltest",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        "KillWait=2",  # seconds between SIGTERM and SIGKILL when a job is cancelled or requeued
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        _node_line(),
        f"PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def _start_munge(folder: Path) -> tuple[int, Path]:
    """munged as the munge user with its own key and socket in `folder` (owned by munge; every
    folder above it must be searchable by that user)."""
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    munge = pwd.getpwnam("munge")
    for path in (folder, key):
        os.chown(path, munge.pw_uid, munge.pw_gid)
    folder.chmod(0o755)  # munged wants the socket's folder searchable by every client
    sock = folder / "munge.socket"
    pid = _daemon(["munged", "--foreground", f"--socket={sock}", f"--key-file={key}",
                   f"--log-file={folder / 'munged.log'}", f"--pid-file={folder / 'munged.pid'}",
                   f"--seed-file={folder / 'munged.seed'}"],
                  folder / "munged.out", user=munge.pw_uid, group=munge.pw_gid, extra_groups=[])
    _wait_for("munged", lambda: _ok("munge", "-S", str(sock), "-s", "ping"), 20,
              [folder / "munged.out", folder / "munged.log"], {"munged": pid})
    return pid, sock


def start_slurm(root: Path) -> dict[str, Any]:
    """munged, slurmctld and slurmd under `root` (a new folder); the environment that reaches them."""
    pids: dict[str, int] = {}
    munge_dir = Path(tempfile.mkdtemp(prefix="qmunge", dir="/tmp"))  # reachable by the munge user
    try:
        pids["munged"], sock = _start_munge(munge_dir)
        folder = root
        for sub in ("state", "spool"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        conf = folder / "slurm.conf"
        conf.write_text(slurm_conf(folder, sock))
        env = {**os.environ, "SLURM_CONF": str(conf)}
        for name in ("slurmctld", "slurmd"):
            pids[name] = _daemon([name, "-D", "-f", str(conf)], folder / f"{name}.out", env=env)
        logs = [folder / n for n in ("slurmctld.out", "slurmctld.log", "slurmd.out", "slurmd.log")]
        _wait_for("slurmctld", lambda: _ok("scontrol", "ping", env=env), 30, logs, pids)
        idle = lambda: subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True,  # noqa: E731
                                      env=env).stdout.strip() == "idle"
        _wait_for("slurmd", idle, 60, logs, pids)
    except BaseException:
        stop_pids(dict(reversed(pids.items())))
        shutil.rmtree(munge_dir, ignore_errors=True)
        raise
    info = {"pids": pids, "env": {"SLURM_CONF": str(conf)}, "partition": PARTITION, "folder": str(root),
            "munge_dir": str(munge_dir)}
    log.info("SLURM is up: partition %s, SLURM_CONF=%s, pids %s", PARTITION, conf, pids)
    return info


def stop_slurm(info: dict[str, Any]) -> None:
    """Cancel this cluster's jobs, then stop slurmd, slurmctld and munged (the pids in `info`)."""
    env = {**os.environ, **info["env"]}
    if alive(info["pids"]["slurmctld"]):
        jobs = subprocess.run(["squeue", "-h", "-o", "%A"], capture_output=True, text=True, env=env).stdout.split()
        if jobs:
            subprocess.run(["scancel", *jobs], env=env, capture_output=True)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and subprocess.run(
                    ["squeue", "-h", "-o", "%A"], capture_output=True, text=True, env=env).stdout.strip():
                time.sleep(0.5)
    pids = info["pids"]
    stop_pids({name: pids[name] for name in ("slurmd", "slurmctld", "munged")})
    shutil.rmtree(info["munge_dir"], ignore_errors=True)


# ----------------------------------------------------------------------------- Ray


#: The Ray head's logical CPUs: two ActorQ runs of two actors (a CPU each) side by side, one per
#: xdist worker, so that neither waits for the other's actors to end.
RAY_CPUS = 4


def start_ray(root: Path, cpus: int = RAY_CPUS) -> dict[str, Any]:
    """`ray start --head --node-ip-address=127.0.0.1 --port=<free> --block` with its own temp folder.

    Its own temp folder keeps it out of /tmp/ray, where a plain `ray.init()` elsewhere on the machine
    would find it and join it instead of starting the local Ray it asked for."""
    root.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix="qray", dir="/tmp"))  # short: Ray's socket paths grow from it
    port = free_port()
    ray = str(Path(sys.executable).parent / "ray")
    out = root / "ray.out"
    pid = _daemon([ray, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                   f"--num-cpus={cpus}", "--include-dashboard=false",
                   f"--dashboard-agent-listen-port={free_port()}", "--disable-usage-stats",
                   f"--temp-dir={temp}", "--block"], out, env={**os.environ, **RAY_ENV})
    info = {"pids": {"ray": pid}, "address": f"127.0.0.1:{port}", "temp_dir": str(temp), "folder": str(root)}
    try:
        _wait_for("ray start --head", lambda: "block forever" in out.read_text(errors="replace"), 120,
                  [out], info["pids"])
    except BaseException:
        stop_ray(info)
        raise
    log.info("Ray head is up at %s (pid %d)", info["address"], pid)
    return info


def _session(sid: int) -> list[int]:
    """The processes of session `sid` (the one `ray start` leads: its GCS, raylet, workers, ...)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[4]) == sid and alive(int(entry.name)):
                    out.append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    return out


def stop_ray(info: dict[str, Any]) -> None:
    """SIGTERM to `ray start` (it stops the processes it started), then anything left of its session."""
    head = info["pids"]["ray"]
    stop_pids({"ray start": head}, grace=45)  # it drains for up to 30 s
    left = {f"ray process {pid}": pid for pid in _session(head)}
    if left:
        stop_pids(left, grace=5)
    shutil.rmtree(info["temp_dir"], ignore_errors=True)


# ----------------------------------------------------------------------------- sharing

STARTERS: dict[str, tuple[Callable[[Path], dict], Callable[[dict], None]]] = {
    "slurm": (start_slurm, stop_slurm),
    "ray": (start_ray, stop_ray),
}


def _up(info: Optional[dict]) -> bool:
    return bool(info) and all(alive(pid) for pid in info["pids"].values())


@contextmanager
def shared(kind: str, registry: Path) -> Iterator[dict[str, Any]]:
    """The `kind` service ("slurm" or "ray") for every process that registers in `registry`: the
    first starts it, each later one joins it, the last to leave stops it (under a file lock)."""
    start, stop = STARTERS[kind]
    registry.mkdir(parents=True, exist_ok=True)
    lock, state = FileLock(str(registry / f"{kind}.lock")), registry / f"{kind}.json"
    with lock:
        info = json.loads(state.read_text()) if state.exists() else None
        if not _up(info):
            if info:
                stop(info)  # a half-dead set left by a crashed user: stop what is left of it
            info = start(registry / kind / time.strftime("%H%M%S"))
            info["users"] = 0
        info["users"] += 1
        state.write_text(json.dumps(info))
    try:
        yield info
    finally:
        with lock:
            info = json.loads(state.read_text())
            info["users"] -= 1
            if info["users"] <= 0:
                stop(info)
                state.unlink()
            else:
                state.write_text(json.dumps(info))


def main(argv: Optional[list[str]] = None) -> None:
    """python -m tests.cluster.services start|stop slurm|ray|all FOLDER"""
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.services", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("kind", choices=["slurm", "ray", "all"])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    kinds = ["slurm", "ray"] if args.kind == "all" else [args.kind]
    for kind in kinds:
        state = args.folder / f"{kind}.json"
        if args.action == "start":
            reason = slurm_missing() if kind == "slurm" else ray_missing()
            if reason:
                sys.exit(f"Cannot start {kind}: {reason}.")
            if state.exists() and _up(json.loads(state.read_text())):
                sys.exit(f"{kind} is already running from {state}; stop it first.")
            info = STARTERS[kind][0](args.folder / kind)
            state.write_text(json.dumps(info))
            if kind == "slurm":
                log.info("export SLURM_CONF=%s   # then: sinfo; python run.py -m hydra/launcher=slurm "
                         "hydra.launcher.partition=%s ...", info["env"]["SLURM_CONF"], info["partition"])
            else:
                log.info("actorq.backend=ray actorq.ray_address=%s", info["address"])
        elif state.exists():
            STARTERS[kind][1](json.loads(state.read_text()))
            state.unlink()
            log.info("Stopped %s", kind)


if __name__ == "__main__":
    main()
