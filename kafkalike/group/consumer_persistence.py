"""Consumer group records on their way to ``__consumer_offsets`` and back.

``ConsumerGroupRecords.commit`` is the only way a consumer group changes while the broker
runs: the records are made durable through the coordinator's store, then applied with
``apply``; ``replay`` applies them the same way when they are read back at start-up. The
ordering rules are Kafka's: a member goes with its current assignment, then its target, then
its subscription; a group goes after all its members, its targets and its target epoch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkalike.group.consumer_group import ConsumerGroup, ConsumerGroupError
from kafkalike.group.consumer_records import (
    ConsumerRecord,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscriptionRecord,
    PartitionMetadataRecord,
    TargetEpochRecord,
    TargetMemberRecord,
    decode_record,
    encode_record,
)
from kafkalike.group.records import RecordError, group_tombstone
from kafkalike.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalike.group.coordinator import GroupCoordinator

log = logging.getLogger("kafkalike.group.consumer")


class ConsumerGroupRecords:
    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.c = coordinator

    def commit(
        self,
        group_id: str,
        records: Sequence[ConsumerRecord],
        now_ms: int,
        *,
        new_group: ConsumerGroup | None = None,
        drop_classic: bool = False,
        extra: Sequence[tuple[bytes, bytes | None]] = (),
    ) -> ErrorCode | None:
        """Make records durable, then apply them; the error to answer with when the write fails.

        ``drop_classic`` first deletes the empty classic group of that id (its tombstone goes in
        the same batch); ``new_group`` is the group the records create; ``extra`` are other
        records (offset tombstones) written ahead of them.
        """
        encoded = [group_tombstone(group_id)] if drop_classic else []
        encoded += list(extra) + [encode_record(r) for r in records]
        if not encoded:
            return None
        error = self.c.write(group_id, encoded, now_ms)
        if error is not None:
            return error
        if drop_classic:
            self.c.groups.pop(group_id, None)
        if new_group is not None and group_id not in self.c.consumer_groups:
            self.c.consumer_groups[group_id] = new_group
        for record in records:
            self.apply(record)
        return None

    def apply(self, record: ConsumerRecord) -> None:
        """Apply one record to its group, creating the group or dropping it as the record says."""
        gid = record.group_id
        group = self.c.consumer_groups.get(gid)
        tombstone = is_tombstone(record)
        if group is None:
            if tombstone:
                return
            classic = self.c.groups.get(gid)
            if classic is not None:
                if not classic.is_empty:
                    raise ConsumerGroupError(f"group {gid}: consumer group record for a classic group in use")
                # An empty classic group (or one that only held offsets) gives way, as in Kafka.
                del self.c.groups[gid]
            group = self.c.consumer_groups[gid] = ConsumerGroup(gid)
        group.apply(record)
        if isinstance(record, GroupEpochRecord) and record.epoch is None:
            del self.c.consumer_groups[gid]

    def replay(self, key: bytes, value: bytes | None, now_ms: int) -> None:
        """Apply one record read back from the offsets topic at start-up; others are skipped."""
        try:
            record = decode_record(key, value)
        except RecordError as exc:
            log.warning("skipping an unreadable consumer group record: %s", exc)
            return
        if record is None:
            return
        try:
            self.apply(record)
        except ConsumerGroupError as exc:
            log.error("skipping a consumer group record that contradicts the state: %s", exc)
            return
        gid = record.group_id
        if gid not in self.c.consumer_groups and gid not in self.c.groups and self.c.offsets.has_offsets(gid):
            # Deleted while its offsets stay (a classic group took its place): they keep a group,
            # as replaying them would have given them.
            self.c.new_group(gid, now_ms)


def removal_records(group_id: str, member_id: str) -> list[ConsumerRecord]:
    """A member's tombstones, in the order replay needs: assignment, target, then subscription."""
    return [
        CurrentAssignmentRecord(group_id, member_id, None),
        TargetMemberRecord(group_id, member_id, None),
        MemberSubscriptionRecord(group_id, member_id, None),
    ]


def is_tombstone(record: ConsumerRecord) -> bool:
    if isinstance(record, GroupEpochRecord | TargetEpochRecord):
        return record.epoch is None
    if isinstance(record, PartitionMetadataRecord):
        return record.topics is None
    if isinstance(record, MemberSubscriptionRecord):
        return record.subscription is None
    if isinstance(record, TargetMemberRecord):
        return record.assignment is None
    return record.current is None


def deletion_records(group: ConsumerGroup) -> list[ConsumerRecord]:
    """Every tombstone of a group, in the order of Kafka's createGroupTombstoneRecords."""
    gid = group.group_id
    members = list(group.members)
    targets = sorted(set(group.target) | set(members))
    return [
        *(CurrentAssignmentRecord(gid, m, None) for m in members),
        *(TargetMemberRecord(gid, m, None) for m in targets),
        TargetEpochRecord(gid, None),
        *(MemberSubscriptionRecord(gid, m, None) for m in members),
        PartitionMetadataRecord(gid, None),
        GroupEpochRecord(gid, None),
    ]
