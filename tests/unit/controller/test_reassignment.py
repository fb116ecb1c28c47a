"""A partition's replicas while it is reassigned (Kafka's PartitionReassignmentReplicas) and the
partition changes that start and complete a reassignment (PartitionChangeBuilder's rules; the
differential test compat_tests/differential/test_partition_change.py compares them with
Kafka's own builder)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from kafkalike.controller.image import NO_LEADER_CHANGE, PartitionRegistration
from kafkalike.controller.partition_change import PartitionChange
from kafkalike.controller.placement import DIRECTORY_UNASSIGNED
from kafkalike.controller.reassignment import ReassignmentReplicas

TOPIC = uuid.UUID(int=0x71)
MV = 25  # 4.0-IV3: directories recorded
DIR_A, DIR_B = uuid.UUID(int=0xA), uuid.UUID(int=0xB)


def test_a_reassignment_keeps_the_target_order_then_the_removed_replicas() -> None:
    moving = ReassignmentReplicas.between([1, 2, 3], [4, 3, 2])
    assert moving == ReassignmentReplicas(removing=(1,), adding=(4,), replicas=(4, 3, 2, 1))
    assert moving.in_progress
    assert moving.original_replicas == [3, 2, 1] and moving.target_replicas == [4, 3, 2]
    assert not ReassignmentReplicas.between([1, 2, 3], [3, 1, 2]).in_progress  # a reorder only


def test_it_completes_once_the_added_replicas_are_in_sync() -> None:
    moving = ReassignmentReplicas.between([1, 2, 3], [2, 3, 4])
    assert moving.completed([1, 2, 3]) is None  # 4 not caught up yet
    assert moving.completed([1, 2, 3, 4]) == ([2, 3, 4], [2, 3, 4])
    # A kept replica out of sync does not hold it back (Kafka 4.4, KAFKA-19975)...
    assert moving.completed([1, 2, 4]) == ([2, 3, 4], [2, 4])
    # ...unless the replicas shrink: then every one that remains must be in sync.
    shrinking = ReassignmentReplicas.between([1, 2, 3], [2, 3])
    assert shrinking.completed([1, 2]) is None
    assert shrinking.completed([1, 2, 3]) == ([2, 3], [2, 3])
    # Nothing left in sync: not completed.
    assert ReassignmentReplicas.between([1], [2]).completed([1]) is None


def registration(
    replicas: Sequence[int], isr: Sequence[int], leader: int, **moving: Sequence[int]
) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=tuple(replicas),
        isr=tuple(isr),
        leader=leader,
        leader_epoch=3,
        partition_epoch=5,
        directories=tuple(DIR_A if r == 1 else DIRECTORY_UNASSIGNED for r in replicas),
        adding_replicas=tuple(moving.get("adding", ())),
        removing_replicas=tuple(moving.get("removing", ())),
    )


def build(
    partition: PartitionRegistration, target_isr: Sequence[int] | None = None, **targets: Sequence[int]
) -> object:
    return PartitionChange(
        partition,
        TOPIC,
        0,
        lambda broker: True,
        metadata_version=MV,
        min_isr=1,
        target_isr=target_isr,
        target_replicas=targets.get("replicas"),
        target_adding=targets.get("adding"),
        target_removing=targets.get("removing"),
        default_directory=lambda broker: DIR_B,
    ).build()


def test_starting_a_reassignment_writes_both_sets_and_the_new_replicas_directories() -> None:
    moving = ReassignmentReplicas.between([1, 2, 3], [2, 3, 4])
    record = build(
        registration([1, 2, 3], [1, 2, 3], 1),
        replicas=moving.replicas,
        adding=moving.adding,
        removing=moving.removing,
    )
    assert record is not None
    assert (record.replicas, record.adding_replicas, record.removing_replicas) == ([2, 3, 4, 1], [4], [1])  # type: ignore[attr-defined]
    assert record.directories == [DIRECTORY_UNASSIGNED, DIRECTORY_UNASSIGNED, DIR_B, DIR_A]  # type: ignore[attr-defined]
    assert record.leader == NO_LEADER_CHANGE and record.isr is None  # type: ignore[attr-defined]


def test_completing_moves_leadership_off_a_removed_leader_and_bumps_its_epoch() -> None:
    running = registration([2, 3, 4, 1], [1, 2, 3], 1, adding=[4], removing=[1])
    assert build(running, target_isr=[1, 2, 3]) is None  # nothing changes until 4 is in sync
    record = build(running, target_isr=[1, 2, 3, 4])
    assert record is not None
    assert record.leader == 2 and record.isr == [2, 3, 4]  # type: ignore[attr-defined]
    assert (record.replicas, record.adding_replicas, record.removing_replicas) == ([2, 3, 4], [], [])  # type: ignore[attr-defined]


def test_a_change_that_removes_a_replica_bumps_the_leader_epoch() -> None:
    # The leader stays, but a replica goes: the leader field is written (an epoch bump), so the
    # removed follower cannot keep fetching in the epoch it knew.
    running = registration([2, 3, 4, 1], [1, 2, 3, 4], 2, adding=[4], removing=[1])
    record = build(running, target_isr=[1, 2, 3, 4])
    assert record is not None
    assert record.leader == 2 and record.replicas == [2, 3, 4]  # type: ignore[attr-defined]
