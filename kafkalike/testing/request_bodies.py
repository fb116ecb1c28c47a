"""Request bodies for one partition, as tests send them with the wire clients
(:mod:`kafkalike.testing.wire_client`) to a kafkalike node and to Apache Kafka alike.

Each is the body of the versions named in its docstring; fields a version does not have are
ignored by the codec, so one body serves the versions that share its shape.
"""

from __future__ import annotations

import uuid
from typing import Any

MAX_BYTES = 1 << 20
LATEST_TIMESTAMP = -1  # ListOffsets: the log end offset


def produce_body(
    topic: str, partition: int, records: bytes, *, acks: int = -1, timeout_ms: int = 5000
) -> dict[str, Any]:
    """Produce v3 and later: ``records`` (a record batch) to one partition, not transactional."""
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def fetch_by_id_body(
    topic_id: uuid.UUID, partition: int, *, offset: int = 0, max_wait_ms: int = 0, min_bytes: int = 1
) -> dict[str, Any]:
    """Fetch v13 and later (the topic named by its id): one partition from ``offset``, by a
    consumer outside any fetch session."""
    fetched = {
        "partition": partition,
        "current_leader_epoch": -1,
        "fetch_offset": offset,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": MAX_BYTES,
    }
    return {
        "replica_id": -1,  # up to v14; v15 on carry it in replica_state
        "replica_state": {"replica_id": -1, "replica_epoch": -1},
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": MAX_BYTES,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic_id": topic_id, "partitions": [fetched]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def list_offsets_body(topic: str, partition: int, timestamp: int = LATEST_TIMESTAMP) -> dict[str, Any]:
    """ListOffsets v1 and later, by a consumer reading uncommitted: one partition at ``timestamp``."""
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}],
    }
