"""Requests a node has in flight, one per destination, and the backoff after a failed one
(Kafka's RequestManager): a response is accepted only for the request it answers, from the state
that sent it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class InFlight:
    correlation_id: int
    api_key: int
    deadline_ms: int
    context: Any  # the epoch state that sent it: a response to an older state is stale
    pre_vote: bool = False


class RequestManager:
    def __init__(self, request_timeout_ms: int, retry_backoff_ms: int) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._inflight: dict[int, InFlight] = {}
        self._backoff_until_ms: dict[int, int] = {}
        self._next_correlation_id = 0

    def can_send(self, destination: int, now_ms: int) -> bool:
        if destination in self._inflight:
            return False
        until = self._backoff_until_ms.get(destination)
        return until is None or until <= now_ms

    def has_inflight(self) -> bool:
        return bool(self._inflight)

    def start(self, destination: int, api_key: int, context: Any, now_ms: int, *, pre_vote: bool = False) -> int:
        """Record a request to ``destination``; returns its correlation id."""
        self._next_correlation_id += 1
        deadline = now_ms + self.request_timeout_ms
        self._inflight[destination] = InFlight(self._next_correlation_id, api_key, deadline, context, pre_vote)
        return self._next_correlation_id

    def complete(self, source: int, correlation_id: int) -> InFlight | None:
        """The request a response from ``source`` answers, or None for a duplicate or stale one."""
        inflight = self._inflight.get(source)
        if inflight is None or inflight.correlation_id != correlation_id:
            return None
        del self._inflight[source]
        return inflight

    def fail(self, destination: int, now_ms: int) -> None:
        self._backoff_until_ms[destination] = now_ms + self.retry_backoff_ms

    def expire(self, now_ms: int) -> None:
        """Time out requests past their deadline and end finished backoffs. A timed-out request
        leaves its destination ready at once, as Kafka's RequestManager (only an error response
        backs off): a leader whose BeginQuorumEpoch was lost sends it again at its next round."""
        for destination, inflight in list(self._inflight.items()):
            if inflight.deadline_ms <= now_ms:
                del self._inflight[destination]
        for destination, until in list(self._backoff_until_ms.items()):
            if until <= now_ms:
                del self._backoff_until_ms[destination]

    def reset(self) -> None:
        """Forget every request (Kafka's resetConnections, on each state transition)."""
        self._inflight.clear()
        self._backoff_until_ms.clear()

    def deadlines(self, now_ms: int) -> list[int]:
        return [f.deadline_ms for f in self._inflight.values()] + [
            t for t in self._backoff_until_ms.values() if t > now_ms
        ]
