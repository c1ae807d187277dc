"""Experience: the n-step adder (on each actor), the replay buffer and the samples-per-insert limit (on the learner).

An actor's adder turns its steps into n-step transitions
`(obs_t, action_t, R = sum_k gamma^k r_{t+k}, discount = gamma^m, obs_{t+m})` with m <= n (shorter at
the end of an episode; discount 0 when the episode terminated, gamma^m when it was truncated, so
the learner bootstraps from `obs_{t+m}`). Transitions travel to the learner in chunks (`Chunk`).

The learner's replay is a uniform FIFO ring buffer. The samples-per-insert limit holds both sides
to `samples_per_insert` sampled items per inserted item (counted after the first `min_replay`), as
Reverb's rate limiter does, within a slack of `slack` items: the learner waits for experience when
it has sampled too much, and stops taking chunks in when the actors are too far ahead, so actors
block on the full queue instead of racing through the budget on a stale policy.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FIELDS = ("obs", "action", "reward", "discount", "next_obs")


@dataclass
class Chunk:
    """A batch of n-step transitions from one actor, with what it finished since its last chunk.

    `episodes`: (return, length) of every episode that ended; `stats`: the actor's cumulative time
    breakdown (see `actor.Timings`); `steps`: env steps taken since the last chunk.
    """

    actor: int
    data: dict[str, np.ndarray]
    steps: int
    episodes: list[tuple[float, int]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


class NStepAdder:
    """Builds n-step transitions from one actor's steps."""

    def __init__(self, n_step: int, gamma: float) -> None:
        self.n, self.gamma = n_step, gamma
        self.window: deque[tuple[np.ndarray, Any, float]] = deque()
        self.out: dict[str, list[Any]] = {k: [] for k in FIELDS}

    def __len__(self) -> int:
        return len(self.out["obs"])

    def _emit(self, next_obs: np.ndarray, terminated: bool) -> None:
        obs, action, _ = self.window[0]
        ret = sum(self.gamma**k * r for k, (_, _, r) in enumerate(self.window))
        discount = 0.0 if terminated else self.gamma ** len(self.window)
        for key, value in zip(FIELDS, (obs, action, ret, discount, next_obs)):
            self.out[key].append(value)
        self.window.popleft()

    def add(
        self, obs: np.ndarray, action: Any, reward: float, next_obs: np.ndarray, terminated: bool, truncated: bool
    ) -> None:
        """One env step; at the end of an episode every pending transition is written."""
        self.window.append((obs, action, float(reward)))
        if terminated or truncated:
            while self.window:
                self._emit(next_obs, terminated)
        elif len(self.window) == self.n:
            self._emit(next_obs, False)

    def take(self) -> dict[str, np.ndarray]:
        """The transitions written since the last call, as arrays."""
        data = {
            k: np.asarray(v, dtype=np.float32 if k != "action" or np.ndim(v[0]) else np.int64)
            for k, v in self.out.items()
        }
        self.out = {k: [] for k in FIELDS}
        return data


class Replay:
    """A uniform FIFO replay buffer of n-step transitions, allocated on the first insert."""

    def __init__(self, capacity: int, seed: int) -> None:
        self.capacity = capacity
        self.arrays: dict[str, np.ndarray] = {}
        self.size = self.pos = self.inserted = 0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def insert(self, data: dict[str, np.ndarray]) -> None:
        n = len(data["obs"])
        if not self.arrays:
            self.arrays = {k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in data.items()}
        idx = (self.pos + np.arange(n)) % self.capacity
        for k, v in data.items():
            self.arrays[k][idx] = v
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)
        self.inserted += n

    def sample(self, batch: int) -> dict[str, np.ndarray]:
        idx = self.rng.integers(0, self.size, size=batch)
        return {k: v[idx] for k, v in self.arrays.items()}


class RateLimiter:
    """`samples_per_insert` sampled items per inserted item, counted after `min_replay` inserts,
    within `slack` inserted items either way."""

    def __init__(self, samples_per_insert: float, min_replay: int, batch: int, slack: int) -> None:
        self.spi, self.min_replay, self.batch, self.slack = samples_per_insert, min_replay, batch, slack
        self.sampled = 0

    def can_insert(self, inserted: int) -> bool:
        """Whether more experience may come in now (the learner has sampled enough of what is in)."""
        return inserted < self.min_replay or (inserted - self.min_replay - self.slack) * self.spi <= self.sampled

    def can_sample(self, inserted: int) -> bool:
        """Whether one more batch may be sampled now."""
        if inserted < self.min_replay:
            return False
        return self.sampled + self.batch <= self.spi * (inserted - self.min_replay + self.slack)

    def sample(self) -> None:
        self.sampled += self.batch
