"""The broker over real sockets, through this project's raw protocol client."""

from __future__ import annotations

import struct

import pytest
import trio
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch
from tests.server.conftest import RunningBroker, init_producer_id

# Apache Kafka 4.0.1's advertised ranges (4.0.0 plus JoinGroup from v0 again, KAFKA-19444), as
# kafka-python records them to recognise brokers. ConsumerGroupDescribe stops at v0: the
# official definitions this project checks its specs against do not have v1 yet. ListOffsets
# v11 (4.2), AlterPartitionReassignments v1 (KIP-860, after 4.0), ApiVersions v5 (4.4) and
# AddRaftVoter v1 (KIP-1186, 4.1) are served as the newer releases serve them.
AK_40 = {**BROKER_API_VERSIONS[(4, 0)], 11: (0, 9), 69: (0, 0), 2: (1, 11), 18: (0, 5), 45: (0, 1), 80: (0, 1)}


async def test_api_versions_match_kafka_40_for_every_api_served(running: RunningBroker) -> None:
    client = await running.client()
    for version in range(6):
        response = await client.request(18, version, {"client_software_name": "t", "client_software_version": "1"})
        assert response.error_code == 0
        table = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        for key, rng in table.items():
            assert AK_40.get(key) == rng, key


async def test_api_versions_unknown_version_gets_v0_answer_with_error(running: RunningBroker) -> None:
    client = await running.client()
    # Version 99 of ApiVersions: header v2 with an empty tagged section, body unknown.
    frame = struct.pack(">hhih", 18, 99, 7, 1) + b"x" + b"\x00" + b"\x02a\x021\x00"
    await client.stream.send_all(struct.pack(">i", len(frame)) + frame)
    correlation_id, body = await client.receive(18, 0)
    assert correlation_id == 7
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert any(k.api_key == 0 for k in body.api_keys)


async def _create(client, name: str, partitions: int = 1, **configs: str):  # type: ignore[no-untyped-def]
    response = await client.request(
        19,
        7,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
                }
            ],
            "timeout_ms": 5000,
            "validate_only": False,
        },
    )
    return response.topics[0]


def _produce_body(topic: str, partition: int, records: bytes, acks: int = -1) -> dict[str, object]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def _fetch_body(topic: str, partition: int, offset: int, max_wait_ms: int = 0, min_bytes: int = 1) -> dict[str, object]:
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


async def test_create_topic_errors_follow_kafka(running: RunningBroker) -> None:
    client = await running.client()
    assert (await _create(client, "good", 3)).error_code == 0
    assert (await _create(client, "good", 3)).error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert (await _create(client, "bad name!")).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert (await _create(client, "badcfg", 1, no_such_config="1")).error_code == ErrorCode.INVALID_CONFIG
    assert (await _create(client, "zero", 0)).error_code == ErrorCode.INVALID_PARTITIONS
    meta = await client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
    assert {t.name for t in meta.topics} == {"good"}
    assert len(meta.topics[0].partitions) == 3


async def test_produce_then_fetch_returns_the_same_bytes_with_offsets(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "t")
    batch = build_batch([Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(5)])
    first = await client.request(0, 9, _produce_body("t", 0, batch))
    second = await client.request(0, 9, _produce_body("t", 0, batch))
    assert first.responses[0].partition_responses[0].base_offset == 0
    assert second.responses[0].partition_responses[0].base_offset == 5
    fetched = await client.request(1, 12, _fetch_body("t", 0, 0))
    part = fetched.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 10
    assert len(part.records) == 2 * len(batch)
    assert part.records[16 : len(batch)] == batch[16:]  # only base offset and leader epoch are set
    assert struct.unpack_from(">q", part.records, len(batch))[0] == 5


