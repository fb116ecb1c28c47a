"""The test kit: in-process broker, its fault hooks with a real client, and the pytest fixtures.

Each fault hook makes kafka-python retry here (``delay`` makes a group rebalance in
``test_rebalance_by_fault.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
import trio
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError, NotLeaderForPartitionError

from kafkalike.protocol.api import RequestHeader
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.testing.broker import InProcessBroker
from kafkalike.testing.clock import DEFAULT_EPOCH_MS, TrioClock
from kafkalike.testing.wire_client import AsyncWireClient

PRODUCE, METADATA = 0, 3


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


def test_interceptor_refusing_a_produce_makes_the_producer_retry(
    kafka_broker: InProcessBroker, kafka_topic: str
) -> None:
    seen: list[int] = []

    def refuse_the_first(header: RequestHeader, request: Message) -> Mapping[str, Any] | None:
        seen.append(header.correlation_id)
        if len(seen) > 1:
            return None  # the broker handles the retry
        (topic,) = request.topic_data
        refused = [{"index": p.index, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER} for p in topic.partition_data]
        return {"responses": [{"name": topic.name, "partition_responses": refused}]}

    kafka_broker.faults.intercept(PRODUCE, refuse_the_first)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, retry_backoff_ms=10)
    metadata = producer.send(kafka_topic, b"retried").get(timeout=30)
    producer.close()
    assert metadata.offset == 0
    assert len(seen) == 2 and seen[0] != seen[1]  # the refused request, then the client's retry
    assert [r.value for _, r in kafka_broker.consume(kafka_topic)] == [b"retried"]


def test_a_send_to_a_paused_partition_is_retried_until_it_resumes(
    kafka_broker: InProcessBroker, kafka_topic: str
) -> None:
    metadata_requests = threading.Semaphore(0)

    def count(header: RequestHeader, request: Message) -> None:
        metadata_requests.release()

    kafka_broker.faults.pause_partition(kafka_topic, 0)
    kafka_broker.faults.intercept(METADATA, count, client_id="waiting-producer")
    producer = KafkaProducer(
        bootstrap_servers=kafka_broker.bootstrap_servers, client_id="waiting-producer", retry_backoff_ms=20
    )
    future = producer.send(kafka_topic, b"waited", partition=0)
    # The partition has no leader: the producer keeps the record and keeps asking for one.
    for _ in range(3):
        assert metadata_requests.acquire(timeout=30)
    assert not future.is_done
    kafka_broker.faults.resume_partition(kafka_topic, 0)
    assert future.get(timeout=30).offset == 0
    producer.close()


def test_a_fault_for_one_client_id_leaves_other_clients_alone(kafka_broker: InProcessBroker, kafka_topic: str) -> None:
    kafka_broker.faults.inject_error(PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=None, client_id="refused")
    refused = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, client_id="refused", retries=0)
    other = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, client_id="other", retries=0)
    with pytest.raises(NotLeaderForPartitionError):
        refused.send(kafka_topic, b"refused").get(timeout=30)
    assert other.send(kafka_topic, b"accepted").get(timeout=30).offset == 0
    refused.close()
    other.close()


def test_an_in_memory_broker_describes_its_log_dir_without_a_disk(kafka_broker: InProcessBroker) -> None:
    kafka_broker.create_topic("sized", 1)
    kafka_broker.produce("sized", b"x" * 100)
    with kafka_broker.client() as client:
        response = client.request(35, 4, {"topics": [{"topic": "sized", "partitions": [0]}]})
    (log_dir,) = response.results
    assert (log_dir.error_code, log_dir.total_bytes, log_dir.usable_bytes) == (0, -1, -1)
    assert log_dir.topics[0].partitions[0].partition_size > 100
    kafka_broker.delete_topic("sized")


def test_restart_keeps_ephemeral_data() -> None:
    with InProcessBroker(seed_topics={"kept": 2}) as kafka:
        kafka.produce("kept", b"v1", partition=1)
        port = kafka.port
        kafka.restart()
        assert kafka.port == port
        assert [r.value for _, r in kafka.consume("kept", partition=1)] == [b"v1"]


async def test_a_broker_on_a_trio_clock_tells_the_mock_clocks_time(autojump_clock: trio.testing.MockClock) -> None:
    async with InProcessBroker(clock=TrioClock()) as kafka:
        await trio.sleep(3 * 3600)  # on the mock clock: no real wait
        client = await AsyncWireClient.connect(kafka.host, kafka.port)
        try:
            body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
            response = await client.request(55, 1, body)  # DescribeQuorum: "now" for the leader itself
        finally:
            await client.aclose()
        (voter,) = response.topics[0].partitions[0].current_voters
        assert voter.last_fetch_timestamp == DEFAULT_EPOCH_MS + int(trio.current_time() * 1000)


async def test_async_use_inside_trio() -> None:
    async with InProcessBroker(seed_topics={"t": 1}) as kafka:
        offset = await trio.to_thread.run_sync(kafka.produce, "t", b"from trio")
        assert offset == 0
