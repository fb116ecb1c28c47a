"""Real clients against a 3-node kafkalike cluster (``KafkalikeCluster(3)``) while a broker is
SIGKILLed and started again: nothing a producer had acknowledged is lost or duplicated.

- each client (librdkafka through confluent-kafka and kcat, kafka-python, aiokafka) produces to a
  6-partition RF=3 topic with min.insync.replicas=2, acks=all, idempotent, retrying; a broker
  leading some partitions is killed with records in flight and started again while it keeps
  producing (``Outage``); the client reads everything back: every acknowledged record once, each
  partition in send order;
- a consumer group whose coordinator's broker is killed keeps its committed offsets: the member
  that was consuming commits again through the new coordinator, and a new member resumes after
  the last commit;
- a transactional producer whose coordinator's broker is killed mid-transaction commits it
  through the new coordinator; an aborted transaction stays invisible to read_committed, and a
  new producer with the same transactional id fences the old one and continues.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonTopicPartition

from compat_tests.failover_support import (
    GROUP_KEY,
    PARTITIONS,
    TRANSACTION_KEY,
    WAIT_S,
    Cluster,
    Outage,
    check_acked_records,
    controller_leading,
    every_broker,
    index_of,
    key_coordinated_by_a_follower,
    kill,
    leader_to_kill,
    read_all,
    replicated_topic,
    restart,
    running_cluster,
    value_of,
    wait_for_coordinator_move,
    wait_for_leaders,
    wait_in_sync,
)
from kafkalike.testing.process_cluster import KafkalikeCluster

pytestmark = pytest.mark.compat
T = TypeVar("T")
DELIVERY_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkalikeCluster]:
    yield from running_cluster(tmp_path_factory.mktemp("failover"))


def confluent_through_an_outage(cluster: KafkalikeCluster, topic: str, victim: Callable[[Cluster, str], int]) -> None:
    replicated_topic(cluster, topic)
    producer = Producer(
        {
            "bootstrap.servers": every_broker(cluster),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
        }
    )
    acked: list[bytes] = []
    failed: list[str] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            acked.append(message.value() or b"")

    def send(i: int) -> None:
        producer.produce(topic, value_of("confluent", i), partition=i % PARTITIONS, on_delivery=delivered)
        producer.poll(0)

    def flush() -> None:
        assert producer.flush(WAIT_S) == 0
        assert failed == []

    outage = Outage(cluster, topic, victim=victim)
    outage.run(send, flush)
    assert len(acked) == outage.count
    check_acked_records(acked, read_all(cluster, topic, outage.count))


def test_confluent_kafka_loses_no_acknowledged_record_when_a_leader_dies(cluster: KafkalikeCluster) -> None:
    confluent_through_an_outage(cluster, "failover-confluent", leader_to_kill)


def test_confluent_kafka_loses_no_acknowledged_record_when_the_controller_and_leader_dies(
    cluster: KafkalikeCluster,
) -> None:
    """The node killed is the active controller as well: a new quorum leader is elected, then
    it fences the dead node and moves its partitions' leadership."""
    confluent_through_an_outage(cluster, "failover-controller", controller_leading)


