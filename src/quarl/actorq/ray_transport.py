"""The Ray transport: the same actor loop as Ray actors, on one machine or across a cluster.

The learner puts each publish into Ray's object store once; a parameter-server actor holds the
latest version's reference, so an actor's pull is one small call plus one object fetch (zero-copy
on the same node). Experience travels in chunks through a Ray queue. Without `actorq.ray_address`
Ray starts locally; with it, the run joins that cluster (`ray start --head` on one node, `ray start
--address=HEAD:6379` on the others; see docs/actorq.md for SLURM). quarl must be importable on
every node (the same environment, e.g. a shared filesystem).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any, Optional

import numpy as np
from omegaconf import OmegaConf

from quarl.actorq.actor import run_actor
from quarl.actorq.ray_server import ParameterServer
from quarl.actorq.replay import Chunk
from quarl.actorq.settings import ActorSpec
from quarl.actorq.transport import JOIN_S, QUEUE_CHUNKS, Transport
from quarl.errors import QuarlError
from quarl.rl.envs import make_env

log = logging.getLogger(__name__)


def ray_module() -> Any:
    """The `ray` module, or one sentence saying how to install it."""
    try:
        import ray
    except ImportError:
        raise QuarlError(
            "actorq.backend=ray needs Ray, which is not installed: pip install 'ray[default]' "
            "(or use actorq.backend=local on one machine)."
        ) from None
    return ray


class RayLink:
    """An actor's side of `RayTransport`."""

    def __init__(self, server: Any, chunks: Any) -> None:
        self.server, self.chunks = server, chunks
        self.ray = ray_module()

    def pull(self, have: int) -> Optional[tuple[int, np.ndarray]]:
        got = self.ray.get(self.server.pull.remote(have))
        if got is None:
            return None
        version, (ref,) = got
        return version, np.array(self.ray.get(ref))  # a private, writable copy

    def send(self, chunk: Chunk) -> None:
        self.chunks.put(chunk)

    def stopped(self) -> bool:
        return self.ray.get(self.server.stopped.remote())


class _RayActor:
    def ready(self, spec: ActorSpec) -> str:
        """Make (and close) the actor's env once, so its suite is imported before the run starts;
        returns the node and process this actor runs in (for the log)."""
        make_env(OmegaConf.create(spec.env)).close()
        return f"{socket.gethostname()}, pid {os.getpid()}"

    def run(self, actor_id: int, spec: ActorSpec, server: Any, chunks: Any) -> dict[str, float]:
        return run_actor(actor_id, spec, RayLink(server, chunks)).as_dict()


class RayTransport(Transport):
    """Actors as Ray actors (one CPU each); weights through the object store; chunks through a Ray queue."""

    def __init__(self, spec: ActorSpec, address: Optional[str], actors: int) -> None:
        ray = self.ray = ray_module()
        from ray.util.queue import Queue

        self.spec = spec
        if not ray.is_initialized():
            env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            if address:
                ray.init(address=address, runtime_env={"env_vars": env}, logging_level=logging.WARNING)
            else:
                # address="local": a new local Ray, never a cluster a stale /tmp/ray file points at
                ray.init(
                    address="local",
                    num_cpus=max(os.cpu_count() or 1, actors),
                    runtime_env={"env_vars": env},
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    log_to_driver=False,
                )
            self.owns_ray = True
        else:
            self.owns_ray = False
        self.server = ray.remote(num_cpus=0)(ParameterServer).remote()
        self.chunks = Queue(QUEUE_CHUNKS * actors, actor_options={"num_cpus": 0})
        self.actor_cls = ray.remote(num_cpus=1, max_restarts=0)(_RayActor)
        self.actors: dict[int, Any] = {}
        self.runs: dict[int, Any] = {}
        self.ref = None
        self.stopping = False

    def start(self, actor_ids: list[int]) -> list[str]:
        handles = [self.actor_cls.remote() for _ in actor_ids]
        # every actor's process starts at once; each is ready before its `run`, which holds it until it stops
        places = self.ray.get([handle.ready.remote(self.spec) for handle in handles])
        for actor_id, handle in zip(actor_ids, handles):
            self.actors[actor_id] = handle
            self.runs[actor_id] = handle.run.remote(actor_id, self.spec, self.server, self.chunks)
        return [f"Ray actor {handle._actor_id.hex()[:8]} on {where}" for handle, where in zip(handles, places)]

    def publish(self, version: int, packed: np.ndarray) -> None:
        self.ref = self.ray.put(packed)
        self.ray.get(self.server.publish.remote(version, [self.ref]))

    def receive(self, timeout: float) -> list[Chunk]:
        from ray.util.queue import Empty

        out = []
        try:
            out.append(self.chunks.get(block=timeout > 0, timeout=timeout if timeout > 0 else None))
            n = self.chunks.qsize()
            if n:
                out += self.chunks.get_nowait_batch(n)
        except Empty:
            pass
        return out

    def dead(self) -> dict[int, str]:
        if self.stopping or not self.runs:
            return {}
        refs = list(self.runs.values())
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        found = {}
        for actor_id, ref in list(self.runs.items()):
            if ref in ready:
                del self.runs[actor_id]
                try:
                    self.ray.get(ref)
                    found[actor_id] = "it returned before the learner asked it to stop"
                except Exception as exc:  # RayActorError, RayTaskError: the actor or its task failed
                    found[actor_id] = (
                        f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                    )
        return found

    def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        try:
            self.ray.get(self.server.request_stop.remote())
            pending, deadline = list(self.runs.values()), time.monotonic() + JOIN_S
            while pending and time.monotonic() < deadline:
                self.receive(0)  # drain, so no actor waits on a full queue
                _, pending = self.ray.wait(pending, num_returns=len(pending), timeout=0.1)
        finally:
            for handle in self.actors.values():
                self.ray.kill(handle)
            if self.owns_ray:
                self.ray.shutdown()
