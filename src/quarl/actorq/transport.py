"""How weights reach the actors and experience reaches the learner: one small interface, two implementations.

`Transport` is the learner's side: start actors, publish packed weights with a version, receive
chunks of experience, find actors that died, restart them, stop everything. The actor's side is
`actor.Link`. `LocalTransport` (the default) needs no server: actors are `torch.multiprocessing`
processes (forked from multiprocessing's forkserver, which imports this module once), the weights
live in one shared-memory buffer guarded by a lock with a version counter (an actor copies them only
when the version moved), and chunks travel through a queue.
`quarl.actorq.ray_transport.RayTransport` runs the same actor loop as Ray actors.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import time
from abc import ABC, abstractmethod
from typing import Any, Optional

import numpy as np
import torch
import torch.multiprocessing as mp

from quarl.actorq.actor import run_actor
from quarl.actorq.replay import Chunk
from quarl.actorq.settings import ActorSpec

log = logging.getLogger(__name__)

QUEUE_CHUNKS = 2  # chunks in flight per actor at most: actors wait when the learner stops taking them in
JOIN_S = 5.0  # seconds an actor gets to stop before it is terminated
LEARNER_CORES = 2  # cores pinned actors leave free where there are enough: the learner's loop and, on a GPU, its driver


def actor_cores(actors: int) -> list[int]:
    """A core for each actor (`actorq.pin_actors`): the cores this process may use, the first
    LEARNER_CORES (or as many as the actors leave) kept for the learner, the rest one per actor
    (taken in turn where there are more actors than cores)."""
    cores = sorted(os.sched_getaffinity(0))
    free = max(0, min(LEARNER_CORES, len(cores) - actors))
    mine = cores[free:]
    return [mine[i % len(mine)] for i in range(actors)]


class Transport(ABC):
    """The learner's side of a transport."""

    @abstractmethod
    def start(self, actor_ids: list[int]) -> list[str]:
        """Start these actors (again, after one died), side by side; returns where each runs (for the log)."""

    @abstractmethod
    def publish(self, version: int, packed: np.ndarray) -> None:
        """Make packed weights of `version` available to the actors."""

    @abstractmethod
    def receive(self, timeout: float) -> list[Chunk]:
        """Every chunk that has arrived, waiting up to `timeout` seconds for the first."""

    @abstractmethod
    def dead(self) -> dict[int, str]:
        """Actors that ended without being asked to, with why; each is reported once."""

    @abstractmethod
    def stop(self) -> None:
        """Ask every actor to stop, wait briefly, then end those still running. Safe to call twice."""


class LocalLink:
    """An actor's side of `LocalTransport`."""

    def __init__(self, weights: torch.Tensor, version: Any, size: Any, lock: Any, chunks: Any, stop: Any) -> None:
        self.weights, self.version, self.size, self.lock = weights, version, size, lock
        self.chunks, self.stop_event = chunks, stop

    def pull(self, have: int) -> Optional[tuple[int, np.ndarray]]:
        if self.version.value <= have:  # a word read without the lock: cheap, and rechecked below
            return None
        with self.lock:
            version, size = self.version.value, self.size.value
            copy = self.weights[:size].numpy().copy()
        return version, copy

    def send(self, chunk: Chunk) -> None:
        self.chunks.put(chunk)

    def stopped(self) -> bool:
        return self.stop_event.is_set()


def _local_actor(actor_id: int, spec: ActorSpec, link: LocalLink, core: Optional[int]) -> None:
    """A local actor process (on `core` alone, where given): Ctrl-C is the learner's to handle (it
    stops the actors itself)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if core is not None:
        os.sched_setaffinity(0, {core})
    logging.basicConfig(level=logging.WARNING, format="[actor %(process)d] %(levelname)s %(message)s")
    run_actor(actor_id, spec, link)


class LocalTransport(Transport):
    """Actors as local processes; weights in shared memory with a version counter; chunks in a queue.
    With `cores`, actor i runs on cores[i] alone."""

    def __init__(self, spec: ActorSpec, capacity: int, cores: Optional[list[int]] = None) -> None:
        self.spec, self.cores = spec, cores
        # each actor forks from a server that imported its module (torch, gymnasium, quarl) once: a spawned
        # actor imported them anew, seconds of start-up each on a loaded machine
        self.mp = mp.get_context("forkserver")
        self.mp.set_forkserver_preload([__name__])
        self.weights = torch.zeros(capacity, dtype=torch.uint8).share_memory_()
        self.version, self.size = self.mp.Value("q", -1, lock=False), self.mp.Value("q", 0, lock=False)
        self.lock = self.mp.Lock()
        self.chunks = self.mp.Queue(QUEUE_CHUNKS * spec.actors)
        self.stop_event = self.mp.Event()
        self.procs: dict[int, Any] = {}
        self.reported: set[int] = set()

    def start(self, actor_ids: list[int]) -> list[str]:
        return [self._start(actor_id) for actor_id in actor_ids]  # a fork each: no wait

    def _start(self, actor_id: int) -> str:
        link = LocalLink(self.weights, self.version, self.size, self.lock, self.chunks, self.stop_event)
        core = self.cores[actor_id] if self.cores is not None else None
        proc = self.mp.Process(
            target=_local_actor, args=(actor_id, self.spec, link, core), daemon=True, name=f"quarl-actor-{actor_id}"
        )
        proc.start()
        self.procs[actor_id] = proc
        self.reported.discard(actor_id)
        return f"pid {proc.pid}" + (f", core {core}" if core is not None else "")

    def publish(self, version: int, packed: np.ndarray) -> None:
        with self.lock:
            self.weights[: packed.nbytes].copy_(torch.from_numpy(packed))
            self.size.value = packed.nbytes
            self.version.value = version

    def receive(self, timeout: float) -> list[Chunk]:
        out = []
        try:
            out.append(self.chunks.get(timeout=timeout) if timeout > 0 else self.chunks.get_nowait())
            while True:
                out.append(self.chunks.get_nowait())
        except queue.Empty:
            pass
        return out

    def dead(self) -> dict[int, str]:
        found = {}
        for actor_id, proc in self.procs.items():
            if actor_id not in self.reported and not proc.is_alive() and not self.stop_event.is_set():
                self.reported.add(actor_id)
                code = proc.exitcode
                found[actor_id] = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return found

    def stop(self) -> None:
        self.stop_event.set()
        deadline = time.monotonic() + JOIN_S
        while any(p.is_alive() for p in self.procs.values()) and time.monotonic() < deadline:
            self.receive(0.05)  # drain, so no actor waits on a full queue
        for proc in self.procs.values():
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=JOIN_S)
        self.chunks.cancel_join_thread()