def test_kafka_python_loses_no_acknowledged_record_when_a_leader_dies(cluster: KafkalikeCluster) -> None:
    topic = "failover-kafka-python"
    replicated_topic(cluster, topic)
    producer = KafkaProducer(
        bootstrap_servers=every_broker(cluster),
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        request_timeout_ms=20_000,
    )
    pending: list[Any] = []
    acked: list[bytes] = []

    def send(i: int) -> None:
        value = value_of("kafka-python", i)
        pending.append((value, producer.send(topic, value, partition=i % PARTITIONS)))

    def flush() -> None:
        producer.flush(WAIT_S)
        for value, future in pending:
            future.get(0)  # raises what the delivery failed with
            acked.append(value)
        pending.clear()

    outage = Outage(cluster, topic)
    try:
        outage.run(send, flush)
    finally:
        producer.close(WAIT_S)
    consumer = KafkaConsumer(bootstrap_servers=every_broker(cluster), enable_auto_commit=False)
    partitions = [KafkaPythonTopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    consumer.seek_to_beginning()
    read: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(read) < len(acked) and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                read += [(r.partition, r.offset, r.value) for r in records]
        ends = consumer.end_offsets(partitions)
    finally:
        consumer.close()
    assert sum(ends.values()) == len(read), ends  # nothing left unread past the records counted
    check_acked_records(acked, read)


class LoopThread:
    """An asyncio loop of its own thread, so that blocking steps (killing a broker) can run between
    the coroutines a test hands it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(WAIT_S)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_S)
        self.loop.close()


def test_aiokafka_loses_no_acknowledged_record_when_a_leader_dies(cluster: KafkalikeCluster) -> None:
    topic = "failover-aiokafka"
    replicated_topic(cluster, topic)
    loop = LoopThread()
    pending: list[tuple[bytes, concurrent.futures.Future[Any]]] = []
    acked: list[bytes] = []

    async def started_producer() -> AIOKafkaProducer:
        producer = AIOKafkaProducer(
            bootstrap_servers=every_broker(cluster),
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=DELIVERY_TIMEOUT_MS,
        )
        await producer.start()
        return producer

    async def read_back() -> list[tuple[int, int, bytes]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=every_broker(cluster), enable_auto_commit=False)
        await consumer.start()
        try:
            partitions = [AioTopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(partitions)
            await consumer.seek_to_beginning()
            read: list[tuple[int, int, bytes]] = []
            deadline = time.monotonic() + WAIT_S
            while len(read) < len(acked) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    read += [(r.partition, r.offset, r.value or b"") for r in records]
            ends = await consumer.end_offsets(partitions)
            assert sum(ends.values()) == len(read), ends
            return read
        finally:
            await consumer.stop()

    try:
        producer = loop.run(started_producer())

        def send(i: int) -> None:
            value = value_of("aiokafka", i)
            # send() itself is a coroutine that returns the delivery's future once the record is queued.
            queued = loop.run(producer.send(topic, value, partition=i % PARTITIONS))
            pending.append((value, asyncio.run_coroutine_threadsafe(asyncio.wait_for(queued, WAIT_S), loop.loop)))

        def flush() -> None:
            for value, delivery in pending:
                delivery.result(WAIT_S)
                acked.append(value)
            pending.clear()

        try:
            Outage(cluster, topic).run(send, flush)
        finally:
            loop.run(producer.stop())
        check_acked_records(acked, loop.run(read_back()))
    finally:
        loop.close()


def confluent_consumer(cluster: KafkalikeCluster, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": every_broker(cluster),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


def consume(consumer: Consumer, count: int) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(count - len(got), 0.5):
            assert message.error() is None, message.error()
            got.append(message)
    assert len(got) == count, f"{len(got)} of {count} records consumed"
    return got


def commit(consumer: Consumer, messages: list[Message]) -> None:
    """A synchronous commit of every consumed record, retried while the group's coordinator moves
    (librdkafka returns the retriable error to the application instead of retrying a sync commit)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            consumer.commit(asynchronous=False)
            return
        except KafkaException as failure:
            error = failure.args[0]
            if not error.retriable() or time.monotonic() > deadline:
                raise
        consumer.poll(0.2)


def test_a_consumer_group_keeps_its_offsets_when_its_coordinator_dies(cluster: KafkalikeCluster) -> None:
    topic = "failover-group"
    replicated_topic(cluster, topic)
    producer = Producer({"bootstrap.servers": every_broker(cluster), "acks": "all"})
    for i in range(60):
        producer.produce(topic, value_of("group", i), partition=i % PARTITIONS)
    assert producer.flush(WAIT_S) == 0
    # The first FindCoordinator has __consumer_offsets made (if no test made it before).
    group, old_coordinator = key_coordinated_by_a_follower(cluster, "failover-group", GROUP_KEY)
    wait_in_sync(cluster, "__consumer_offsets")

    member = confluent_consumer(cluster, group)
    member.subscribe([topic])
    try:
        first = consume(member, 30)
        commit(member, first)
        kill(cluster, old_coordinator)
        new_coordinator = wait_for_coordinator_move(cluster, group, GROUP_KEY, old_coordinator)
        # The member goes on: it consumes the rest and commits through the new coordinator.
        rest = consume(member, 30)
        commit(member, rest)
    finally:
        member.close()
    assert sorted(index_of(m.value() or b"") for m in first + rest) == list(range(60))

    for i in range(60, 72):
        producer.produce(topic, value_of("group", i), partition=i % PARTITIONS)
    assert producer.flush(WAIT_S) == 0
    restart(cluster, old_coordinator)
    # A new member resumes after the commits made while the old coordinator was down.
    successor = confluent_consumer(cluster, group)
    successor.subscribe([topic])
    try:
        resumed = consume(successor, 12)
        assert successor.consume(100, 1.0) == []
    finally:
        successor.close()
    assert sorted(index_of(m.value() or b"") for m in resumed) == list(range(60, 72))
    assert new_coordinator != old_coordinator
    wait_in_sync(cluster, topic, "__consumer_offsets")


def transactional_producer(cluster: KafkalikeCluster, transactional_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": every_broker(cluster),
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60_000,
        }
    )
    producer.init_transactions(WAIT_S)
    return producer


