"""The group coordinator's settings, with the broker config names they come from."""

from __future__ import annotations

from dataclasses import dataclass

from kafkalike.configs import INT_MAX, declared_int

__all__ = ["INT_MAX", "GroupConfig"]


@dataclass(frozen=True)
class GroupConfig:
    # group.min.session.timeout.ms / group.max.session.timeout.ms: JoinGroup's session timeout
    # must lie in between (INVALID_SESSION_TIMEOUT otherwise).
    min_session_timeout_ms: int = declared_int("group.min.session.timeout.ms")
    max_session_timeout_ms: int = declared_int("group.max.session.timeout.ms")
    # group.initial.rebalance.delay.ms: how long the first rebalance of an empty group waits
    # for more members, extended while they keep coming, up to the rebalance timeout.
    initial_rebalance_delay_ms: int = declared_int("group.initial.rebalance.delay.ms")
    max_size: int = declared_int("group.max.size")
    # How long a new member's first JoinGroup may stay parked (Kafka: 5 minutes, fixed).
    new_member_join_timeout_ms: int = 300_000
    # offsets.retention.minutes, in ms, and offsets.retention.check.interval.ms.
    offsets_retention_ms: int = declared_int("offsets.retention.minutes") * 60_000
    offsets_retention_check_interval_ms: int = declared_int("offsets.retention.check.interval.ms")
    # offset.metadata.max.bytes: longer commit metadata gets OFFSET_METADATA_TOO_LARGE.
    offset_metadata_max_bytes: int = declared_int("offset.metadata.max.bytes")
    # offsets.topic.num.partitions (or the partition count of an existing offsets topic).
    offsets_topic_partitions: int = declared_int("offsets.topic.num.partitions")

    def __post_init__(self) -> None:
        if self.offsets_topic_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be at least 1")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms exceeds group.max.session.timeout.ms")
        if self.offsets_retention_check_interval_ms < 1:
            raise ValueError("offsets.retention.check.interval.ms must be positive")
