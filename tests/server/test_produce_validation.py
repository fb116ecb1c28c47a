"""Hostile produce payloads against a running broker, as raw frames: each gets Apache Kafka's answer
(kafkalike.testing.hostile_batches; the codes are compared with Kafka's in compat_tests), nothing of
it is stored, the valid batch of another partition in the same request is appended all the same,
and real clients then produce and consume every valid record around the bad batches."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaProducer

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import iter_batches, read_batch_header
from kafkalike.testing.broker import InProcessBroker
from kafkalike.testing.hostile_batches import ACCEPTED, CASES, HostileCase, valid_batch
from kafkalike.testing.wire_client import WireClient

PER_PARTITION = [c for c in CASES if not c.whole_request]
WHOLE_REQUEST = [c for c in CASES if c.whole_request]


def produce(broker: InProcessBroker, topic: str, records: dict[int, bytes], version: int = 9) -> list[Any]:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": r} for p, r in records.items()]}],
    }
    with broker.client() as client:
        answer = client.request(0, version, body)
    return sorted(answer.responses[0].partition_responses, key=lambda p: p.index)


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.mark.parametrize("case", PER_PARTITION, ids=[c.name for c in PER_PARTITION])
def test_a_hostile_batch_is_refused_and_the_other_partition_appended(
    kafka_broker: InProcessBroker, kafka_topic_name: str, case: HostileCase
) -> None:
    kafka_broker.create_topic(kafka_topic_name, 2, case.configs)
    bad, good = produce(
        kafka_broker, kafka_topic_name, {0: case.make(now_ms()), 1: valid_batch(now_ms())}, case.api_version
    )
    assert (bad.error_code, bad.log_start_offset == 0, len(bad.record_errors)) == (
        case.code,
        case.with_log_start,
        case.record_errors,
    )
    assert (good.error_code, good.base_offset) == (0, 0)
    assert kafka_broker.consume(kafka_topic_name, 0) == []
    assert [r.key for _, r in kafka_broker.consume(kafka_topic_name, 1)] == [b"key-0", b"key-1", b"key-2"]


@pytest.mark.parametrize("case", WHOLE_REQUEST, ids=[c.name for c in WHOLE_REQUEST])
def test_a_fault_that_fails_the_whole_request_stores_nothing(
    kafka_broker: InProcessBroker, kafka_topic_name: str, case: HostileCase
) -> None:
    # As Kafka: every partition gets the fault, the valid one included.
    kafka_broker.create_topic(kafka_topic_name, 2)
    answers = produce(
        kafka_broker, kafka_topic_name, {0: valid_batch(now_ms()), 1: case.make(now_ms())}, case.api_version
    )
    assert [(p.error_code, p.log_start_offset) for p in answers] == [(case.code, -1)] * 2
    if case.api_version >= 8:  # the field's first version
        assert all(p.error_message for p in answers)
    assert kafka_broker.consume(kafka_topic_name, 0) == kafka_broker.consume(kafka_topic_name, 1) == []


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.name for c in ACCEPTED])
def test_an_odd_batch_kafka_accepts_is_stored(
    kafka_broker: InProcessBroker, kafka_topic_name: str, case: HostileCase
) -> None:
    kafka_broker.create_topic(kafka_topic_name, 1, case.configs)
    records = case.make(now_ms())
    (answer,) = produce(kafka_broker, kafka_topic_name, {0: records})
    assert (answer.error_code, answer.base_offset) == (0, 0)
    # Read back raw: Kafka stores some of these (record lengths that lie in a compressed batch) in a
    # form its own consumer's full record reader refuses.
    fetch = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": kafka_topic_name,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    with kafka_broker.client() as client:
        stored = bytes(client.request(1, 12, fetch).responses[0].partitions[0].records)
    assert [h.records_count for _, h in iter_batches(stored)] == [read_batch_header(records).records_count]


def test_clients_read_every_valid_record_around_the_bad_batches(
    kafka_broker: InProcessBroker, kafka_topic_name: str
) -> None:
    """One partition: each hostile batch (raw frame) between records a real producer sends; a
    librdkafka consumer then reads them all, none lost, none of the hostile ones."""
    topic = kafka_topic_name
    kafka_broker.create_topic(topic, 1)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, compression_type="lz4", linger_ms=0)
    expected: list[bytes] = []
    for case in (c for c in PER_PARTITION if not c.configs and not c.slow):
        (answer,) = produce(kafka_broker, topic, {0: case.make(now_ms())}, case.api_version)
        assert answer.error_code == case.code, case.name
        for i in range(2):
            value = b"%s-%d" % (case.name.encode(), i)
            producer.send(topic, value, partition=0).get(timeout=30)
            expected.append(value)
    producer.close()
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "group.id": f"{topic}-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(expected) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append(message.value())
    finally:
        consumer.close()
    assert got == expected


def _body(topic: str, records: bytes, acks: int) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def test_acks_0_with_a_refused_batch_closes_the_connection(
    kafka_broker: InProcessBroker, kafka_topic_name: str
) -> None:
    """As Kafka: no answer is expected, so the producer learns of the error by the closed connection."""
    kafka_broker.create_topic(kafka_topic_name, 1)
    bad = next(c for c in PER_PARTITION if c.name == "garbage_zstd").make(now_ms())
    with kafka_broker.client() as client:
        client.send(0, 9, _body(kafka_topic_name, bad, acks=0))
        assert client.receive_frame() is None
    # A valid one gets no answer and the connection stays: the next request is answered.
    with kafka_broker.client() as client:
        client.send(0, 9, _body(kafka_topic_name, valid_batch(now_ms()), acks=0))
        assert client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False}).topics is not None
    assert [offset for offset, _ in kafka_broker.consume(kafka_topic_name)] == [0, 1, 2]


def test_null_records_are_refused_and_the_other_partition_appended(
    kafka_broker: InProcessBroker, kafka_topic_name: str
) -> None:
    # Apache Kafka 4.0.2 never answers this request (FINDINGS.md); an answer is better than a hang.
    kafka_broker.create_topic(kafka_topic_name, 2)
    with kafka_broker.client() as client:
        answer = client.request(
            0,
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 10000,
                "topic_data": [
                    {
                        "name": kafka_topic_name,
                        "partition_data": [
                            {"index": 0, "records": None},
                            {"index": 1, "records": valid_batch(now_ms())},
                        ],
                    }
                ],
            },
        )
    bad, good = sorted(answer.responses[0].partition_responses, key=lambda p: p.index)
    assert (bad.error_code, good.error_code, good.base_offset) == (ErrorCode.INVALID_RECORD, 0, 0)


@pytest.mark.parametrize("client_id", ["kafkalike-test", "__admin_client"])
def test_only_the_admin_client_appends_to_an_internal_topic(client_id: str) -> None:
    # A broker of its own: what the admin client appends stays out of the session's offsets topic.
    with InProcessBroker() as broker:
        with broker.client() as client:  # the offsets topic is made on first use, in the background
            deadline = time.monotonic() + 30
            lookup = {"key_type": 0, "coordinator_keys": ["internal-check"]}
            while client.request(10, 4, lookup).coordinators[0].error_code != ErrorCode.NONE:
                assert time.monotonic() < deadline, "no coordinator"
                time.sleep(0.02)  # as a client backs off before asking again
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 10000,
            "topic_data": [
                {"name": "__consumer_offsets", "partition_data": [{"index": 0, "records": valid_batch(now_ms())}]}
            ],
        }
        with WireClient(broker.host, broker.port, client_id=client_id) as client:
            answer = client.request(0, 9, body).responses[0].partition_responses[0]
    expected = ErrorCode.NONE if client_id == "__admin_client" else ErrorCode.INVALID_TOPIC_EXCEPTION
    assert answer.error_code == expected
