"""Exactly-once with real clients: kafka-python and confluent-kafka transactional producers,
read_committed and read_uncommitted consumers of both, a consume-transform-produce loop with
send_offsets_to_transaction, fencing by a second instance, a producer killed mid-transaction, and
a broker killed mid-commit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.structs import OffsetAndMetadata

from kafkalike.testing import BrokerProcess
from kafkalike.testing.wire_client import WireClient

TIMEOUT_S = 30
FAST_ABORTS = "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"
pytestmark = pytest.mark.compat


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT_S)


# -- readers ------------------------------------------------------------------------------------


def read_confluent(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, list[bytes]]:
    """Every value up to the end (the LSO for read_committed), by partition, in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                if message.error() is not None:
                    assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                    at_end.add(message.partition())
                else:
                    at_end.discard(message.partition())
                    out[message.partition()].append(message.value())
    finally:
        consumer.close()
    assert len(at_end) == partitions, "did not reach the end of every partition"
    return out


def read_kafka_python(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, list[bytes]]:
    """The same with kafka-python: up to the end offsets, which ListOffsets gives per isolation."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    tps = [KTopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, records in consumer.poll(500).items():
                out[tp.partition] += [r.value for r in records]
        assert all(consumer.position(tp) >= ends[tp] for tp in tps), "did not reach the end offsets"
    finally:
        consumer.close()
    return out


READERS = {"confluent": read_confluent, "kafka-python": read_kafka_python}


def last_stable_offsets(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]]:
    """(last stable offset, high watermark) of each partition, from a raw read_committed Fetch."""
    host, _, port = bootstrap.rpartition(":")
    body: dict[str, Any] = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1,
                    }
                    for p in range(partitions)
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    with WireClient(host, int(port)) as client:
        response = client.request(1, 12, body)
    return [(p.last_stable_offset, p.high_watermark) for p in response.responses[0].partitions]


def wait_until(condition: Callable[[], bool], timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


# -- producers ----------------------------------------------------------------------------------


class TxnProducer:
    """One transactional producer API over both clients."""

    def __init__(self, kind: str, bootstrap: str, txn_id: str, **config: Any) -> None:
        self.kind = kind
        if kind == "confluent":
            self.confluent = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **config})
            self.confluent.init_transactions(TIMEOUT_S)
        else:
            self.kafka = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, **config)
            self.kafka.init_transactions()

    def begin(self) -> None:
        (self.confluent if self.kind == "confluent" else self.kafka).begin_transaction()

    def send(self, topic: str, value: bytes, key: bytes | None = None, partition: int | None = None) -> None:
        if self.kind == "confluent":
            kwargs: dict[str, Any] = {} if partition is None else {"partition": partition}
            self.confluent.produce(topic, value=value, key=key, **kwargs)
            self.confluent.poll(0)
        else:
            self.kafka.send(topic, value=value, key=key, partition=partition)

    def commit(self) -> None:
        if self.kind == "confluent":
            self.confluent.commit_transaction(TIMEOUT_S)
        else:
            self.kafka.commit_transaction()

    def abort(self) -> None:
        """Abort once the records are in the log (librdkafka would drop records not yet sent)."""
        if self.kind == "confluent":
            self.confluent.flush(TIMEOUT_S)
            self.confluent.abort_transaction(TIMEOUT_S)
        else:
            self.kafka.flush()
            self.kafka.abort_transaction()

    def close(self) -> None:
        if self.kind == "confluent":
            self.confluent.flush(5)
        else:
            self.kafka.close(timeout=5)


# -- read_committed and read_uncommitted -----------------------------------------------------------


@pytest.mark.parametrize("producer_kind", ["confluent", "kafka-python"])
@pytest.mark.kafka_topic(partitions=2)
def test_read_committed_sees_committed_transactions_once_in_order(
    kafka_bootstrap: str, kafka_topic: str, producer_kind: str
) -> None:
    producer = TxnProducer(producer_kind, kafka_bootstrap, f"{kafka_topic}-tx")
    committed: dict[int, list[bytes]] = {0: [], 1: []}
    everything: dict[int, list[bytes]] = {0: [], 1: []}
    for txn in range(9):
        producer.begin()
        values = []
        for i in range(6):
            value = b"txn%d-%d" % (txn, i)
            producer.send(kafka_topic, value, partition=i % 2)
            values.append((i % 2, value))
        aborted = txn % 3 == 1
        producer.abort() if aborted else producer.commit()
        for partition, value in values:
            everything[partition].append(value)
            if not aborted:
                committed[partition].append(value)
    producer.close()
    for name, read in READERS.items():
        assert read(kafka_bootstrap, kafka_topic, 2, "read_committed") == committed, name
        assert read(kafka_bootstrap, kafka_topic, 2, "read_uncommitted") == everything, name


# -- consume, transform, produce ------------------------------------------------------------------


def _fill_input(bootstrap: str, topic: str, count: int) -> None:
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        plain.produce(topic, key=b"key-%d" % (i % 5), value=b"%d" % i)
    plain.flush(TIMEOUT_S)


def _check_output(bootstrap: str, output: str, count: int) -> None:
    """Each input exactly once in the committed output, and per key in input order."""
    got = read_confluent(bootstrap, output, 2, "read_committed")
    values = [int(v.split(b":")[1]) for vs in got.values() for v in vs]
    assert sorted(values) == list(range(count))
    for vs in got.values():
        by_key: dict[bytes, list[int]] = defaultdict(list)
        for v in vs:
            key, index = v.split(b":")
            by_key[key].append(int(index))
        assert all(indexes == sorted(indexes) for indexes in by_key.values())
    dirty = read_confluent(bootstrap, output, 2, "read_uncommitted")
    assert sum(map(len, dirty.values())) > count  # the aborted attempts are in the log


def test_consume_transform_produce_confluent(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    source, output, group, count = f"{kafka_topic_name}-in", f"{kafka_topic_name}-out", f"{kafka_topic_name}-g", 60
    create_topic(kafka_bootstrap, source, 2)
    create_topic(kafka_bootstrap, output, 2)
    _fill_input(kafka_bootstrap, source, count)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"{kafka_topic_name}-ctp"})
    producer.init_transactions(TIMEOUT_S)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "session.timeout.ms": 10_000,
        }
    )
    consumer.subscribe([source])
    done, attempt = 0, 0
    deadline = time.monotonic() + 60
    try:
        while done < count and time.monotonic() < deadline:
            messages = [m for m in consumer.consume(7, 0.5) if m.error() is None]
            if not messages:
                continue
            attempt += 1
            producer.begin_transaction()
            for m in messages:
                producer.produce(output, key=m.key(), value=m.key() + b":" + m.value())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT_S)
            if attempt % 4 == 0:  # fail this batch: abort (once it is in the log), and read it again
                producer.flush(TIMEOUT_S)
                producer.abort_transaction(TIMEOUT_S)
                for tp in {(m.topic(), m.partition()) for m in messages}:
                    first = min(m.offset() for m in messages if (m.topic(), m.partition()) == tp)
                    consumer.seek(TopicPartition(tp[0], tp[1], first))
                continue
            producer.commit_transaction(TIMEOUT_S)
            done += len(messages)
        committed = consumer.committed([TopicPartition(source, p) for p in range(2)], TIMEOUT_S)
    finally:
        consumer.close()
    assert done == count
    assert sum(tp.offset for tp in committed) == count
    _check_output(kafka_bootstrap, output, count)


def test_consume_transform_produce_kafka_python(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    source, output, group, count = f"{kafka_topic_name}-in", f"{kafka_topic_name}-out", f"{kafka_topic_name}-g", 60
    create_topic(kafka_bootstrap, source, 2)
    create_topic(kafka_bootstrap, output, 2)
    _fill_input(kafka_bootstrap, source, count)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"{kafka_topic_name}-ctp")
    producer.init_transactions()
    consumer = KafkaConsumer(
        source,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
        max_poll_records=7,
    )
    done, attempt = 0, 0
    deadline = time.monotonic() + 60
    try:
        while done < count and time.monotonic() < deadline:
            polled = consumer.poll(500)
            records = [r for rs in polled.values() for r in rs]
            if not records:
                continue
            attempt += 1
            producer.begin_transaction()
            for r in records:
                producer.send(output, key=r.key, value=r.key + b":" + r.value)
            offsets = {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in polled}
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            if attempt % 4 == 0:
                producer.flush()
                producer.abort_transaction()
                for tp, rs in polled.items():
                    consumer.seek(tp, rs[0].offset)
                continue
            producer.commit_transaction()
            done += len(records)
        committed = [consumer.committed(KTopicPartition(source, p)) for p in range(2)]
    finally:
        consumer.close()
        producer.close(timeout=5)
    assert done == count
    assert sum(c or 0 for c in committed) == count
    _check_output(kafka_bootstrap, output, count)


# -- fencing --------------------------------------------------------------------------------------


@pytest.mark.kafka_topic(partitions=1)
def test_a_second_confluent_producer_fences_the_first(kafka_bootstrap: str, kafka_topic: str) -> None:
    first = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"{kafka_topic}-tx"})
    first.init_transactions(TIMEOUT_S)
    first.begin_transaction()
    first.produce(kafka_topic, value=b"zombie")
    first.flush(TIMEOUT_S)
    second = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"{kafka_topic}-tx"})
    second.init_transactions(TIMEOUT_S)  # aborts the first one's transaction
    second.begin_transaction()
    second.produce(kafka_topic, value=b"live")
    second.commit_transaction(TIMEOUT_S)
    with pytest.raises(KafkaException) as failure:
        first.produce(kafka_topic, value=b"zombie-2")
        first.commit_transaction(TIMEOUT_S)
    assert failure.value.args[0].fatal() or failure.value.args[0].code() == KafkaError._FENCED
    assert read_confluent(kafka_bootstrap, kafka_topic, 1, "read_committed") == {0: [b"live"]}


@pytest.mark.kafka_topic(partitions=1)
def test_a_second_kafka_python_producer_fences_the_first(kafka_bootstrap: str, kafka_topic: str) -> None:
    first = KafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"{kafka_topic}-tx")
    first.init_transactions()
    first.begin_transaction()
    first.send(kafka_topic, b"zombie").get(TIMEOUT_S)
    second = KafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"{kafka_topic}-tx")
    second.init_transactions()
    second.begin_transaction()
    second.send(kafka_topic, b"live")
    second.commit_transaction()
    with pytest.raises(Exception) as failure:
        first.send(kafka_topic, b"zombie-2").get(TIMEOUT_S)
        first.commit_transaction()
    assert "Fenced" in type(failure.value).__name__ or "EPOCH" in str(failure.value).upper()
    first.close(timeout=1)
    second.close(timeout=5)
    assert read_kafka_python(kafka_bootstrap, kafka_topic, 1, "read_committed") == {0: [b"live"]}


# -- a producer killed mid-transaction --------------------------------------------------------------

_HANGING_PRODUCER = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, txn_id = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 2000})
p.init_transactions(30)
p.begin_transaction()
for i in range(5):
    p.produce(topic, value=b"killed-%d" % i, partition=0)
p.flush(30)
print("READY", flush=True)
time.sleep(600)
"""


