"""Per-topic log configuration, with Kafka's names and defaults.

Each field names the topic config it holds (``config`` in the field's metadata) and takes that
config's declared default (``kafkalike.configs``), so ``from_properties`` and ``to_properties``
translate CreateTopics/AlterConfigs/DescribeConfigs payloads one to one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from kafkalike.configs import DECLARED, INT_MAX, INTERNAL_SEGMENT_BYTES, LONG_MAX, MIN_SEGMENT_BYTES, ConfigType
from kafkalike.configs.log import CLEANUP_POLICIES, TIMESTAMP_TYPES

# Re-exported: the log modules have always found these here. MIN_SEGMENT_BYTES is the floor
# topics may set; LogConfig itself takes anything from 14 up (tests build tiny segments directly,
# and a topic gets them through internal.segment.bytes, which has no such floor).
__all__ = [
    "CLEANUP_POLICIES",
    "INTERNAL_SEGMENT_BYTES",
    "INT_MAX",
    "LONG_MAX",
    "MIN_SEGMENT_BYTES",
    "TIMESTAMP_TYPES",
    "LogConfig",
]


def _declared(name: str) -> Any:
    """A field holding config ``name``, defaulting to its declared default (a list config, such
    as cleanup.policy, as its comma-separated text)."""
    key = DECLARED[name]
    default = key.default if key.type == ConfigType.LIST else key.default_value()
    return dataclasses.field(default=default, metadata={"config": name})


@dataclass(frozen=True)
class LogConfig:
    """Settings one partition log obeys; immutable so a reconfiguration swaps the whole object."""

    segment_bytes: int = _declared("segment.bytes")
    segment_ms: int = _declared("segment.ms")
    retention_ms: int = _declared("retention.ms")  # -1: keep forever
    retention_bytes: int = _declared("retention.bytes")  # -1: no size limit
    flush_interval_messages: int = _declared("flush.messages")  # Long.MAX_VALUE: leave flushing to the OS
    # None: no time-based flush (what flush.ms's default, Long.MAX_VALUE, means).
    flush_interval_ms: int | None = dataclasses.field(default=None, metadata={"config": "flush.ms"})
    index_interval_bytes: int = _declared("index.interval.bytes")
    segment_index_bytes: int = _declared("segment.index.bytes")
    file_delete_delay_ms: int = _declared("file.delete.delay.ms")
    max_message_bytes: int = _declared("max.message.bytes")
    message_timestamp_type: str = _declared("message.timestamp.type")
    # Read by produce validation (protocol/validation.py).
    message_timestamp_before_max_ms: int = _declared("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _declared("message.timestamp.after.max.ms")
    compression_type: str = _declared("compression.type")
    cleanup_policy: str = _declared("cleanup.policy")
    # Read by the replica layer (acks=all, the high watermark), as Kafka's LogConfig carries it.
    min_insync_replicas: int = _declared("min.insync.replicas")
    # A broker setting in Kafka (producer.id.expiration.ms); per log here because the log owns the state.
    producer_id_expiration_ms: int = _declared("producer.id.expiration.ms")
    # Log compaction (cleanup.policy=compact), read by ``cleaner.py``: how long tombstones and
    # empty-txn markers outlive their first clean; dirty bytes / cleanable bytes before a log is
    # worth cleaning; a segment is cleaned only once its newest record is min lag old, and a dirty
    # segment max lag old is cleaned whatever the ratio.
    delete_retention_ms: int = _declared("delete.retention.ms")
    min_cleanable_dirty_ratio: float = _declared("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _declared("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _declared("max.compaction.lag.ms")

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
            key = field.metadata["config"]
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
            out[field.metadata["config"]] = str(value)
        return out
