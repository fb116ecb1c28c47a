"""A broker clock whose wall time follows trio's clock, for tests on trio's ``MockClock``.

    async def test_session_expires(autojump_clock):  # pytest-trio's MockClock(autojump_threshold=0)
        async with InProcessBroker(clock=TrioClock()) as kafka:
            ...  # trio.sleep(60) returns at once, and the broker's wall clock moved 60 s

Under a real trio clock it still works (wall time then starts at the epoch and advances in
real time), but it only makes sense on a mock clock.
"""

from __future__ import annotations

import trio

# 2024-01-01T00:00:00Z: a wall time clients accept as recent (not 1970), fixed so runs repeat.
DEFAULT_EPOCH_MS = 1_704_067_200_000


class TrioClock:
    """``wall_ms() = epoch_ms + trio.current_time()``; ``monotonic_s()`` is trio's clock.
    Both read the current trio run's clock, so they are called only on the broker's loop."""

    def __init__(self, epoch_ms: int = DEFAULT_EPOCH_MS) -> None:
        self.epoch_ms = epoch_ms

    def wall_ms(self) -> int:
        return self.epoch_ms + int(trio.current_time() * 1000)

    def monotonic_s(self) -> float:
        return trio.current_time()
