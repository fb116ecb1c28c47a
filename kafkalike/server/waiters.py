"""Waiting for partitions, on the server side (Kafka's purgatory, keyed by topic-partition).

A request that must wait for a partition to move (a long-poll fetch for new data; an acks=all
produce for the high watermark, with replication) waits here, not on state inside the
partition: the replica layer only says that a partition moved (``notify``, which its
``on_progress`` hook calls after every high watermark change, append, role change or
deletion), and each waiter looks again at what it waits for. Deadlines are on the broker
clock's ``monotonic_s`` (trio's clock, which cancel scopes follow).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import trio

from kafkalike.protocol.errors import ErrorCode
from kafkalike.replica.partition import Partition, TopicPartition


class PartitionWaiters:
    def __init__(self) -> None:
        # One event per partition that someone waits on, replaced when set: a notify wakes
        # every waiter registered before it, and none misses one.
        self._events: dict[TopicPartition, trio.Event] = {}
        # A wait on several partitions (a fetch's) has one event of its own, registered under
        # each of them until it ends: one wake-up, no task per partition.
        self._several: dict[TopicPartition, set[trio.Event]] = {}
        self._watched = trio.Event()  # set (and replaced) when a partition gets its first waiter

    def notify(self, tp: TopicPartition) -> None:
        event = self._events.pop(tp, None)
        if event is not None:
            event.set()
        several = self._several.pop(tp, None)
        if several is not None:
            for event in several:
                event.set()

    def waiting(self) -> int:
        """How many partitions have waiters (for tests and stats)."""
        return len(self._events.keys() | self._several.keys())

    async def until_watched(self, tp: TopicPartition) -> None:
        """Until someone waits on ``tp`` (tests and the test kit: a long poll is in place)."""
        while tp not in self._events and tp not in self._several:
            await self._watched.wait()

    def next_progress(self, tp: TopicPartition) -> trio.Event:
        """An event set at the partition's next move: taken before looking at the partition (with
        awaits in between, e.g. a client's request), then waited on, so no move is missed."""
        return self._event(tp)

    def _event(self, tp: TopicPartition) -> trio.Event:
        event = self._events.get(tp)
        if event is None:
            event = self._events[tp] = trio.Event()
            self._watched.set()
            self._watched = trio.Event()
        return event

    async def wait_until(
        self, tps: Iterable[TopicPartition], ready: Callable[[], bool], deadline_s: float = math.inf
    ) -> bool:
        """Until ``ready()`` (looked at again after each notify of one of ``tps``) or the
        deadline; whether it became ready. ``ready`` is asked before waiting, so nothing that
        happened before the call is missed."""
        tps = list(dict.fromkeys(tps))
        with trio.move_on_at(deadline_s):
            while not ready():
                await self._any_moves(tps)
            return True
        return ready()

    async def wait_for_progress(self, tps: Iterable[TopicPartition], deadline_s: float) -> None:
        """Until one of ``tps`` moves or the deadline passes (a fetch then reads again)."""
        with trio.move_on_at(deadline_s):
            await self._any_moves(list(dict.fromkeys(tps)))

    async def _any_moves(self, tps: list[TopicPartition]) -> None:
        """Until one of ``tps`` (distinct) is notified; registered before the first await, so a
        notify after the caller's last look wakes it."""
        if len(tps) == 1:
            await self._event(tps[0]).wait()
            return
        if not tps:  # nothing to wake it: until the caller's deadline
            await trio.sleep_forever()
        event = trio.Event()
        for tp in tps:
            self._several.setdefault(tp, set()).add(event)
        self._watched.set()
        self._watched = trio.Event()
        try:
            await event.wait()
        finally:
            for tp in tps:
                several = self._several.get(tp)
                if several is not None:
                    several.discard(event)
                    if not several:
                        del self._several[tp]

    async def wait_high_watermark(self, partition: Partition, offset: int, deadline_s: float) -> bool:
        """Until the partition's high watermark reaches ``offset`` (an acks=all answer, later),
        or the deadline; False also when the partition stopped being led here meanwhile."""
        return (
            await self.wait_until(
                [partition.tp], lambda: partition.high_watermark >= offset or not partition.is_leader, deadline_s
            )
            and partition.is_leader
            and partition.high_watermark >= offset
        )

    async def until_replicated(self, targets: Sequence[tuple[Partition, int]], deadline_s: float) -> list[ErrorCode]:
        """acks=all (Kafka's DelayedProduce): until each partition's high watermark reached its
        offset (or its leadership moved), at most until the deadline; each one's outcome as
        ``Partition.replicated_to`` gives it, REQUEST_TIMED_OUT where it was not reached."""
        await self.wait_until(
            [p.tp for p, _ in targets], lambda: all(p.replicated_to(o) is not None for p, o in targets), deadline_s
        )
        return [code if (code := p.replicated_to(o)) is not None else ErrorCode.REQUEST_TIMED_OUT for p, o in targets]

    async def wait_idle(self, partition: Partition) -> None:
        """Until no append's file work is in flight on the partition (see ``Partition.write_in_flight``)."""
        await self.wait_until([partition.tp], lambda: not partition.write_in_flight)
