"""ListOffsets' special timestamps by request version, as Kafka answers them: one that is not
(yet) defined at the version is UNSUPPORTED_VERSION, before the partition is looked up."""

from __future__ import annotations

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker
from tests.server.test_broker_basics import _create, _produce_body

MAX_TIMESTAMP, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -3, -5, -6


async def _list(client: AsyncWireClient, topic: str, version: int, timestamp: int) -> tuple[int, int]:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}
        ],
        "timeout_ms": 1000,
    }
    part = (await client.request(2, version, body)).topics[0].partitions[0]
    return part.error_code, part.offset


async def test_special_timestamps_are_answered_from_their_version_on(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "specials")
    await client.request(0, 9, _produce_body("specials", 0, build_batch([Record(value=b"x")], base_timestamp=1000)))
    assert await _list(client, "specials", 6, MAX_TIMESTAMP) == (ErrorCode.UNSUPPORTED_VERSION, -1)
    assert await _list(client, "specials", 7, MAX_TIMESTAMP) == (0, 0)
    assert await _list(client, "specials", 8, LATEST_TIERED) == (ErrorCode.UNSUPPORTED_VERSION, -1)
    assert await _list(client, "specials", 9, LATEST_TIERED) == (0, -1)
    assert await _list(client, "specials", 10, EARLIEST_PENDING_UPLOAD) == (ErrorCode.UNSUPPORTED_VERSION, -1)
    # No remote storage: nothing is pending upload.
    assert await _list(client, "specials", 11, EARLIEST_PENDING_UPLOAD) == (0, -1)
    assert await _list(client, "specials", 11, -7) == (ErrorCode.UNSUPPORTED_VERSION, -1)
    # The version check comes first: an unknown partition asked for an undefined value says so.
    assert await _list(client, "no-such-topic", 10, EARLIEST_PENDING_UPLOAD) == (ErrorCode.UNSUPPORTED_VERSION, -1)
    assert await _list(client, "no-such-topic", 11, EARLIEST_PENDING_UPLOAD) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        -1,
    )
