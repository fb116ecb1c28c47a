"""confluent-kafka (librdkafka): admin, every codec, seeks, timestamps, errors."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from compat_tests.support import (
    CODEC_IDS,
    CODECS,
    Received,
    Sent,
    check_round_trip,
    consume_until,
    librdkafka_codec,
    make_messages,
    now_ms,
    stored_codecs,
)
from kafkalike.testing import BrokerProcess

TIMEOUT_S = 30
LONG_POLL_S = 20


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    client = admin(bootstrap)  # kept alive until the result is in: destroying it fails the futures
    client.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(TIMEOUT_S)


def new_producer(bootstrap: str, **config: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **config})


@contextmanager
def consumer(bootstrap: str, topic: str, starts: dict[int, int], **config: Any) -> Iterator[Consumer]:
    """Manual assignment from the given offsets; a group id is required, but no group is joined."""
    client = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compat-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **config,
        }
    )
    client.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
    try:
        yield client
    finally:
        client.close()


class Deliveries:
    """Delivery reports by message index."""

    def __init__(self) -> None:
        self.reports: dict[int, tuple[KafkaError | None, int, int]] = {}

    def callback(self, index: int) -> Any:
        def report(error: KafkaError | None, message: Message) -> None:
            partition, offset = message.partition(), message.offset()
            self.reports[index] = (error, -1 if partition is None else partition, -1 if offset is None else offset)

        return report


def produce(bootstrap: str, topic: str, messages: list[Sent], codec: str = "none") -> dict[int, tuple[int, int]]:
    """Send everything, wait for every delivery report; (partition, offset) by message index."""
    client = new_producer(bootstrap, **{"compression.type": codec})
    deliveries = Deliveries()
    for m in messages:
        client.produce(
            topic,
            m.value,
            m.key,
            headers=list(m.headers),
            timestamp=m.timestamp_ms,
            on_delivery=deliveries.callback(m.index),
        )
    assert client.flush(TIMEOUT_S) == 0
    assert all(error is None for error, _, _ in deliveries.reports.values()), deliveries.reports
    return {index: (partition, offset) for index, (_, partition, offset) in deliveries.reports.items()}


def received(message: Message) -> Received:
    assert message.error() is None, message.error()
    partition, offset, value = message.partition(), message.offset(), message.value()
    assert partition is not None and offset is not None and value is not None
    timestamp_type, timestamp = message.timestamp()
    headers = cast(list[tuple[str, bytes]], message.headers() or [])
    return Received(
        partition, offset, message.key(), value, tuple(headers), timestamp, timestamp_type == TIMESTAMP_CREATE_TIME
    )


def poll(client: Consumer) -> list[Received]:
    return [received(m) for m in client.consume(num_messages=1000, timeout=0.5)]


def consume_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[Received]:
    with consumer(bootstrap, topic, dict.fromkeys(range(partitions), OFFSET_BEGINNING)) as client:
        return consume_until(lambda: poll(client), count)


def test_admin_creates_describes_and_refuses_to_recreate_a_topic(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    client = admin(kafka_bootstrap)
    client.create_topics([NewTopic(kafka_topic_name, 3, 1, config={"max.message.bytes": "65536"})])[
        kafka_topic_name
    ].result(TIMEOUT_S)
    metadata = client.list_topics(kafka_topic_name, timeout=TIMEOUT_S)
    assert sorted(metadata.topics[kafka_topic_name].partitions) == [0, 1, 2]
    assert [b.port for b in metadata.brokers.values()] == [int(kafka_bootstrap.rsplit(":", 1)[1])]
    resource = ConfigResource(ConfigResource.Type.TOPIC, kafka_topic_name)
    configs = client.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert configs["max.message.bytes"].value == "65536"
    assert configs["cleanup.policy"].value == "delete"
    with pytest.raises(KafkaException) as raised:
        client.create_topics([NewTopic(kafka_topic_name, 1, 1)])[kafka_topic_name].result(TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.kafka_topic(partitions=3)
def test_keyed_and_unkeyed_messages_round_trip_with_every_codec(
    kafka_bootstrap: str, kafka_topic: str, codec: str
) -> None:
    sent = make_messages()
    acks = produce(kafka_bootstrap, kafka_topic, sent, codec)
    got = consume_all(kafka_bootstrap, kafka_topic, 3, len(sent))
    check_round_trip(sent, got, partitions=3)
    assert {(r.partition, r.offset) for r in got} == set(acks.values())
    assert set(stored_codecs(kafka_bootstrap, kafka_topic, 3)) == {CODEC_IDS[librdkafka_codec(kafka_bootstrap, codec)]}


@pytest.mark.kafka_topic(partitions=1)
def test_consume_from_a_chosen_offset(kafka_bootstrap: str, kafka_topic: str) -> None:
    sent = make_messages(30)
    produce(kafka_bootstrap, kafka_topic, sent, "zstd")
    with consumer(kafka_bootstrap, kafka_topic, {0: 17}) as client:
        got = consume_until(lambda: poll(client), 13)
        assert [r.offset for r in got] == list(range(17, 30))
        assert [r.value for r in got] == [m.value for m in sent[17:]]
        client.seek(TopicPartition(kafka_topic, 0, 3))
        again = consume_until(lambda: poll(client), 27)
        assert [r.value for r in again] == [m.value for m in sent[3:]]


@pytest.mark.kafka_topic(partitions=1)
def test_seek_by_timestamp(kafka_bootstrap: str, kafka_topic: str) -> None:
    sent = make_messages(20)
    produce(kafka_bootstrap, kafka_topic, sent, "snappy")
    with consumer(kafka_bootstrap, kafka_topic, {0: OFFSET_BEGINNING}) as client:

        def offset_for(timestamp: int) -> int:
            (found,) = client.offsets_for_times([TopicPartition(kafka_topic, 0, timestamp)], timeout=TIMEOUT_S)
            assert found.error is None, found.error
            return int(found.offset)

        assert offset_for(sent[0].timestamp_ms - 1000) == 0
        assert offset_for(sent[11].timestamp_ms - 5) == 11
        assert offset_for(sent[-1].timestamp_ms + 1) == -1  # none: the end
        client.seek(TopicPartition(kafka_topic, 0, offset_for(sent[11].timestamp_ms)))
        got = consume_until(lambda: poll(client), 9)
        assert [r.timestamp_ms for r in got] == [m.timestamp_ms for m in sent[11:]]
        assert client.get_watermark_offsets(TopicPartition(kafka_topic, 0), timeout=TIMEOUT_S) == (0, 20)


@pytest.mark.kafka_topic(partitions=1, max_message_bytes="2048")
def test_message_larger_than_max_message_bytes_is_rejected(kafka_bootstrap: str, kafka_topic: str) -> None:
    client = new_producer(kafka_bootstrap)
    deliveries = Deliveries()
    client.produce(kafka_topic, b"x" * 4096, partition=0, on_delivery=deliveries.callback(0))
    assert client.flush(TIMEOUT_S) == 0
    error, _, _ = deliveries.reports[0]
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    client.produce(kafka_topic, b"small", partition=0, on_delivery=deliveries.callback(1))
    assert client.flush(TIMEOUT_S) == 0
    assert deliveries.reports[1] == (None, 0, 0), "the rejected message must not have been appended"
    got = consume_all(kafka_bootstrap, kafka_topic, 1, 1)
    assert [r.value for r in got] == [b"small"]


@pytest.mark.kafka_topic(partitions=2)
def test_partition_beyond_the_count_is_refused_until_created(kafka_bootstrap: str, kafka_topic: str) -> None:
    deliveries = Deliveries()
    client = new_producer(kafka_bootstrap)
    client.produce(kafka_topic, b"early", partition=3, on_delivery=deliveries.callback(0))
    assert client.flush(TIMEOUT_S) == 0
    error, _, _ = deliveries.reports[0]
    assert error is not None and error.code() == KafkaError._UNKNOWN_PARTITION
    admin_client = admin(kafka_bootstrap)
    admin_client.create_partitions([NewPartitions(kafka_topic, 4)])[kafka_topic].result(TIMEOUT_S)
    client = new_producer(kafka_bootstrap)
    client.produce(kafka_topic, b"late", partition=3, on_delivery=deliveries.callback(1))
    assert client.flush(TIMEOUT_S) == 0
    assert deliveries.reports[1] == (None, 3, 0)
    got = consume_all(kafka_bootstrap, kafka_topic, 4, 1)
    assert [(r.partition, r.value) for r in got] == [(3, b"late")]


def test_messages_survive_a_broker_restart(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    broker = kafka_broker_process()
    create_topic(broker.bootstrap, kafka_topic_name, 3)
    sent = make_messages(41)
    before, after = sent[:40], sent[40:]
    acks = produce(broker.bootstrap, kafka_topic_name, before, "gzip")
    assert broker.stop() == 0
    broker.restart()
    got = consume_all(broker.bootstrap, kafka_topic_name, 3, len(before))
    check_round_trip(before, got, partitions=3)
    assert {(r.partition, r.offset) for r in got} == set(acks.values())
    # The log goes on where it stopped.
    ((partition, offset),) = produce(broker.bootstrap, kafka_topic_name, after).values()
    assert offset == sum(1 for p, _ in acks.values() if p == partition)


@pytest.mark.kafka_topic(partitions=1)
def test_a_message_near_the_size_limit_round_trips(kafka_bootstrap: str, kafka_topic: str) -> None:
    large = random.Random(7).randbytes(900_000)  # incompressible, under the 1 MiB default limit
    sent = [Sent(0, b"large", large, (("kind", b"large"),), now_ms())]
    assert produce(kafka_bootstrap, kafka_topic, sent) == {0: (0, 0)}
    (got,) = consume_all(kafka_bootstrap, kafka_topic, 1, 1)
    assert (got.key, got.value, got.headers, got.timestamp_ms) == (
        b"large",
        large,
        (("kind", b"large"),),
        sent[0].timestamp_ms,
    )


@pytest.mark.kafka_topic(partitions=1)
def test_a_waiting_consumer_is_woken_by_new_messages(kafka_bootstrap: str, kafka_topic: str) -> None:
    client = new_producer(kafka_bootstrap)
    with consumer(kafka_bootstrap, kafka_topic, {0: 0}, **{"fetch.wait.max.ms": LONG_POLL_S * 1000}) as waiting:
        assert not waiting.consume(num_messages=1, timeout=0.5)  # nothing yet: its fetch now waits at the broker
        for i in range(3):
            client.produce(kafka_topic, b"live-%d" % i)
            assert client.flush(TIMEOUT_S) == 0
            acked = time.monotonic()
            # The fetch may wait up to 20 s (fetch.wait.max.ms): only a wake-up on append makes this quick.
            (got,) = consume_until(lambda: poll(waiting), 1, timeout_s=LONG_POLL_S / 4)
            assert got.value == b"live-%d" % i
            assert time.monotonic() - acked < LONG_POLL_S / 4
