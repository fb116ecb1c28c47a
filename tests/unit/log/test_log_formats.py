"""Kafka's small text formats and the topic config mapping."""

from __future__ import annotations

import uuid

import pytest

from kafkalike.log import LogConfig
from kafkalike.log.checkpoint import (
    CheckpointError,
    format_offset_checkpoint,
    format_partition_metadata,
    parse_epoch_checkpoint,
    parse_offset_checkpoint,
    parse_partition_metadata,
    topic_id_to_string,
)
from kafkalike.log.config import LONG_MAX


def test_offset_checkpoint_round_trip() -> None:
    offsets = {("orders", 0): 42, ("my.topic-x", 11): 0}
    data = format_offset_checkpoint(offsets)
    assert data == b"0\n2\nmy.topic-x 11 0\norders 0 42\n"
    assert parse_offset_checkpoint(data) == offsets


@pytest.mark.parametrize("bad", [b"", b"1\n0\n", b"0\n2\n1 2\n", b"0\nx\n", b"0\n1\n1 2 3\n", b"\xff"])
def test_malformed_checkpoints_are_rejected(bad: bytes) -> None:
    with pytest.raises(CheckpointError):
        parse_epoch_checkpoint(bad)


def test_partition_metadata_uses_kafka_uuid_text() -> None:
    topic_id = uuid.UUID("4b3f1b7c-0000-4000-8000-000000000001")
    text = format_partition_metadata(topic_id).decode()
    assert text == f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}\n"
    assert len(topic_id_to_string(topic_id)) == 22 and "=" not in text
    assert parse_partition_metadata(text.encode()) == topic_id
    assert parse_partition_metadata(f"version: 0\ntopic_id: {topic_id}\n".encode()) == topic_id


def test_config_defaults_match_kafka() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1 << 30 and config.segment_ms == 604_800_000
    assert config.retention_ms == 604_800_000 and config.retention_bytes == -1
    assert config.flush_interval_messages == LONG_MAX and config.flush_interval_ms is None
    assert config.index_interval_bytes == 4096 and config.segment_index_bytes == 10 * 1024 * 1024
    assert config.max_message_bytes == 1_048_588 and config.file_delete_delay_ms == 60_000


def test_config_from_and_to_kafka_properties() -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": "1048576",
            "retention.ms": "-1",
            "flush.messages": "1",
            "flush.ms": str(LONG_MAX),
            "cleanup.policy": "compact, delete",
            "compression.type": "zstd",
        }
    )
    assert config.segment_bytes == 1 << 20 and config.retention_ms == -1 and config.flush_interval_messages == 1
    assert config.flush_interval_ms is None and config.deletes and config.cleanup_policy == "compact,delete"
    props = config.to_properties()
    assert props["max.message.bytes"] == "1048588" and props["flush.ms"] == str(LONG_MAX)
    assert LogConfig.from_properties(props) == config
    with pytest.raises(ValueError):
        LogConfig(segment_bytes=1 << 31)
    with pytest.raises(ValueError):
        LogConfig(message_timestamp_type="Whenever")


def test_internal_segment_bytes_wins_over_segment_bytes() -> None:
    """Kafka's segmentSize(): internal.segment.bytes when set, else segment.bytes; unset (None)
    leaves segment.bytes in charge."""
    both = LogConfig.from_properties({"segment.bytes": "1048576", "internal.segment.bytes": "1024"})
    assert both.segment_bytes == 1024
    assert (
        LogConfig.from_properties({"segment.bytes": "1048576", "internal.segment.bytes": None}).segment_bytes == 1 << 20
    )
    with pytest.raises(ValueError):
        LogConfig.from_properties({"internal.segment.bytes": "13"})
