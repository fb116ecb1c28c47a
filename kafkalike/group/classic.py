"""A classic group and its members: bookkeeping only, no timers and no responses.

``ClassicGroup`` keeps what Kafka's ClassicGroup keeps: members in join order (the first one
becomes leader), the static members' instance ids, members that were handed an id but have
not joined yet (``pending_members``), members the coordinator still expects a SyncGroup from
(``pending_sync``), and a count of how many members support each protocol, from which the
group's protocol is chosen by vote. A member parked in JoinGroup or SyncGroup holds the token
of that request; the coordinator completes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkalike.group.api import JoinMember
from kafkalike.group.offsets import OffsetAndMetadata
from kafkalike.group.state import VALID_PREVIOUS_STATES, GroupState, IllegalTransition
from kafkalike.protocol.codec import schema
from kafkalike.protocol.errors import DecodeError, ErrorCode, UnsupportedVersionError
from kafkalike.protocol.wire import FrameReader

CONSUMER_PROTOCOL_TYPE = "consumer"
CLASSIC_GROUP_TYPE = "classic"

Protocols = tuple[tuple[str, bytes], ...]


@dataclass(eq=False)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    # A member that joined and has not had its first JoinGroup answered yet: its session does
    # not run (it cannot heartbeat), only the new-member join timeout.
    is_new: bool = False
    join_token: int | None = None
    sync_token: int | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_token is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def has_satisfied_heartbeat(self) -> bool:
        """Whether an expiring session timer should spare this member."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates`` (its list is in preference order)."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState
    state_timestamp_ms: int | None
    previous_state: GroupState | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    pending_sync: set[str] = field(default_factory=set)
    supported_protocols: Counter[str] = field(default_factory=Counter)
    # Set when a member joins during the initial rebalance, which then waits a bit longer.
    new_member_added: bool = False
    subscribed_topics: frozenset[str] | None = None

    group_type = CLASSIC_GROUP_TYPE

    # -- state ------------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    # -- members ----------------------------------------------------------------------------

    def add(self, member: ClassicMember) -> None:
        if member.group_instance_id is not None:
            assert member.group_instance_id not in self.static_members, member.group_instance_id
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(_names(member.protocols))
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(_names(member.protocols))
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update_member(
        self, member: ClassicMember, protocols: Protocols, rebalance_timeout_ms: int, session_timeout_ms: int
    ) -> None:
        self.supported_protocols.subtract(_names(member.protocols))
        member.protocols = protocols
        self.supported_protocols.update(_names(protocols))
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> ClassicMember:
        """Give a static member a new member id, keeping everything else (Kafka's replaceStaticMember)."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync:
            # Kafka keeps the old id there, and the sync timer then forces a rebalance; moving
            # it lets the new incarnation's SyncGroup count, as static membership intends.
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        self.static_members[instance_id] = new_member_id
        return member

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID when the member is not the one the group knows."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else promote a member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        joined = next((m.member_id for m in self.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined
        return True

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols --------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.is_empty:
            return bool(protocol_type) and bool(names)
        size = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols[n] == size for n in names)

    def select_protocol(self) -> str:
        """The protocol every member supports that gets the most votes (ties: first counted)."""
        size = len(self.members)
        candidates = {name for name, count in self.supported_protocols.items() if count == size}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def current_members(self) -> tuple[JoinMember, ...]:
        """What the leader's JoinGroup response lists: every member's metadata for the chosen protocol."""
        assert self.protocol_name is not None
        return tuple(
            JoinMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        )

    # -- offsets ----------------------------------------------------------------------------

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The union of the members' subscriptions, for the "consumer" protocol type only."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            subscribed = subscription_topics(member.metadata(self.protocol_name))
            if subscribed is None:
                return None
            topics.update(subscribed)
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode | None:
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and self.is_empty:
            # An admin client or a consumer that manages its own partitions ("simple" group).
            return None
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self.validate_member(member_id, instance_id)
            if error is not None:
                return error
            if generation_id != self.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not self.is_empty:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def offset_expiry_base(self) -> Callable[[OffsetAndMetadata], int] | None:
        """From when an offset's retention counts, or None while offsets must not expire."""
        if self.protocol_type is None:
            return lambda offset: offset.commit_timestamp_ms
        if self.is_empty:
            since = self.state_timestamp_ms
            return lambda offset: since if since is not None else offset.commit_timestamp_ms
        if self.uses_consumer_protocol and self.subscribed_topics is not None and self.state is GroupState.STABLE:
            return lambda offset: offset.commit_timestamp_ms
        return None


def _names(protocols: Protocols) -> set[str]:
    """The protocol names a member supports, each once: a JoinGroup may list one twice, and a
    name counted twice for one member would look supported by more members than there are."""
    return {name for name, _ in protocols}


def subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription, read with v0, the prefix of every version."""
    if len(metadata) < 2:
        return None
    try:
        message = schema("ConsumerProtocolSubscription", "message", 0).decode_from(FrameReader(metadata[2:]))
    except (DecodeError, UnsupportedVersionError):
        return None
    return list(message.topics)
