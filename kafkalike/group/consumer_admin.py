"""What the other group APIs do to KIP-848 consumer groups, as Kafka's coordinator does.

- ConsumerGroupDescribe: epochs, assignor and every member's current and target assignment;
  GROUP_ID_NOT_FOUND for unknown groups and for classic groups.
- DeleteGroups and offset expiry: an empty consumer group goes with all its records (Kafka's
  tombstones, in its order) and its offsets; a group with members is NON_EMPTY_GROUP.
- The classic APIs meet a consumer group: a JoinGroup to an empty one deletes it and forms a
  classic group in its place; to one with members it gets INCONSISTENT_GROUP_PROTOCOL (Kafka
  would let a classic member join it - the online protocol migration, not implemented here).
  SyncGroup, Heartbeat and LeaveGroup find no classic member in it: UNKNOWN_MEMBER_ID, or
  FENCED_INSTANCE_ID for a static member's instance id presented with another member id.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kafkalike.group.api import JoinRequest, JoinResult
from kafkalike.group.assignors import Assignment
from kafkalike.group.consumer_api import DescribedConsumerGroup, DescribedConsumerMember, DescribedPartitions
from kafkalike.group.consumer_group import ConsumerGroup, ConsumerMember
from kafkalike.group.consumer_persistence import deletion_records
from kafkalike.group.records import offset_tombstone
from kafkalike.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalike.group.consumer_membership import ConsumerMembership

log = logging.getLogger("kafkalike.group.consumer")
E = ErrorCode


class ConsumerGroupAdmin:
    def __init__(self, membership: ConsumerMembership) -> None:
        self.m = membership
        self.c = membership.c

    # -- ConsumerGroupDescribe ----------------------------------------------------------------

    def describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        names = {t.topic_id: name for name, t in self.m.topics().items()}
        out = []
        for group_id in group_ids:
            group = self.c.consumer_groups.get(group_id)
            if group is None:
                message = f"Group {group_id} not found."
                if group_id in self.c.groups:
                    message = f"Group {group_id} is not a consumer group."
                out.append(DescribedConsumerGroup(group_id, E.GROUP_ID_NOT_FOUND, message))
                continue
            members = tuple(self._member(group, m, names) for m in group.members.values())
            out.append(
                DescribedConsumerGroup(
                    group_id,
                    state=group.state.value,
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor_name=self.m.assignor_name(group.members.values()),
                    members=members,
                )
            )
        return out

    @staticmethod
    def _member(
        group: ConsumerGroup, member: ConsumerMember, names: Mapping[uuid.UUID, str]
    ) -> DescribedConsumerMember:
        return DescribedConsumerMember(
            member_id=member.member_id,
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            member_epoch=member.member_epoch,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
            subscribed_topic_regex=member.subscribed_topic_regex,
            assignment=_described(member.assigned, names),
            target_assignment=_described(group.target.get(member.member_id, {}), names),
        )

    # -- deletion -----------------------------------------------------------------------------

    def delete(self, group: ConsumerGroup, now_ms: int) -> ErrorCode | None:
        """DeleteGroups: the group's records and offsets go; NON_EMPTY_GROUP while it has members."""
        if not group.is_empty:
            return E.NON_EMPTY_GROUP
        return self._delete(group, now_ms)

    def _delete(self, group: ConsumerGroup, now_ms: int) -> ErrorCode | None:
        gid = group.group_id
        owned = [(t, p) for t, p, _ in self.c.offsets.group_offsets(gid)]
        error = self.m.records.commit(
            gid, deletion_records(group), now_ms, extra=[offset_tombstone(gid, t, p) for t, p in owned]
        )
        if error is not None:
            return error
        for topic, partition in owned:
            self.c.offsets.remove(gid, topic, partition)
        log.info("deleted consumer group %s and its %d offset(s)", gid, len(owned))
        return None

    def expire(self, group: ConsumerGroup, now_ms: int) -> None:
        """Offsets of topics nobody subscribes to expire by commit time; then an empty group without any goes."""
        gid = group.group_id
        retention_ms = self.c.config.offsets_retention_ms
        expired: list[tuple[str, int]] = []
        all_expired = True
        for topic, partition, offset in self.c.offsets.group_offsets(gid):
            if not group.is_subscribed_to_topic(topic) and offset.is_expired(
                now_ms, offset.commit_timestamp_ms, retention_ms
            ):
                expired.append((topic, partition))
            else:
                all_expired = False
        if all_expired and group.is_empty:
            self._delete(group, now_ms)
            return
        if expired and self.c.write(gid, [offset_tombstone(gid, t, p) for t, p in expired], now_ms) is None:
            for topic, partition in expired:
                self.c.offsets.remove(gid, topic, partition)

    # -- the classic APIs ---------------------------------------------------------------------

    def classic_join(self, req: JoinRequest, now_ms: int) -> JoinResult | None:
        """A classic JoinGroup to a consumer group: its result, or None to carry on as a classic join."""
        group = self.c.consumer_groups.get(req.group_id)
        if group is None:
            return None
        if group.is_empty:
            error = self.m.records.commit(group.group_id, deletion_records(group), now_ms)
            if error is not None:
                return JoinResult(error, member_id=req.member_id)
            log.info("empty consumer group %s becomes a classic group", group.group_id)
            return None
        return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)

    def classic_member_error(
        self, group_id: str, member_id: str, instance_id: str | None, *, by_admin: bool = False
    ) -> ErrorCode:
        """SyncGroup, Heartbeat or LeaveGroup from a classic member of a consumer group."""
        group = self.c.consumer_groups[group_id]
        if instance_id is not None:
            member = group.static_member(instance_id)
            if member is None:
                return E.UNKNOWN_MEMBER_ID
            if member.member_id != member_id and not (by_admin and not member_id):
                return E.FENCED_INSTANCE_ID
        # Every member here speaks the consumer protocol, none the classic one.
        return E.UNKNOWN_MEMBER_ID


def _described(assignment: Assignment, names: Mapping[uuid.UUID, str]) -> tuple[DescribedPartitions, ...]:
    return tuple(
        DescribedPartitions(topic_id, names[topic_id], tuple(sorted(ps)))
        for topic_id, ps in sorted(assignment.items())
        if topic_id in names
    )
