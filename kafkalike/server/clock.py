"""The broker's one clock: the only place in the server that reads the time.

Two readings, as Kafka keeps them apart:

- ``wall_ms()``: milliseconds since the epoch, for what Kafka takes from the wall clock:
  LogAppendTime, retention and ``segment.ms``, group session and transaction timeouts (the
  coordinators' state machines are driven with it), producer-id expiry.
- ``monotonic_s()``: trio's clock, in seconds, for deadlines on the event loop (long-poll
  fetch, idle connections, timers). ``trio.sleep`` and cancel scopes follow the same clock.

The broker is built with one (``SystemClock`` unless told otherwise) and hands it to everything
it runs. Lower layers (log, group, txn, controller, raft) never read a clock: they are given
``now_ms``. Tests give the broker ``kafkalike.testing.TrioClock`` and run on trio's
``MockClock``, so that time-driven behaviour happens without real waiting.
"""

from __future__ import annotations

import time
from typing import Protocol

import trio


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Now, in milliseconds since the Unix epoch."""
        ...

    def monotonic_s(self) -> float:
        """Now on trio's clock, in seconds (for deadlines compared with cancel scopes and sleeps)."""
        ...


class SystemClock:
    """The real clock: the system's wall time, and trio's (monotonic) clock."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_s(self) -> float:
        return trio.current_time()
