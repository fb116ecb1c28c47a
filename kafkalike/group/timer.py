"""Keyed timers fired by ``run_due(now_ms)``, never by a clock of their own.

Like Kafka's CoordinatorTimer: scheduling a key again replaces its previous deadline, and
cancelling a key that is not scheduled is a no-op. Due timers fire in deadline order (ties in
scheduling order); an action may schedule further timers, including already due ones, which
then fire in the same ``run_due`` call.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable

Action = Callable[[int], None]


class Timer:
    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[int, int, Action]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int, action: Action) -> None:
        seq = next(self._seq)
        self._entries[key] = (deadline_ms, seq, action)
        heapq.heappush(self._heap, (deadline_ms, seq, key))

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def cancel_where(self, doomed: Callable[[Hashable], bool]) -> None:
        """Cancel every timer whose key ``doomed`` accepts."""
        for key in [k for k in self._entries if doomed(k)]:
            del self._entries[key]

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def __len__(self) -> int:
        return len(self._entries)

    def _drop_stale(self) -> None:
        while self._heap:
            _, seq, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(self._heap)

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def run_due(self, now_ms: int) -> int:
        """Fire every timer due at ``now_ms``; returns how many fired."""
        fired = 0
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return fired
            _, _, key = heapq.heappop(self._heap)
            _, _, action = self._entries.pop(key)
            action(now_ms)
            fired += 1
