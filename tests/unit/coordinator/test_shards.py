"""The shard table: which partitions have a shard here, in which state, at which leader epoch,
and which shards are polled when."""

from __future__ import annotations

import pytest

from kafkalike.coordinator import NotActive, ShardState, ShardTable
from kafkalike.protocol.errors import ErrorCode as E


class TimedShard:
    """A shard whose timers are a list of deadlines; records the times it was polled at."""

    def __init__(self, *deadlines_ms: int) -> None:
        self.deadlines_ms = sorted(deadlines_ms)
        self.polled_at: list[int] = []

    def poll(self, now_ms: int) -> int | None:
        self.polled_at.append(now_ms)
        self.deadlines_ms = [d for d in self.deadlines_ms if d > now_ms]
        return self.deadlines_ms[0] if self.deadlines_ms else None


def error_of(table: ShardTable[TimedShard], partition: int) -> E:
    with pytest.raises(NotActive) as raised:
        table.active(partition)
    return raised.value.error


def test_a_partition_without_a_shard_is_not_coordinated_here() -> None:
    assert error_of(ShardTable(), 3) is E.NOT_COORDINATOR


def test_a_loading_shard_answers_load_in_progress_until_it_is_activated() -> None:
    table: ShardTable[TimedShard] = ShardTable()
    shard = TimedShard()
    slot = table.begin_load(0, 4, shard)
    assert slot is not None and slot.state is ShardState.LOADING
    assert error_of(table, 0) is E.COORDINATOR_LOAD_IN_PROGRESS
    assert table.loading() == [0]
    assert table.activate(slot)
    assert table.active(0) is shard and table.loading() == []


def test_a_load_is_ignored_unless_its_epoch_is_newer_and_a_newer_one_replaces_a_loading_shard() -> None:
    table: ShardTable[TimedShard] = ShardTable()
    old = table.begin_load(0, 4, TimedShard())
    assert old is not None
    assert table.begin_load(0, 4, TimedShard()) is None
    assert table.begin_load(0, 3, TimedShard()) is None
    newer_shard = TimedShard()
    newer = table.begin_load(0, 5, newer_shard)
    assert newer is not None
    assert not table.activate(old)  # replaced while it loaded: it never serves
    assert table.activate(newer) and table.active(0) is newer_shard


def test_an_unload_with_an_epoch_removes_only_an_older_shard() -> None:
    table: ShardTable[TimedShard] = ShardTable()
    slot = table.begin_load(0, 4, TimedShard())
    assert slot is not None and table.activate(slot)
    assert table.unload(0, 4) is None and table.unload(0, 3) is None
    assert table.unload(0, 5) is slot
    assert error_of(table, 0) is E.NOT_COORDINATOR
    again = table.begin_load(0, 5, TimedShard())
    assert again is not None and table.unload(0) is again  # no epoch: whatever its epoch
    assert table.unload(0) is None


def test_a_shard_unloaded_while_loading_never_serves() -> None:
    table: ShardTable[TimedShard] = ShardTable()
    slot = table.begin_load(1, 0, TimedShard())
    assert slot is not None and table.unload(1) is slot
    assert not table.activate(slot)
    assert error_of(table, 1) is E.NOT_COORDINATOR


def test_poll_runs_the_shards_that_are_due_or_were_used_and_returns_the_earliest_deadline() -> None:
    table: ShardTable[TimedShard] = ShardTable()
    early, late = TimedShard(100, 300), TimedShard(200)
    for partition, shard in enumerate((early, late)):
        slot = table.begin_load(partition, 0, shard)
        assert slot is not None and table.activate(slot)
    polled, deadline = table.poll(0)  # both just loaded
    assert [s.partition for s in polled] == [0, 1] and deadline == 100
    polled, deadline = table.poll(50)  # neither due nor used
    assert polled == [] and deadline == 100
    polled, deadline = table.poll(100)
    assert [s.shard for s in polled] == [early] and deadline == 200
    table.active(1)  # a call on the late shard: polled next time, though not due
    polled, deadline = table.poll(150)
    assert [s.shard for s in polled] == [late] and deadline == 200
    assert early.polled_at == [0, 100] and late.polled_at == [0, 150]


def test_an_unloaded_shards_timers_stop_and_the_other_shards_go_on() -> None:
    table: ShardTable[TimedShard] = ShardTable()
    gone, kept = TimedShard(100), TimedShard(200)
    for partition, shard in enumerate((gone, kept)):
        slot = table.begin_load(partition, 0, shard)
        assert slot is not None and table.activate(slot)
    table.poll(0)
    assert table.unload(0) is not None
    polled, deadline = table.poll(250)
    assert [s.shard for s in polled] == [kept] and deadline is None
    assert gone.polled_at == [0]


def test_a_loading_shard_is_not_polled() -> None:
    table: ShardTable[TimedShard] = ShardTable()
    shard = TimedShard(10)
    slot = table.begin_load(0, 0, shard)
    assert slot is not None
    assert table.poll(20) == ([], None)
    assert table.activate(slot)
    polled, _ = table.poll(20)
    assert [s.shard for s in polled] == [shard] and shard.polled_at == [20]
