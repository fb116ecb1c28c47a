"""The per-broker partition indexes and their Kafka iteration order (the order, checked against
Kafka's own TimelineHashMap, is in compat_tests/differential/test_timeline_order.py)."""

from __future__ import annotations

import uuid

from kafkalike.controller.broker_partitions import NO_LEADER, BrokersToPartitions, JavaTimelineMap, java_uuid_hash

ONE = uuid.UUID("0742705d-2ee9-4f55-80c9-e1f291f80a9b")
THREE = uuid.UUID("1462667a-6c3a-42a2-b379-0b2046f5d21d")


def test_uuid_hash_is_kafkas() -> None:
    assert java_uuid_hash(ONE) == 949671009 and java_uuid_hash(THREE) == -1915421211
    assert java_uuid_hash(uuid.UUID(int=0)) == 0


def test_a_replaced_value_can_grow_the_table_and_reorder_it() -> None:
    """Both ids share a slot of a 2-slot table, iterated from the chain's end; the third put (a
    replacement) grows the table, as Kafka's BaseHashTable does, and separates them (what Kafka 4.0.2's
    controller did in a real controlled shutdown)."""
    table: JavaTimelineMap[uuid.UUID, int] = JavaTimelineMap()
    table.put(ONE, 1)
    table.put(THREE, 1)
    assert [k for k, _ in table.items()] == [THREE, ONE]
    table.put(THREE, 2)
    assert [k for k, _ in table.items()] == [ONE, THREE]


def test_isr_index_tracks_members_leaders_and_leaderless_partitions() -> None:
    isr = BrokersToPartitions(with_leaders=True)
    isr.update(ONE, 0, None, (1, 2), NO_LEADER, 1)
    isr.update(ONE, 1, None, (2,), NO_LEADER, 2)
    assert isr.partitions(1) == [(ONE, 0)] and isr.partitions(2) == [(ONE, 0), (ONE, 1)]
    assert isr.partitions(2, leaders_only=True) == [(ONE, 1)]
    isr.update(ONE, 1, (2,), (2,), 2, NO_LEADER)  # leader gone, ISR kept
    assert isr.partitions(NO_LEADER, leaders_only=True) == [(ONE, 1)]
    assert isr.partitions(2, leaders_only=True) == []
    isr.update(ONE, 0, (1, 2), (2,), 1, 2)
    assert isr.partitions(1) == [] and isr.partitions(2, leaders_only=True) == [(ONE, 0)]
    isr.remove_topic(ONE, 2)
    assert isr.partitions(2) == []


def test_elr_index_has_no_leaders() -> None:
    elr = BrokersToPartitions(with_leaders=False)
    elr.update(THREE, 4, None, (3,))
    elr.update(THREE, 4, (3,), ())
    assert elr.partitions(3) == [] and elr.partitions(NO_LEADER) == []
