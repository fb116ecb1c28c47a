"""kafka-python: admin, every codec, seeks, timestamps, errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import MessageSizeTooLargeError, TopicAlreadyExistsError

from compat_tests.support import (
    CODEC_IDS,
    CODECS,
    Received,
    Sent,
    check_round_trip,
    consume_until,
    make_messages,
    stored_codecs,
)
from kafkalike.testing import BrokerProcess

TIMEOUT_S = 30


@contextmanager
def admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        yield client
    finally:
        client.close()


@contextmanager
def producer(bootstrap: str, **config: object) -> Iterator[KafkaProducer]:
    client = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **config)
    try:
        yield client
    finally:
        client.close(timeout=TIMEOUT_S)


@contextmanager
def consumer(bootstrap: str, topic: str, partitions: int) -> Iterator[KafkaConsumer]:
    """Manual assignment of every partition, positioned at the beginning; no group."""
    client = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    client.assign([TopicPartition(topic, p) for p in range(partitions)])
    client.seek_to_beginning()
    try:
        yield client
    finally:
        client.close()


def create_topic(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    with admin(bootstrap) as client:
        client.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])


def produce(bootstrap: str, topic: str, messages: list[Sent], codec: str = "none") -> dict[int, tuple[int, int]]:
    """Send everything, wait for every acknowledgement; (partition, offset) by message index."""
    with producer(bootstrap, compression_type=None if codec == "none" else codec) as client:
        futures = [
            (m.index, client.send(topic, m.value, m.key, list(m.headers), timestamp_ms=m.timestamp_ms))
            for m in messages
        ]
        client.flush(TIMEOUT_S)
        acks = {}
        for index, future in futures:
            metadata = future.get(TIMEOUT_S)
            acks[index] = (metadata.partition, metadata.offset)
        return acks


def received(record: ConsumerRecord) -> Received:
    return Received(
        record.partition,
        record.offset,
        record.key,
        record.value,
        tuple(record.headers),
        record.timestamp,
        record.timestamp_type == 0,
    )


def poll(client: KafkaConsumer) -> list[Received]:
    return [received(r) for records in client.poll(timeout_ms=500).values() for r in records]


def consume_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[Received]:
    with consumer(bootstrap, topic, partitions) as client:
        return consume_until(lambda: poll(client), count)


def test_admin_creates_describes_and_refuses_to_recreate_a_topic(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    with admin(kafka_bootstrap) as client:
        client.create_topics([NewTopic(kafka_topic_name, 3, 1, topic_configs={"max.message.bytes": "65536"})])
        assert kafka_topic_name in client.list_topics()
        (described,) = client.describe_topics([kafka_topic_name])
        assert described["error_code"] == 0
        assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
        configs = client.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, kafka_topic_name, ["max.message.bytes"])]
        )
        assert configs["topic"][kafka_topic_name]["max.message.bytes"]["value"] == "65536"
        with pytest.raises(TopicAlreadyExistsError):
            client.create_topics([NewTopic(kafka_topic_name, 1, 1)])


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
    assert set(stored_codecs(kafka_bootstrap, kafka_topic, 3)) == {CODEC_IDS[codec]}


@pytest.mark.kafka_topic(partitions=1)
def test_consume_from_a_chosen_offset(kafka_bootstrap: str, kafka_topic: str) -> None:
    sent = make_messages(30)
    produce(kafka_bootstrap, kafka_topic, sent, "lz4")
    with consumer(kafka_bootstrap, kafka_topic, 1) as client:
        client.seek(TopicPartition(kafka_topic, 0), 17)
        got = consume_until(lambda: poll(client), 13)
        assert [r.offset for r in got] == list(range(17, 30))
        assert [r.value for r in got] == [m.value for m in sent[17:]]
        # Seeking back re-reads: the log is not consumed by reading it.
        client.seek(TopicPartition(kafka_topic, 0), 3)
        again = consume_until(lambda: poll(client), 27)
        assert [r.value for r in again] == [m.value for m in sent[3:]]


@pytest.mark.kafka_topic(partitions=1)
def test_seek_by_timestamp(kafka_bootstrap: str, kafka_topic: str) -> None:
    sent = make_messages(20)
    produce(kafka_bootstrap, kafka_topic, sent, "gzip")
    tp = TopicPartition(kafka_topic, 0)
    with consumer(kafka_bootstrap, kafka_topic, 1) as client:
        found = client.offsets_for_times({tp: sent[0].timestamp_ms - 1000})[tp]
        assert (found.offset, found.timestamp) == (0, sent[0].timestamp_ms)
        # Between two messages' timestamps: the first message at or after it.
        found = client.offsets_for_times({tp: sent[11].timestamp_ms - 5})[tp]
        assert (found.offset, found.timestamp) == (11, sent[11].timestamp_ms)
        assert client.offsets_for_times({tp: sent[-1].timestamp_ms + 1}) == {tp: None}
        client.seek(tp, found.offset)
        got = consume_until(lambda: poll(client), 9)
        assert [r.timestamp_ms for r in got] == [m.timestamp_ms for m in sent[11:]]
        assert client.beginning_offsets([tp]) == {tp: 0}
        assert client.end_offsets([tp]) == {tp: 20}


@pytest.mark.kafka_topic(partitions=1, max_message_bytes="2048")
def test_message_larger_than_max_message_bytes_is_rejected(kafka_bootstrap: str, kafka_topic: str) -> None:
    with producer(kafka_bootstrap) as client, pytest.raises(MessageSizeTooLargeError):
        client.send(kafka_topic, b"x" * 4096, partition=0).get(TIMEOUT_S)
    # kafka-python's idempotent producer treats any non-retriable error as fatal: use a new one.
    with producer(kafka_bootstrap) as client:
        fits = client.send(kafka_topic, b"small", partition=0).get(TIMEOUT_S)
    assert fits.offset == 0, "the rejected message must not have been appended"
    got = consume_all(kafka_bootstrap, kafka_topic, 1, 1)
    assert [r.value for r in got] == [b"small"]


@pytest.mark.kafka_topic(partitions=2)
def test_partition_beyond_the_count_is_refused_until_created(kafka_bootstrap: str, kafka_topic: str) -> None:
    with producer(kafka_bootstrap) as client, pytest.raises(ValueError, match="Unrecognized partition"):
        client.send(kafka_topic, b"early", partition=3)
    with admin(kafka_bootstrap) as admin_client:
        admin_client.create_partitions({kafka_topic: NewPartitions(4)})
    with producer(kafka_bootstrap) as client:
        metadata = client.send(kafka_topic, b"late", partition=3).get(TIMEOUT_S)
        assert (metadata.partition, metadata.offset) == (3, 0)
    got = consume_all(kafka_bootstrap, kafka_topic, 4, 1)
    assert [(r.partition, r.value) for r in got] == [(3, b"late")]


def test_messages_survive_a_broker_restart(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    broker = kafka_broker_process()
    create_topic(broker.bootstrap, kafka_topic_name, 3)
    sent = make_messages(41)
    before, after = sent[:40], sent[40:]
    acks = produce(broker.bootstrap, kafka_topic_name, before, "zstd")
    assert broker.stop() == 0
    broker.restart()
    got = consume_all(broker.bootstrap, kafka_topic_name, 3, len(before))
    check_round_trip(before, got, partitions=3)
    assert {(r.partition, r.offset) for r in got} == set(acks.values())
    # The log goes on where it stopped.
    ((partition, offset),) = produce(broker.bootstrap, kafka_topic_name, after).values()
    assert offset == sum(1 for p, _ in acks.values() if p == partition)


def test_producing_to_an_unknown_topic_creates_it(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    with producer(kafka_bootstrap) as client:
        metadata = client.send(kafka_topic_name, b"first", b"key").get(TIMEOUT_S)
        assert (metadata.partition, metadata.offset) == (0, 0)
        assert client.partitions_for(kafka_topic_name) == {0}  # num.partitions defaults to 1
    got = consume_all(kafka_bootstrap, kafka_topic_name, 1, 1)
    assert [(r.key, r.value) for r in got] == [(b"key", b"first")]


def test_a_socket_kafka_python_leaves_open_is_closed_quietly_when_collected() -> None:
    # compat_tests/conftest.py: kafka-python's own sockets, and only those, close without a
    # ResourceWarning when the client left them to the garbage collector.
    import gc
    import socket
    import warnings

    from kafka.net.inet import KafkaNetSocket

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        left_by_the_client = KafkaNetSocket().socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        del left_by_the_client
        gc.collect()
        assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
        left_by_anyone_else = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        del left_by_anyone_else
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)], "any other socket is still reported"
