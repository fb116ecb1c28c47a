"""Unloading and reloading one ``__consumer_offsets`` partition (after a write to it failed):
its groups are forgotten and replayed from its log, their parked requests answered
NOT_COORDINATOR; the groups of other partitions are not touched."""

from __future__ import annotations

from grouptest_harness import Harness

from kafkalike.group import JoinResult, Pending, read_records
from kafkalike.group.membership import heartbeat_key
from kafkalike.protocol.errors import ErrorCode as E

# Two groups on different partitions of the harness's four.
CUT, KEPT = "a", "b"


def reload(h: Harness, partition: int) -> None:
    h.coordinator.unload_partition(partition)
    h.coordinator.load_partition((record for _, record in read_records(h.logs[partition])), h.now)
    h.results.update(h.coordinator.take_completions())  # the parked requests it answered


def test_the_unloaded_partition_is_replayed_and_its_parked_join_refused_others_untouched() -> None:
    h = Harness()
    cut_partition = h.coordinator.partition_for(CUT)
    assert cut_partition != h.coordinator.partition_for(KEPT)
    assert h.commit({("t", 0): 5}, group=CUT) == {("t", 0): E.NONE}
    assert h.commit({("t", 0): 7}, group=KEPT) == {("t", 0): E.NONE}
    _, parked_cut = h.join_new(CUT)  # waits for the initial rebalance delay
    _, parked_kept = h.join_new(KEPT)
    h.coordinator.offsets.put(CUT, "t", 1, h.coordinator.offsets.get(CUT, "t", 0))  # as if not yet durable

    reload(h, cut_partition)
    assert h.result(parked_cut).error is E.NOT_COORDINATOR
    assert h.committed(CUT, "t", 0, 1) == [5, -1]  # what the log holds, nothing more
    assert h.coordinator.groups[CUT].state.value == "Empty"
    assert isinstance(parked_kept, Pending) and h.parked(parked_kept)
    h.settle(parked_kept)
    joined = h.result(parked_kept)
    assert isinstance(joined, JoinResult) and joined.error is E.NONE
    assert h.committed(KEPT, "t", 0) == [7]


def test_a_reloaded_partition_keeps_no_timer_of_its_forgotten_members() -> None:
    h = Harness()
    member, parked = h.join_new(CUT)
    h.settle(parked)
    joined = h.result(parked)
    assert h.result(h.sync(member, joined.generation_id, CUT, assignments=[(member, b"x")])).error is E.NONE
    partition = h.coordinator.partition_for(CUT)
    h.coordinator.unload_partition(partition)
    assert h.coordinator.timer.deadline(heartbeat_key(CUT, member)) is None  # no session left to expire
    assert CUT not in h.coordinator.groups and not h.coordinator.offsets.has_offsets(CUT)
    h.coordinator.load_partition((record for _, record in read_records(h.logs[partition])), h.now)
    # The group came back from its GroupMetadata record with its member, whose session starts again.
    group = h.coordinator.groups[CUT]
    assert list(group.members) == [member] and group.generation_id == joined.generation_id
    assert h.coordinator.timer.deadline(heartbeat_key(CUT, member)) is not None
    assert h.heartbeat(member, joined.generation_id, CUT) is E.NONE