def test_transactions_survive_the_death_of_their_coordinator(cluster: KafkalikeCluster) -> None:
    topic = "failover-transactions"
    replicated_topic(cluster, topic)
    # The first transactional producer has __transaction_state made; then the ids spread.
    transactional_producer(cluster, "failover-first")
    wait_in_sync(cluster, "__transaction_state")
    transactional_id, old_coordinator = key_coordinated_by_a_follower(cluster, "failover-txn", TRANSACTION_KEY)
    producer = transactional_producer(cluster, transactional_id)
    producer.begin_transaction()
    for i in range(PARTITIONS):
        producer.produce(topic, b"committed-before-%d" % i, partition=i)
    producer.commit_transaction(WAIT_S)
    producer.begin_transaction()
    for i in range(PARTITIONS):
        producer.produce(topic, b"aborted-%d" % i, partition=i)
    producer.abort_transaction(WAIT_S)

    # A transaction open when its coordinator's broker dies is committed through the next one.
    producer.begin_transaction()
    for i in range(PARTITIONS):
        producer.produce(topic, b"committed-across-%d" % i, partition=i)
    assert producer.flush(WAIT_S) == 0
    kill(cluster, old_coordinator)
    producer.commit_transaction(WAIT_S)
    assert wait_for_coordinator_move(cluster, transactional_id, TRANSACTION_KEY, old_coordinator) != old_coordinator

    # A new producer with the same id fences the old one, whose next transaction fails.
    successor = transactional_producer(cluster, transactional_id)
    with pytest.raises(KafkaException) as fenced:
        producer.begin_transaction()
        producer.produce(topic, b"from-the-fenced-producer", partition=0)
        producer.commit_transaction(WAIT_S)
    assert fenced.value.args[0].fatal() or fenced.value.args[0].txn_requires_abort(), fenced.value
    successor.begin_transaction()
    for i in range(PARTITIONS):
        successor.produce(topic, b"committed-by-successor-%d" % i, partition=i)
    successor.commit_transaction(WAIT_S)
    restart(cluster, old_coordinator)
    wait_in_sync(cluster, topic, "__transaction_state")

    committed = [
        b"%s-%d" % (what, i)
        for what in (b"committed-before", b"committed-across", b"committed-by-successor")
        for i in range(PARTITIONS)
    ]
    read = read_all(cluster, topic, len(committed), isolation="read_committed")
    assert sorted(value for _, _, value in read) == sorted(committed)


def test_kcat_loses_no_acknowledged_record_when_a_leader_dies(cluster: KafkalikeCluster) -> None:
    """kcat -P reads values from stdin as they come: a third before the kill, a third while the
    broker is down, a third after its restart; its exit status 0 says every one was delivered
    (a failed delivery is reported and makes it exit 1). kcat -C -e then reads them back."""
    topic = "failover-kcat"
    replicated_topic(cluster, topic)
    count = 300
    third = count // 3
    settings = ["-X", "acks=all", "-X", "enable.idempotence=true", "-X", f"message.timeout.ms={DELIVERY_TIMEOUT_MS}"]
    producer = subprocess.Popen(
        ["kcat", "-b", every_broker(cluster), "-P", "-t", topic, "-K", ":", *settings],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert producer.stdin is not None

    def send(first: int, last: int) -> None:
        # Keyed by index, spread over the partitions by librdkafka's partitioner.
        lines = "".join(f"key-{i}:{value_of('kcat', i).decode()}\n" for i in range(first, last))
        producer.stdin.write(lines)  # type: ignore[union-attr]
        producer.stdin.flush()  # type: ignore[union-attr]

    victim = leader_to_kill(cluster, topic)
    try:
        send(0, third)
        kill(cluster, victim)
        send(third, 2 * third)
        wait_for_leaders(cluster, topic, excluding=victim)
        restart(cluster, victim)
        send(2 * third, count)
        _, errors = producer.communicate(timeout=WAIT_S * 2)
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait(WAIT_S)
    assert producer.returncode == 0, errors
    assert "Delivery failed" not in errors, errors
    wait_in_sync(cluster, topic)
    consumed = subprocess.run(
        ["kcat", "-b", every_broker(cluster), "-C", "-t", topic, "-e", "-J", "-o", "beginning"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=True,
    )
    read = [
        (message["partition"], message["offset"], message["payload"].encode())
        for message in map(json.loads, consumed.stdout.splitlines())
        if "payload" in message
    ]
    check_acked_records([value_of("kcat", i) for i in range(count)], read)