async def test_long_poll_fetch_is_answered_when_data_arrives(running: RunningBroker) -> None:
    reader = await running.client()
    writer = await running.client()
    await _create(reader, "poll")
    result: list[object] = []

    async def fetch() -> None:
        result.append(await reader.request(1, 12, _fetch_body("poll", 0, 0, max_wait_ms=60_000)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fetch)
        # The fetch is parked once the broker has it; produce afterwards wakes it.
        await trio.testing.wait_all_tasks_blocked()
        await writer.request(0, 9, _produce_body("poll", 0, build_batch([Record(value=b"hello")])))
    response = result[0]
    assert response.responses[0].partitions[0].records  # type: ignore[attr-defined]


async def test_bad_batches_get_kafka_error_codes(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "v")
    corrupt = bytearray(build_batch([Record(value=b"x" * 100)]))
    corrupt[-1] ^= 0xFF
    response = await client.request(0, 9, _produce_body("v", 0, bytes(corrupt)))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    big = build_batch([Record(value=b"x" * 2_000_000)])
    response = await client.request(0, 9, _produce_body("v", 0, big))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
    response = await client.request(0, 9, _produce_body("nope", 0, build_batch([Record(value=b"x")])))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    fetched = await client.request(1, 12, _fetch_body("v", 0, 100))
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # Nothing was appended by the rejected requests.
    fetched = await client.request(1, 12, _fetch_body("v", 0, 0))
    assert fetched.responses[0].partitions[0].high_watermark == 0


async def test_a_batch_larger_than_a_segment_is_record_list_too_large(running: RunningBroker) -> None:
    """Kafka's UnifiedLog.append: max.message.bytes first (MESSAGE_TOO_LARGE), then an append no
    segment could hold (RECORD_LIST_TOO_LARGE); both with log_start_offset -1 and no message."""
    client = await running.client()
    await _create(client, "small-segments", internal_segment_bytes="1024")
    await _create(client, "small-both", internal_segment_bytes="1024", max_message_bytes="1500")
    big = build_batch([Record(value=b"x" * 2000)])
    for topic, code in (
        ("small-segments", ErrorCode.RECORD_LIST_TOO_LARGE),
        ("small-both", ErrorCode.MESSAGE_TOO_LARGE),
    ):
        response = await client.request(0, 9, _produce_body(topic, 0, big))
        answer = response.responses[0].partition_responses[0]
        assert (answer.error_code, answer.log_start_offset, answer.error_message) == (code, -1, None)
        assert running.broker.partitions[(topic, 0)].log.log_end_offset == 0
    fits = await client.request(0, 9, _produce_body("small-segments", 0, build_batch([Record(value=b"x" * 500)])))
    assert fits.responses[0].partition_responses[0].error_code == ErrorCode.NONE


async def test_idempotent_duplicates_are_acknowledged_once(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "idem")
    body = {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    pid = (await init_producer_id(client, body)).producer_id
    batch = build_batch([Record(value=b"a"), Record(value=b"b")], producer_id=pid, producer_epoch=0, base_sequence=0)
    one = await client.request(0, 9, _produce_body("idem", 0, batch))
    two = await client.request(0, 9, _produce_body("idem", 0, batch))
    assert one.responses[0].partition_responses[0].base_offset == 0
    assert two.responses[0].partition_responses[0].error_code == 0
    assert two.responses[0].partition_responses[0].base_offset == 0
    gap = build_batch([Record(value=b"c")], producer_id=pid, producer_epoch=0, base_sequence=5)
    three = await client.request(0, 9, _produce_body("idem", 0, gap))
    assert three.responses[0].partition_responses[0].error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    offsets = await client.request(
        2,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {"name": "idem", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
            ],
        },
    )
    assert offsets.topics[0].partitions[0].offset == 2


async def test_pipelined_requests_are_answered_in_order(running: RunningBroker) -> None:
    client = await running.client()
    ids = [await client.send(3, 12, {"topics": None, "allow_auto_topic_creation": False}) for _ in range(5)]
    got = [(await client.receive(3, 12))[0] for _ in ids]
    assert got == ids


async def test_malformed_frame_closes_only_that_connection(running: RunningBroker) -> None:
    bad = await running.client()
    good = await running.client()
    await bad.stream.send_all(struct.pack(">i", -5))
    assert await bad.receive_frame() is None
    # A body that does not decode (array count far beyond the frame) also closes.
    bad2 = await running.client()
    frame = struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 2**31 - 1)
    await bad2.stream.send_all(struct.pack(">i", len(frame)) + frame)
    assert await bad2.receive_frame() is None
    response = await good.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert response.error_code == 0


async def test_versions_below_the_advertised_range_get_unsupported_version(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "old")
    fetch_v3 = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1000,
        "topics": [{"topic": "old", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 100}]}],
    }
    response = await client.request(1, 3, fetch_v3)
    assert response.responses[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION
    produce_v2 = await client.request(0, 2, _produce_body("old", 0, build_batch([Record(value=b"x")])))
    assert produce_v2.responses[0].partition_responses[0].error_code == ErrorCode.UNSUPPORTED_VERSION
    # An API this broker does not serve at all, whose response has a top-level error code.
    acls = await client.request(
        29, 1, {"resource_type_filter": 1, "pattern_type_filter": 3, "operation": 1, "permission_type": 1}
    )
    assert acls.error_code == ErrorCode.UNSUPPORTED_VERSION
    # The connection is still usable afterwards.
    assert (await client.request(18, 3, {})).error_code == 0


def test_a_new_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from kafkalike.server import broker as broker_module

    # 0xF8... encodes to "-" first in URL-safe base64: that one is drawn again, as Kafka's Uuid does.
    drawn = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" + bytes(15))])
    monkeypatch.setattr(broker_module.uuid, "uuid4", lambda: next(drawn))
    assert broker_module._new_cluster_id() == "AQAAAAAAAAAAAAAAAAAAAA"
