"""Crash recovery, restarts over many segments, and volume, against broker processes of their own."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import NewTopic as KafkaNewTopic

from compat_tests.support import consume_until
from kafkalike.testing import BrokerProcess

TIMEOUT_S = 30


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT_S)


def read_partition(bootstrap: str, topic: str, count: int, timeout_s: float) -> list[Message]:
    """Every message of partition 0 from offset 0 until ``count`` came back or the deadline passed."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compat-{topic}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
            "max.partition.fetch.bytes": 10 << 20,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[Message] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < count and time.monotonic() < deadline:
            batch = consumer.consume(num_messages=10_000, timeout=0.5)
            assert all(m.error() is None for m in batch), [m.error() for m in batch if m.error()]
            got += batch
        low_high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
    finally:
        consumer.close()
    assert low_high == (0, len(got)), f"the log holds {low_high}, {len(got)} messages were read"
    return got


class OneByOneProducer(threading.Thread):
    """Sends values 0, 1, 2... with acks=all, each only after the previous one's delivery report.

    Records each acknowledged value with its offset, and every failure; sets ``halfway`` once
    ``total // 2`` are acknowledged, and stops at ``total`` acknowledged.
    """

    def __init__(self, bootstrap: str, topic: str, total: int) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.total = total
        self.acked: list[tuple[int, int]] = []
        self.failed: list[tuple[int, KafkaError]] = []
        self.halfway = threading.Event()
        self._reports: list[tuple[KafkaError | None, int]] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": 120_000,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 200,
            }
        )

    def _report(self, error: KafkaError | None, message: Message) -> None:
        offset = message.offset()
        self._reports.append((error, -1 if offset is None else offset))

    def run(self) -> None:
        value = 0
        while len(self.acked) < self.total and not self.failed:
            self._reports.clear()
            self.producer.produce(self.topic, b"%08d" % value, partition=0, on_delivery=self._report)
            self.producer.flush(TIMEOUT_S * 4)
            ((error, offset),) = self._reports
            if error is None:
                self.acked.append((value, offset))
            else:
                self.failed.append((value, error))
            if len(self.acked) >= self.total // 2:
                self.halfway.set()
            value += 1
        self.halfway.set()


def test_acknowledged_messages_survive_kill_minus_9(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    broker = kafka_broker_process("log.flush.interval.messages=1")
    create_topic(broker.bootstrap, kafka_topic_name, 1)
    producer = OneByOneProducer(broker.bootstrap, kafka_topic_name, total=600)
    producer.start()
    assert producer.halfway.wait(TIMEOUT_S * 2)
    broker.kill()
    acked_before_kill = len(producer.acked)
    broker.restart()
    # The producer reconnects by itself; a send cut off by the kill is retried, and the
    # broker's recovered producer state must recognise it if it was already written.
    producer.join(TIMEOUT_S * 4)
    assert not producer.is_alive()
    assert not producer.failed, producer.failed
    assert acked_before_kill < producer.total
    values = [value for value, _ in producer.acked]
    assert values == list(range(producer.total))
    assert [offset for _, offset in producer.acked] == list(range(producer.total))
    got = read_partition(broker.bootstrap, kafka_topic_name, producer.total, TIMEOUT_S)
    assert [(int(m.value() or b""), m.offset()) for m in got] == producer.acked


@pytest.mark.slow
def test_a_million_small_messages(kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str) -> None:
    total = 1_000_000
    broker = kafka_broker_process()
    create_topic(broker.bootstrap, kafka_topic_name, 1)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "compression.type": "none",
            "queue.buffering.max.messages": 2 * total,
            "queue.buffering.max.kbytes": 1 << 21,
        }
    )
    errors: list[KafkaError] = []

    def report(error: KafkaError | None, _: Message) -> None:
        if error is not None:
            errors.append(error)

    for i in range(total):
        producer.produce(kafka_topic_name, b"%020d" % i, partition=0, on_delivery=report)
    assert producer.flush(TIMEOUT_S * 4) == 0
    assert not errors, errors[:5]
    got = read_partition(broker.bootstrap, kafka_topic_name, total, TIMEOUT_S * 4)
    assert len(got) == total
    assert (got[0].value(), got[-1].value()) == (b"%020d" % 0, b"%020d" % (total - 1))
    assert all(m.value() == b"%020d" % i and m.offset() == i for i, m in enumerate(got))


def test_reads_across_many_small_segments_after_a_restart(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    total = 3000
    broker = kafka_broker_process()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([KafkaNewTopic(kafka_topic_name, 1, 1, topic_configs={"internal.segment.bytes": "16384"})])
    finally:
        admin.close()
    base = int(time.time() * 1000) - 3_600_000
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    try:
        for i in range(total):
            producer.send(
                kafka_topic_name, b"%06d|" % i + b"segment payload " * 4, partition=0, timestamp_ms=base + 2 * i
            )
        producer.flush(TIMEOUT_S)
    finally:
        producer.close()
    segments = list((broker.data_dir / f"{kafka_topic_name}-0").glob("*.log"))
    assert len(segments) > 5, "the test needs many segments to mean anything"
    assert broker.stop() == 0
    broker.restart()
    tp = KafkaTopicPartition(kafka_topic_name, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        assert consumer.end_offsets([tp]) == {tp: total}
        for start in (0, 1234, total - 1):
            consumer.seek(tp, start)
            first = consume_until(lambda: consumer.poll(timeout_ms=500).get(tp, []), 1)[0]
            assert (first.offset, first.value[:7]) == (start, b"%06d|" % start)
        for i in (0, 777, 2048, total - 1):
            # Between two timestamps: the later message's offset, whichever segment it is in.
            found = consumer.offsets_for_times({tp: base + 2 * i - 1})[tp]
            assert (found.offset, found.timestamp) == (i, base + 2 * i)
        consumer.seek_to_beginning(tp)
        everything = consume_until(lambda: consumer.poll(timeout_ms=500).get(tp, []), total)
        assert [r.offset for r in everything] == list(range(total))
    finally:
        consumer.close()
