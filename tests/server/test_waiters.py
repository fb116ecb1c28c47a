"""Waiting for partitions (server/waiters.py), on trio's MockClock: woken by the partition's
moves, never missing one, and ending at the deadline."""

from __future__ import annotations

import uuid
from pathlib import Path

import trio
from trio.testing import MockClock

from kafkalike.log import LogConfig, LogManager
from kafkalike.log.storage import IMMEDIATE
from kafkalike.protocol.records import Record, build_batch
from kafkalike.replica import LeaderAndIsr, Partition
from kafkalike.server.waiters import PartitionWaiters

TP = ("t", 0)


def partition(tmp_path: Path, waiters: PartitionWaiters) -> Partition:
    plog = LogManager([tmp_path], storage="memory").get_or_create("t", 0, LogConfig(), 0, topic_id=uuid.UUID(int=1))
    return Partition("t", 0, uuid.UUID(int=1), plog, local_broker_id=1, on_progress=waiters.notify)


def append(p: Partition, value: bytes) -> None:
    batch = bytearray(build_batch([Record(value=value)]))
    p.complete_append(p.append_as_leader(batch, now_ms=0, log_append_time=False, syncs=IMMEDIATE), None, 0)


async def test_a_wait_ends_at_its_deadline_when_nothing_moves(autojump_clock: MockClock, tmp_path: Path) -> None:
    waiters = PartitionWaiters()
    p = partition(tmp_path, waiters)
    start = trio.current_time()
    assert not await waiters.wait_high_watermark(p, 1, deadline_s=start + 30)
    assert trio.current_time() - start == 30
    assert waiters.waiting() == 1  # its event stays until the next notify; nothing leaks per wait
    p.notify_progress()
    assert waiters.waiting() == 0


async def test_an_append_wakes_a_high_watermark_wait(autojump_clock: MockClock, tmp_path: Path) -> None:
    waiters = PartitionWaiters()
    p = partition(tmp_path, waiters)
    results: list[bool] = []
    start = trio.current_time()
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            results.append(await waiters.wait_high_watermark(p, 2, deadline_s=start + 60))

        nursery.start_soon(wait)
        await waiters.until_watched(TP)
        append(p, b"a")  # high watermark 1: not yet
        await trio.testing.wait_all_tasks_blocked()
        assert not results
        append(p, b"b")
    assert results == [True] and trio.current_time() == start  # no time passed: woken, not timed out


async def test_losing_leadership_ends_a_high_watermark_wait(autojump_clock: MockClock, tmp_path: Path) -> None:
    waiters = PartitionWaiters()
    p = partition(tmp_path, waiters)
    results: list[bool] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            results.append(await waiters.wait_high_watermark(p, 5, deadline_s=trio.current_time() + 60))

        nursery.start_soon(wait)
        await waiters.until_watched(TP)
        p.make_follower(LeaderAndIsr(2, 1, 1, (1, 2), (1, 2)), now_ms=0)
    assert results == [False]


async def test_next_progress_taken_before_looking_misses_no_move(tmp_path: Path) -> None:
    waiters = PartitionWaiters()
    p = partition(tmp_path, waiters)
    moved = waiters.next_progress(TP)
    append(p, b"x")  # happens while the caller looks (e.g. awaits a client's answer)
    with trio.fail_after(1):
        await moved.wait()  # already set
    assert not waiters.next_progress(TP).is_set()  # a new one for the next move


async def test_a_wait_on_several_partitions_wakes_for_any(autojump_clock: MockClock, tmp_path: Path) -> None:
    waiters = PartitionWaiters()
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiters.wait_for_progress, [("a", 0), ("b", 0)], start + 60)
        await waiters.until_watched(("b", 0))
        waiters.notify(("b", 0))
    assert trio.current_time() == start
