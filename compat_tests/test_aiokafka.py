"""aiokafka: admin, every codec, seeks, timestamps, errors.

aiokafka runs on asyncio, so each test drives its own event loop with ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.structs import ConsumerRecord

from compat_tests.support import (
    CODEC_IDS,
    CODECS,
    CONSUME_TIMEOUT_S,
    Received,
    Sent,
    check_round_trip,
    make_messages,
    stored_codecs,
)
from kafkalike.testing import BrokerProcess

T = TypeVar("T")
TOPIC_ALREADY_EXISTS = 36


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coroutine, 60))


@asynccontextmanager
async def admin(bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


@asynccontextmanager
async def producer(bootstrap: str, **config: Any) -> AsyncIterator[AIOKafkaProducer]:
    client = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **config)
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


@asynccontextmanager
async def consumer(bootstrap: str, topic: str, partitions: int) -> AsyncIterator[AIOKafkaConsumer]:
    """Manual assignment of every partition, positioned at the beginning; no group."""
    client = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await client.start()
    try:
        client.assign([TopicPartition(topic, p) for p in range(partitions)])
        await client.seek_to_beginning()
        yield client
    finally:
        await client.stop()


async def create_topic(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    async with admin(bootstrap) as client:
        response = await client.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
    assert [error for _, error, _ in response.topic_errors] == [0]


async def produce(bootstrap: str, topic: str, messages: list[Sent], codec: str = "none") -> dict[int, tuple[int, int]]:
    """Send everything, wait for every acknowledgement; (partition, offset) by message index."""
    async with producer(bootstrap, compression_type=None if codec == "none" else codec) as client:
        futures = [
            (m.index, await client.send(topic, m.value, m.key, timestamp_ms=m.timestamp_ms, headers=list(m.headers)))
            for m in messages
        ]
        acks = {}
        for index, future in futures:
            metadata = await future
            acks[index] = (metadata.partition, metadata.offset)
        return acks


def received(record: ConsumerRecord[bytes, bytes]) -> Received:
    return Received(
        record.partition,
        record.offset,
        record.key,
        record.value or b"",
        tuple(record.headers),
        record.timestamp,
        record.timestamp_type == 0,
    )


async def consume_until(client: AIOKafkaConsumer, count: int) -> list[Received]:
    got: list[Received] = []
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        batches = await client.getmany(timeout_ms=500)
        got += [received(r) for records in batches.values() for r in records]
    return got


async def consume_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[Received]:
    async with consumer(bootstrap, topic, partitions) as client:
        return await consume_until(client, count)


def test_admin_creates_describes_and_refuses_to_recreate_a_topic(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    async def scenario() -> None:
        async with admin(kafka_bootstrap) as client:
            created = await client.create_topics(
                [NewTopic(kafka_topic_name, 3, 1, topic_configs={"max.message.bytes": "65536"})]
            )
            assert [error for _, error, _ in created.topic_errors] == [0]
            assert kafka_topic_name in await client.list_topics()
            (described,) = await client.describe_topics([kafka_topic_name])
            assert described["error_code"] == 0
            assert sorted(p["partition"] for p in described["partitions"]) == [0, 1, 2]
            (configs,) = await client.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, kafka_topic_name, {"max.message.bytes": None})]
            )
            ((error, _, _, _, entries),) = configs.resources
            assert error == 0
            assert [(name, value) for name, value, *_ in entries] == [("max.message.bytes", "65536")]
            again = await client.create_topics([NewTopic(kafka_topic_name, 1, 1)])
            assert [error for _, error, _ in again.topic_errors] == [TOPIC_ALREADY_EXISTS]

    run(scenario())


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.kafka_topic(partitions=3)
def test_keyed_and_unkeyed_messages_round_trip_with_every_codec(
    kafka_bootstrap: str, kafka_topic: str, codec: str
) -> None:
    sent = make_messages()

    async def scenario() -> tuple[dict[int, tuple[int, int]], list[Received]]:
        acks = await produce(kafka_bootstrap, kafka_topic, sent, codec)
        return acks, await consume_all(kafka_bootstrap, kafka_topic, 3, len(sent))

    acks, got = run(scenario())
    check_round_trip(sent, got, partitions=3)
    assert {(r.partition, r.offset) for r in got} == set(acks.values())
    assert set(stored_codecs(kafka_bootstrap, kafka_topic, 3)) == {CODEC_IDS[codec]}


@pytest.mark.kafka_topic(partitions=1)
def test_consume_from_a_chosen_offset(kafka_bootstrap: str, kafka_topic: str) -> None:
    sent = make_messages(30)

    async def scenario() -> None:
        await produce(kafka_bootstrap, kafka_topic, sent, "gzip")
        async with consumer(kafka_bootstrap, kafka_topic, 1) as client:
            client.seek(TopicPartition(kafka_topic, 0), 17)
            got = await consume_until(client, 13)
            assert [r.offset for r in got] == list(range(17, 30))
            assert [r.value for r in got] == [m.value for m in sent[17:]]
            client.seek(TopicPartition(kafka_topic, 0), 3)
            again = await consume_until(client, 27)
            assert [r.value for r in again] == [m.value for m in sent[3:]]

    run(scenario())


@pytest.mark.kafka_topic(partitions=1)
def test_seek_by_timestamp(kafka_bootstrap: str, kafka_topic: str) -> None:
    sent = make_messages(20)
    tp = TopicPartition(kafka_topic, 0)

    async def scenario() -> None:
        await produce(kafka_bootstrap, kafka_topic, sent, "zstd")
        async with consumer(kafka_bootstrap, kafka_topic, 1) as client:
            found = (await client.offsets_for_times({tp: sent[0].timestamp_ms - 1000}))[tp]
            assert found is not None and (found.offset, found.timestamp) == (0, sent[0].timestamp_ms)
            found = (await client.offsets_for_times({tp: sent[11].timestamp_ms - 5}))[tp]
            assert found is not None and (found.offset, found.timestamp) == (11, sent[11].timestamp_ms)
            assert await client.offsets_for_times({tp: sent[-1].timestamp_ms + 1}) == {tp: None}
            client.seek(tp, found.offset)
            got = await consume_until(client, 9)
            assert [r.timestamp_ms for r in got] == [m.timestamp_ms for m in sent[11:]]
            assert await client.beginning_offsets([tp]) == {tp: 0}
            assert await client.end_offsets([tp]) == {tp: 20}

    run(scenario())


@pytest.mark.kafka_topic(partitions=1, max_message_bytes="2048")
def test_message_larger_than_max_message_bytes_is_rejected(kafka_bootstrap: str, kafka_topic: str) -> None:
    async def scenario() -> None:
        async with producer(kafka_bootstrap) as client:
            with pytest.raises(MessageSizeTooLargeError):
                await client.send_and_wait(kafka_topic, b"x" * 4096, partition=0)
            fits = await client.send_and_wait(kafka_topic, b"small", partition=0)
            assert fits.offset == 0, "the rejected message must not have been appended"
        got = await consume_all(kafka_bootstrap, kafka_topic, 1, 1)
        assert [r.value for r in got] == [b"small"]

    run(scenario())


@pytest.mark.kafka_topic(partitions=2)
def test_partitions_added_by_create_partitions_become_writable(kafka_bootstrap: str, kafka_topic: str) -> None:
    async def scenario() -> None:
        async with producer(kafka_bootstrap) as client:
            assert await client.partitions_for(kafka_topic) == {0, 1}
        async with admin(kafka_bootstrap) as admin_client:
            response = await admin_client.create_partitions({kafka_topic: NewPartitions(4)})
            assert [error for _, error, _ in response.topic_errors] == [0]
        async with producer(kafka_bootstrap) as client:
            assert await client.partitions_for(kafka_topic) == {0, 1, 2, 3}
            metadata = await client.send_and_wait(kafka_topic, b"late", partition=3)
            assert (metadata.partition, metadata.offset) == (3, 0)
        got = await consume_all(kafka_bootstrap, kafka_topic, 4, 1)
        assert [(r.partition, r.value) for r in got] == [(3, b"late")]

    run(scenario())


def test_messages_survive_a_broker_restart(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    broker = kafka_broker_process()
    sent = make_messages(41)
    before, after = sent[:40], sent[40:]

    async def write(messages: list[Sent], create: bool) -> dict[int, tuple[int, int]]:
        if create:
            await create_topic(broker.bootstrap, kafka_topic_name, 3)
        return await produce(broker.bootstrap, kafka_topic_name, messages, "snappy")

    acks = run(write(before, create=True))
    assert broker.stop() == 0
    broker.restart()
    got = run(consume_all(broker.bootstrap, kafka_topic_name, 3, len(before)))
    check_round_trip(before, got, partitions=3)
    assert {(r.partition, r.offset) for r in got} == set(acks.values())
    # The log goes on where it stopped.
    ((partition, offset),) = run(write(after, create=False)).values()
    assert offset == sum(1 for p, _ in acks.values() if p == partition)


@pytest.mark.kafka_topic(partitions=1)
def test_a_waiting_consumer_is_woken_by_new_messages(kafka_bootstrap: str, kafka_topic: str) -> None:
    long_poll_ms = 20_000

    async def scenario() -> None:
        waiting = AIOKafkaConsumer(
            bootstrap_servers=kafka_bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=long_poll_ms
        )
        await waiting.start()
        try:
            waiting.assign([TopicPartition(kafka_topic, 0)])
            waiting.seek(TopicPartition(kafka_topic, 0), 0)
            assert await waiting.getmany(timeout_ms=500) == {}  # nothing yet: its fetch now waits at the broker
            async with producer(kafka_bootstrap) as client:
                for i in range(3):
                    next_record = asyncio.create_task(waiting.getone())
                    await client.send_and_wait(kafka_topic, b"live-%d" % i)
                    # Only a wake-up on append beats the 20 s the fetch may wait.
                    record = await asyncio.wait_for(next_record, long_poll_ms / 4000)
                    assert (record.offset, record.value) == (i, b"live-%d" % i)
        finally:
            await waiting.stop()

    run(scenario())