def test_a_killed_producer_s_transaction_is_aborted_after_its_timeout(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    broker = kafka_broker_process(FAST_ABORTS)
    create_topic(broker.bootstrap, kafka_topic_name, 1)
    child = subprocess.Popen(
        [sys.executable, "-c", _HANGING_PRODUCER, broker.bootstrap, kafka_topic_name, "hanging"],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "READY"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
    killed_at = time.monotonic()
    later = TxnProducer("kafka-python", broker.bootstrap, "later")
    later.begin()
    later.send(kafka_topic_name, b"after", partition=0)
    later.commit()
    later.close()
    assert last_stable_offsets(broker.bootstrap, kafka_topic_name, 1)[0][0] == 0  # held by the open transaction
    wait_until(lambda: last_stable_offsets(broker.bootstrap, kafka_topic_name, 1)[0][0] > 0)
    assert time.monotonic() - killed_at < 15
    for name, read in READERS.items():
        assert read(broker.bootstrap, kafka_topic_name, 1, "read_committed") == {0: [b"after"]}, name
        uncommitted = read(broker.bootstrap, kafka_topic_name, 1, "read_uncommitted")[0]
        assert uncommitted == [b"killed-%d" % i for i in range(5)] + [b"after"], name
    # The id is usable again: a new instance starts at a later epoch.
    TxnProducer("confluent", broker.bootstrap, "hanging").close()


# -- a broker killed mid-commit -------------------------------------------------------------------

SPREAD = 30  # partitions per transaction: their markers take the broker a while to write
_LOOPING_PRODUCER = f"""
import sys
from confluent_kafka import Producer
bootstrap, topic, txn_id, first = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
p = Producer({{"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 3000,
              "linger.ms": 0}})
p.init_transactions(30)
n = first
while True:
    p.begin_transaction()
    for i in range({SPREAD}):
        p.produce(topic, value=b"%d-%d" % (n, i), partition=i)
    p.flush(30)
    print("COMMITTING", n, flush=True)
    p.commit_transaction(30)
    print("COMMITTED", n, flush=True)
    n += 1
"""


def _run_and_kill(broker: BrokerProcess, topic: str, first: int, kill_on: str, acknowledged: set[int]) -> None:
    """Run the looping producer from transaction ``first``; SIGKILL the broker when it prints
    ``kill_on`` for the third transaction (COMMITTING: the EndTxn is on its way; COMMITTED: the
    broker answered and is writing the markers), then the producer."""
    child = subprocess.Popen(
        [sys.executable, "-c", _LOOPING_PRODUCER, broker.bootstrap, topic, "looping", str(first)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        assert child.stdout is not None
        for line in child.stdout:
            word, n = line.split()
            if word == kill_on and int(n) >= first + 2:
                broker.kill()
                if word == "COMMITTED":
                    acknowledged.add(int(n))
                break
            if word == "COMMITTED":
                acknowledged.add(int(n))
    finally:
        child.kill()
        child.wait(10)
        if child.stdout is not None:
            child.stdout.close()


@pytest.mark.slow
def test_a_broker_killed_mid_commit_recovers_to_whole_transactions(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    broker = kafka_broker_process(FAST_ABORTS)
    create_topic(broker.bootstrap, kafka_topic_name, SPREAD)
    acknowledged: set[int] = set()
    completed_at_start = 0
    for cycle, kill_on in enumerate(["COMMITTING", "COMMITTED", "COMMITTED", "COMMITTING", "COMMITTED"]):
        if kill_on == "COMMITTED" and cycle > 2 and completed_at_start:
            continue  # a commit was already caught half-way: enough
        _run_and_kill(broker, kafka_topic_name, cycle * 100, kill_on, acknowledged)
        since = len(broker.output)
        broker.restart()
        completed_at_start += sum("1 to complete" in line for line in broker.output[since:])
        # Whatever was left open times out (3 s); what was prepared was completed at start-up.
        wait_until(
            lambda: all(lso == hw for lso, hw in last_stable_offsets(broker.bootstrap, kafka_topic_name, SPREAD))
        )
        _check_whole_transactions(broker.bootstrap, kafka_topic_name, acknowledged)
    assert completed_at_start, "no kill landed between PrepareCommit and CompleteCommit"


def _check_whole_transactions(bootstrap: str, topic: str, acknowledged: set[int]) -> None:
    got = read_confluent(bootstrap, topic, SPREAD, "read_committed")
    parts: dict[int, set[int]] = defaultdict(set)
    for partition, values in got.items():
        numbers = [int(v.split(b"-")[0]) for v in values]
        assert numbers == sorted(numbers), f"partition {partition} out of order"
        for v in values:
            n, i = map(int, v.split(b"-"))
            assert i == partition
            assert i not in parts[n], f"transaction {n} record {i} twice"
            parts[n].add(i)
    half = {n: sorted(items) for n, items in parts.items() if len(items) != SPREAD}
    assert not half, f"transactions seen in part: {half}"
    assert acknowledged <= set(parts), f"acknowledged commits missing: {sorted(acknowledged - set(parts))}"


# -- aiokafka ---------------------------------------------------------------------------------------


@pytest.mark.kafka_topic(partitions=1)
def test_aiokafka_transactions(kafka_bootstrap: str, kafka_topic: str) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"{kafka_topic}-aio")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(kafka_topic, b"c1", partition=0)
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    await producer.send_and_wait(kafka_topic, b"aborted", partition=0)
                    raise RuntimeError("abort this one")
            async with producer.transaction():
                await producer.send_and_wait(kafka_topic, b"c2", partition=0)
        finally:
            await producer.stop()

    asyncio.run(produce())
    for name, read in READERS.items():
        assert read(kafka_bootstrap, kafka_topic, 1, "read_committed") == {0: [b"c1", b"c2"]}, name
        assert read(kafka_bootstrap, kafka_topic, 1, "read_uncommitted") == {0: [b"c1", b"aborted", b"c2"]}, name
