"""Per-topic log configuration, with Kafka's names and defaults.

Field names are Kafka's topic config keys with dots turned into underscores, so ``from_properties``
and ``to_properties`` can translate CreateTopics/AlterConfigs/DescribeConfigs payloads one to one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# cleanup.policy is a list of these, in any order, repeats allowed; empty: neither, the log is
# kept whole (Kafka accepts all of these).
CLEANUP_POLICIES = ("compact", "delete")
# The smallest topic segment.bytes (and broker log.segment.bytes) Kafka 4.1+ accepts (KIP-1030).
# LogConfig itself takes anything from 14 up: tests build tiny segments directly, and a topic
# gets them through internal.segment.bytes, which has no such floor.
MIN_SEGMENT_BYTES = 1 << 20
# Kafka's internal topic config for tiny segments in tests; when set it wins over segment.bytes.
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"


@dataclass(frozen=True)
class LogConfig:
    """Settings one partition log obeys; immutable so a reconfiguration swaps the whole object."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    flush_interval_messages: int = LONG_MAX  # Long.MAX_VALUE: leave flushing to the OS
    flush_interval_ms: int | None = None  # None: no time-based flush
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    file_delete_delay_ms: int = 60_000
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    # Kafka 4.x defaults; read by produce validation (protocol/validation.py).
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    compression_type: str = "producer"
    cleanup_policy: str = "delete"
    # A broker setting in Kafka (producer.id.expiration.ms); per log here because the log owns the state.
    producer_id_expiration_ms: int = 86_400_000
    # Log compaction (cleanup.policy=compact), read by ``cleaner.py``.
    delete_retention_ms: int = 86_400_000  # how long tombstones and empty-txn markers outlive their first clean
    min_cleanable_dirty_ratio: float = 0.5  # dirty bytes / cleanable bytes before a log is worth cleaning
    min_compaction_lag_ms: int = 0  # a segment is cleaned only once its newest record is this old
    max_compaction_lag_ms: int = LONG_MAX  # a dirty segment this old is cleaned whatever the ratio

    def __post_init__(self) -> None:
        if self.segment_bytes < 14 or self.segment_bytes > INT_MAX:
            # Positions in the offset index are int32, so a segment can never pass 2 GiB.
            raise ValueError(f"segment.bytes {self.segment_bytes} must be in [14, {INT_MAX}]")
        if self.segment_ms < 1:
            raise ValueError("segment.ms must be positive")
        if self.index_interval_bytes < 0:
            raise ValueError("index.interval.bytes must be >= 0")
        if self.segment_index_bytes < 4:
            # Kafka's lower bound; an index smaller than one entry still holds one (index.py).
            raise ValueError("segment.index.bytes must be at least 4")
        if self.flush_interval_messages < 1:
            raise ValueError("flush.messages must be >= 1")
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(f"message.timestamp.type must be one of {TIMESTAMP_TYPES}")
        if not all(policy in CLEANUP_POLICIES for policy in self.cleanup_policy.split(",") if policy):
            raise ValueError(f"cleanup.policy must list only {' and '.join(CLEANUP_POLICIES)}")
        if self.delete_retention_ms < 0 or self.min_compaction_lag_ms < 0:
            raise ValueError("delete.retention.ms and min.compaction.lag.ms must be >= 0")
        if self.max_compaction_lag_ms < 1:
            raise ValueError("max.compaction.lag.ms must be >= 1")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError("min.cleanable.dirty.ratio must be in [0, 1]")

    @property
    def deletes(self) -> bool:
        """True when retention may delete segments (cleanup.policy contains ``delete``)."""
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        """True when the log cleaner compacts this log (cleanup.policy contains ``compact``)."""
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """Kafka's maxSegmentMs: segment.ms, capped by max.compaction.lag.ms on compacted logs so
        that records in the active segment still become cleanable within the lag."""
        if self.compacts:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def with_overrides(self, **changes: Any) -> LogConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_properties(cls, props: dict[str, str | None], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka-style keys (``segment.bytes`` ...); unknown keys are ignored, not fatal.

        Unknown keys are skipped because topic configs carry many settings (compression.type,
        min.insync.replicas, ...) that belong to other layers. ``internal.segment.bytes``, when
        set, is the segment size whatever ``segment.bytes`` says (Kafka's segmentSize()).
        """
        base = base or cls()
        changes: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            key = _property_name(field.name)
            if key not in props:
                continue
            raw = props[key]
            if field.name == "flush_interval_ms":
                changes[field.name] = None if raw is None or int(raw) == LONG_MAX else int(raw)
            elif field.name in ("message_timestamp_type", "cleanup_policy", "compression_type"):
                changes[field.name] = "" if raw is None else raw.replace(" ", "")
            elif field.name == "min_cleanable_dirty_ratio" and raw is not None:
                changes[field.name] = float(raw)
            elif raw is not None:
                changes[field.name] = int(raw)
        internal_segment_bytes = props.get(INTERNAL_SEGMENT_BYTES)
        if internal_segment_bytes is not None:
            changes["segment_bytes"] = int(internal_segment_bytes)
        return dataclasses.replace(base, **changes)

    def to_properties(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "flush_interval_ms" and value is None:
                value = LONG_MAX
            out[_property_name(field.name)] = str(value)
        return out


_KAFKA_NAMES = {
    "flush_interval_messages": "flush.messages",
    "flush_interval_ms": "flush.ms",
    "max_message_bytes": "max.message.bytes",
}


def _property_name(field_name: str) -> str:
    return _KAFKA_NAMES.get(field_name, field_name.replace("_", "."))
