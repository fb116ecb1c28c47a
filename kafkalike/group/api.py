"""What goes into the group coordinator and what comes out: plain frozen dataclasses.

Handlers translate wire messages into these and back; the coordinator never sees a wire
message nor an API version, only the few version-dependent choices spelled out as fields
(``require_known_member_id`` for JoinGroup v4+, ``supports_skip_assignment`` for v9...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkalike.protocol.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


@dataclass(frozen=True)
class Pending:
    """A request the coordinator parked; its result comes out of ``take_completions`` later."""

    token: int


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True
    supports_skip_assignment: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class LeaveResult:
    error: ErrorCode
    members: tuple[tuple[LeavingMember, ErrorCode], ...] = ()


@dataclass(frozen=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(frozen=True)
class CommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    partitions: tuple[CommitPartition, ...]
    # OffsetCommit v2-4: -1 means the broker's offsets.retention.minutes.
    retention_time_ms: int = -1
    # OffsetCommit v9+ reports an unknown group as GROUP_ID_NOT_FOUND, older versions as
    # ILLEGAL_GENERATION.
    group_id_not_found_error: bool = False
    # OffsetCommit v9+ (KIP-848): generation_id is the member epoch of a consumer group member,
    # and members of consumer groups must commit with it.
    supports_member_epoch: bool = False


@dataclass(frozen=True)
class FetchedOffset:
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class FetchResult:
    error: ErrorCode
    topics: tuple[tuple[str, tuple[FetchedOffset, ...]], ...] = ()


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    group_id: str
    found: bool
    state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = field(default=())
    error: ErrorCode = ErrorCode.NONE  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS: not described here


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str
