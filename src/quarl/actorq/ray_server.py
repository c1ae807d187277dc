"""The Ray transport's parameter server, in a module of its own: the Ray worker process that hosts
it imports this module alone (numpy and Ray), not torch and the envs, which the actors need."""

from __future__ import annotations

from typing import Any, Optional


class ParameterServer:
    """Holds the latest published version and its object reference (wrapped, so Ray does not fetch it)."""

    def __init__(self) -> None:
        self.version: int = -1
        self.ref: Any = None
        self.stop = False

    def publish(self, version: int, wrapped: list) -> None:
        self.version, self.ref = version, wrapped[0]

    def pull(self, have: int) -> Optional[tuple[int, list]]:
        return None if self.version <= have else (self.version, [self.ref])

    def request_stop(self) -> None:
        self.stop = True

    def stopped(self) -> bool:
        return self.stop
