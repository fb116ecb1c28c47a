"""Fault hooks for tests: delay, fail or drop requests by API key, and pause partition leaders.

Users point their own code at the broker and make it misbehave on purpose, to test retries and
rebalances. Nothing here is active unless a test adds a fault.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalike.protocol.api import RequestHeader
from kafkalike.protocol.codec import Message

# Called with the request; returns a response to send instead of handling it, or None to go on.
Interceptor = Callable[[RequestHeader, Message], Mapping[str, Any] | None]


@dataclass
class Fault:
    api_key: int
    delay_s: float = 0.0
    error_code: int | None = None
    drop: bool = False
    interceptor: Interceptor | None = None
    times: int | None = None  # None: every matching request
    client_id: str | None = None  # None: requests from any client

    def matches(self, api_key: int, client_id: str | None) -> bool:
        return self.api_key == api_key and (self.client_id is None or self.client_id == client_id)

    def use(self) -> bool:
        """Count one use; False once exhausted."""
        if self.times is None:
            return True
        if self.times <= 0:
            return False
        self.times -= 1
        return True


class FaultInjector:
    def __init__(self) -> None:
        self.faults: list[Fault] = []
        self.paused_partitions: set[tuple[str, int]] = set()

    def add(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        self.faults = [f for f in self.faults if f is not fault]

    def clear(self) -> None:
        self.faults.clear()
        self.paused_partitions.clear()

    def take(self, api_key: int, client_id: str | None = None) -> Fault | None:
        """The first live fault for this API key (and this client), counted as used."""
        for fault in self.faults:
            if fault.matches(api_key, client_id) and fault.use():
                return fault
        self.faults = [f for f in self.faults if f.times is None or f.times > 0]
        return None

    def is_paused(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self.paused_partitions
