"""The test kit: in-process broker, its fault hooks with a real client, and the pytest fixtures."""

from __future__ import annotations

import time

import pytest
import trio
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError, NotLeaderForPartitionError

from kafkalike.protocol.errors import ErrorCode
from kafkalike.testing.broker import InProcessBroker


def test_fixtures_give_a_fresh_topic(kafka_bootstrap: str, kafka_topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    metadata = producer.send(kafka_topic, b"hello").get(timeout=30)
    producer.close()
    assert metadata.offset == 0 and metadata.topic == kafka_topic


@pytest.mark.kafka_topic(partitions=3)
def test_topic_marker_sets_partitions(kafka_broker: InProcessBroker, kafka_topic: str) -> None:
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers)
    assert consumer.partitions_for_topic(kafka_topic) == {0, 1, 2}
    consumer.close()


def test_injected_error_makes_the_producer_retry(kafka_broker: InProcessBroker, kafka_topic: str) -> None:
    kafka_broker.faults.inject_error(0, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=2)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, retries=5, retry_backoff_ms=10)
    metadata = producer.send(kafka_topic, b"after retries").get(timeout=30)
    producer.close()
    assert metadata.offset == 0
    # The two rejected attempts appended nothing: the record is there exactly once.
    assert [r.value for _, r in kafka_broker.consume(kafka_topic)] == [b"after retries"]


def test_injected_error_without_retries_reaches_the_caller(kafka_broker: InProcessBroker, kafka_topic: str) -> None:
    kafka_broker.faults.inject_error(0, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=1)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, retries=0)
    with pytest.raises(NotLeaderForPartitionError):
        producer.send(kafka_topic, b"x").get(timeout=30)
    producer.close()


def test_dropped_connection_is_survived_by_the_client(kafka_broker: InProcessBroker, kafka_topic: str) -> None:
    kafka_broker.produce(kafka_topic, b"one")
    kafka_broker.faults.drop_connection(1, times=1)
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, consumer_timeout_ms=20000)
    tp = TopicPartition(kafka_topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    assert next(iter(consumer)).value == b"one"
    consumer.close()


def test_paused_partition_blocks_produce_until_resumed(kafka_broker: InProcessBroker, kafka_topic: str) -> None:
    kafka_broker.faults.pause_partition(kafka_topic, 0)
    producer = KafkaProducer(
        bootstrap_servers=kafka_broker.bootstrap_servers,
        max_block_ms=1000,
        request_timeout_ms=1000,
        delivery_timeout_ms=3000,
        retry_backoff_ms=20,
    )
    with pytest.raises((KafkaTimeoutError, NotLeaderForPartitionError)):
        producer.send(kafka_topic, b"blocked").get(timeout=30)
    kafka_broker.faults.resume_partition(kafka_topic, 0)
    assert producer.send(kafka_topic, b"through").get(timeout=30).offset == 0
    producer.close()


def test_delay_holds_requests(kafka_broker: InProcessBroker, kafka_topic: str) -> None:
    kafka_broker.faults.delay(2, 0.3, times=1)
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers)
    tp = TopicPartition(kafka_topic, 0)
    started = time.monotonic()
    consumer.end_offsets([tp])
    assert time.monotonic() - started >= 0.3
    consumer.close()


def test_interceptor_answers_instead_of_the_broker(kafka_broker: InProcessBroker, kafka_topic: str) -> None:
    seen = []

    def fake_end_offset(header: object, request: object) -> dict[str, object]:
        seen.append(request)
        return {"topics": [{"name": kafka_topic, "partitions": [{"partition_index": 0, "offset": 42}]}]}

    kafka_broker.faults.intercept(2, fake_end_offset, times=1)
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers)
    tp = TopicPartition(kafka_topic, 0)
    assert consumer.end_offsets([tp]) == {tp: 42}
    assert consumer.end_offsets([tp]) == {tp: 0}  # used once, then the broker answers again
    consumer.close()
    assert len(seen) == 1


def test_restart_keeps_ephemeral_data() -> None:
    with InProcessBroker(seed_topics={"kept": 2}) as kafka:
        kafka.produce("kept", b"v1", partition=1)
        port = kafka.port
        kafka.restart()
        assert kafka.port == port
        assert [r.value for _, r in kafka.consume("kept", partition=1)] == [b"v1"]


async def test_async_use_inside_trio() -> None:
    async with InProcessBroker(seed_topics={"t": 1}) as kafka:
        offset = await trio.to_thread.run_sync(kafka.produce, "t", b"from trio")
        assert offset == 0
