"""A KIP-848 consumer group and its members: bookkeeping only, no timers and no responses.

The group changes only by applying the records of consumer_records.py (``apply``), whether
they were just made durable or are read back at start-up, as Kafka's ConsumerGroup changes
only by replay. Members are frozen values, replaced whole.

The group's state is not stored: it follows from the epochs, as in Kafka's
``maybeUpdateGroupState``, and so is whatever the last record left it at:

- Empty: no member.
- Assigning: the group epoch is ahead of the target assignment epoch (a member joined, left
  or changed its subscription, or a subscribed topic changed) and no heartbeat has computed
  the new target assignment yet.
- Reconciling: the target assignment is current but some member has not reached it (it
  still has partitions to revoke, waits for partitions others must release, or is a static
  member that left for a while with epoch -2).
- Stable: every member is at the target assignment epoch, in its stable member state.
- Dead: the group was deleted; it is then dropped, so Dead is only ever seen transiently.

A member's own states (``MemberState``) and their transitions live in reconciliation.py.

The group also records the epoch at which each partition is currently owned
(``partition_epochs``): a partition is free for a new owner only once its previous owner
has given it up, which is what makes revocation come before reassignment.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkalike.group.assignors import Assignment
from kafkalike.group.consumer_records import (
    ConsumerRecord,
    CurrentAssignment,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscription,
    MemberSubscriptionRecord,
    PartitionMetadataRecord,
    TargetEpochRecord,
    TargetMemberRecord,
    TopicMetadata,
)
from kafkalike.protocol.errors import ErrorCode

CONSUMER_GROUP_TYPE = "consumer"
CONSUMER_PROTOCOL_TYPE = "consumer"
# The epochs a member sends to leave; -2 is a static member that means to come back.
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
NO_PARTITION_OWNER = -1


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def lower(self) -> str:
        return self.value.lower()


class ConsumerGroupError(Exception):
    """Records that contradict the group's state: a coordinator bug or a corrupt log."""


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def subscription(self) -> MemberSubscription:
        return MemberSubscription(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
        )

    def current(self) -> CurrentAssignment:
        return CurrentAssignment(
            self.member_epoch, self.previous_member_epoch, int(self.state), self.assigned, self.pending_revocation
        )

    def with_subscription(self, s: MemberSubscription) -> ConsumerMember:
        return dataclasses.replace(
            self,
            instance_id=s.instance_id,
            rack_id=s.rack_id,
            client_id=s.client_id,
            client_host=s.client_host,
            subscribed_topic_names=s.subscribed_topic_names,
            subscribed_topic_regex=s.subscribed_topic_regex,
            rebalance_timeout_ms=s.rebalance_timeout_ms,
            server_assignor=s.server_assignor,
        )

    def with_current(self, c: CurrentAssignment) -> ConsumerMember:
        return dataclasses.replace(
            self,
            member_epoch=c.member_epoch,
            previous_member_epoch=c.previous_member_epoch,
            state=MemberState.of(c.state),
            assigned=c.assigned,
            pending_revocation=c.pending_revocation,
        )


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    # Topic names each subscribed regular expression matched when last resolved (not persisted).
    resolved_regex: dict[str, frozenset[str]] = field(default_factory=dict)

    group_type = CONSUMER_GROUP_TYPE
    protocol_type = CONSUMER_PROTOCOL_TYPE

    # -- state --------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if all(m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    @property
    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return None if member_id is None else self.members.get(member_id)

    def target_of(self, member_id: str, instance_id: str | None = None) -> Assignment:
        """A member's target assignment; a static member inherits its previous incarnation's."""
        if instance_id is not None:
            previous = self.static_members.get(instance_id)
            if previous is not None:
                return self.target.get(previous, {})
            return {}
        return self.target.get(member_id, {})

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member owning a partition, or -1 when nobody owns it."""
        return self.partition_epochs.get((topic_id, partition), NO_PARTITION_OWNER)

    # -- subscriptions ------------------------------------------------------------------------

    def member_topics(self, member: ConsumerMember) -> frozenset[str]:
        """The topic names a member subscribes to: by name, and through its regex as last resolved."""
        regex = member.subscribed_topic_regex
        if regex is None:
            return member.subscribed_topic_names
        return member.subscribed_topic_names | self.resolved_regex.get(regex, frozenset())

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(topic in self.member_topics(m) for m in self.members.values())

    # -- offsets ------------------------------------------------------------------------------

    def validate_offset_commit(
        self, member_id: str, member_epoch: int, supports_member_epoch: bool
    ) -> ErrorCode | None:
        """The error Kafka's ConsumerGroup.validateOffsetCommit raises, or None."""
        if member_epoch < 0 and not self.members:
            return None  # an admin client, or a consumer managing its own partitions
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not supports_member_epoch:
            return ErrorCode.UNSUPPORTED_VERSION  # members of the consumer protocol commit with v9+
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    # -- records ------------------------------------------------------------------------------

    def apply(self, record: ConsumerRecord) -> None:
        """Apply one record of this group (the group epoch tombstone is the caller's to apply)."""
        if isinstance(record, GroupEpochRecord):
            if record.epoch is None:
                self._check_deletable()
            else:
                self.group_epoch = record.epoch
        elif isinstance(record, TargetEpochRecord):
            if record.epoch is None and self.target:
                raise ConsumerGroupError(f"group {self.group_id}: target epoch deleted while members have targets")
            self.assignment_epoch = -1 if record.epoch is None else record.epoch
        elif isinstance(record, PartitionMetadataRecord):
            topics = record.topics or ()
            self.subscription_metadata = {t.name: t for t in topics}
        elif isinstance(record, TargetMemberRecord):
            if record.assignment is None:
                self.target.pop(record.member_id, None)
            else:
                self.target[record.member_id] = record.assignment
        elif isinstance(record, MemberSubscriptionRecord):
            self._apply_subscription(record)
        elif isinstance(record, CurrentAssignmentRecord):
            self._apply_current(record)

    def _check_deletable(self) -> None:
        if self.members or self.target or self.assignment_epoch != -1:
            raise ConsumerGroupError(f"group {self.group_id}: deleted while it still has members or targets")

    def _apply_subscription(self, record: MemberSubscriptionRecord) -> None:
        old = self.members.get(record.member_id)
        if record.subscription is None:
            if old is None:
                return
            if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH or record.member_id in self.target:
                raise ConsumerGroupError(
                    f"group {self.group_id}: member {record.member_id} removed before its assignments"
                )
            self._replace_member(old, None)
            return
        base = old if old is not None else ConsumerMember(record.member_id)
        self._replace_member(old, base.with_subscription(record.subscription))

    def _apply_current(self, record: CurrentAssignmentRecord) -> None:
        old = self.members.get(record.member_id)
        if record.current is None:
            if old is not None:
                # The member stays until its subscription tombstone, owning nothing.
                self._replace_member(
                    old,
                    dataclasses.replace(
                        old, member_epoch=-1, previous_member_epoch=-1, assigned={}, pending_revocation={}
                    ),
                )
            return
        base = old if old is not None else ConsumerMember(record.member_id)
        self._replace_member(old, base.with_current(record.current))

    def _replace_member(self, old: ConsumerMember | None, new: ConsumerMember | None) -> None:
        if old is not None:
            self._release(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
            del self.members[old.member_id]
        if new is not None:
            self.members[new.member_id] = new
            self._claim(new)
            if new.instance_id is not None:
                self.static_members[new.instance_id] = new.member_id

    def _release(self, member: ConsumerMember) -> None:
        for tp in _partitions(member.assigned, member.pending_revocation):
            epoch = self.partition_epochs.pop(tp, None)
            if epoch != member.member_epoch:
                raise ConsumerGroupError(
                    f"group {self.group_id}: {tp} owned at epoch {epoch}, not {member.member_epoch} "
                    f"of member {member.member_id}"
                )

    def _claim(self, member: ConsumerMember) -> None:
        for tp in _partitions(member.assigned, member.pending_revocation):
            if tp in self.partition_epochs:
                raise ConsumerGroupError(
                    f"group {self.group_id}: {tp} claimed by member {member.member_id} "
                    f"but still owned at epoch {self.partition_epochs[tp]}"
                )
            self.partition_epochs[tp] = member.member_epoch


def _partitions(*assignments: Mapping[uuid.UUID, Iterable[int]]) -> list[tuple[uuid.UUID, int]]:
    return [(t, p) for a in assignments for t, ps in a.items() for p in ps]
