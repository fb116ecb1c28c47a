"""Compacted topics through confluent-kafka, against broker processes of their own.

The broker's log cleaner runs in the background (log.cleaner.backoff.ms is small here); the topics
have small segments and a small min.cleanable.dirty.ratio, so it cleans while the test writes.
Tests wait for it with a bounded loop on what a consumer reads back, never a fixed sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalike.testing import BrokerProcess

TIMEOUT_S = 30
CLEANER = ("log.cleaner.backoff.ms=50",)
KEYS, VERSIONS, DELETED_AT = 200, 50, 40
Record = tuple[int, bytes | None, bytes | None]  # offset, key, value


def create_compacted_topic(bootstrap: str, topic: str, delete_retention_ms: int) -> None:
    configs = {
        "cleanup.policy": "compact",
        "internal.segment.bytes": "4096",  # tiny segments (segment.bytes is 1 MiB at least)
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(delete_retention_ms),
    }
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(TIMEOUT_S)


def key(i: int) -> bytes:
    return b"key-%03d" % i


def is_deleted(i: int) -> bool:
    return i % 5 == 0


def write_versions(bootstrap: str, topic: str, versions: int, deleted_at: int) -> dict[bytes, bytes | None]:
    """Every key, ``versions`` times over; each fifth key gets a tombstone at ``deleted_at`` and no
    record after it, so later versions of the others push the tombstones out of the active
    segment. Returns the latest value per key (None: deleted)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.num.messages": 100,  # well under the segment size even uncompressed
            "compression.type": "zstd",  # cleaned batches are re-encoded with their codec
        }
    )
    errors: list[KafkaError] = []

    def report(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            errors.append(error)

    latest: dict[bytes, bytes | None] = {}
    for version in range(versions):
        for i in range(KEYS):
            if is_deleted(i) and version > deleted_at:
                continue
            value = None if is_deleted(i) and version == deleted_at else b"value-%03d-version-%02d" % (i, version)
            while True:
                try:
                    producer.produce(topic, value, key(i), partition=0, on_delivery=report)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
            latest[key(i)] = value
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert not errors, errors[:3]
    return latest


def read_all(bootstrap: str, topic: str) -> list[Record]:
    """Everything in partition 0, from the log start to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compat-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    records: list[Record] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while True:
            assert time.monotonic() < deadline, f"no end of partition after {len(records)} records"
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                return records
            offset = message.offset()
            assert offset is not None
            records.append((offset, message.key(), message.value()))
    finally:
        consumer.close()


def latest_per_key(records: list[Record]) -> dict[bytes, bytes | None]:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    latest: dict[bytes, bytes | None] = {}
    for _, record_key, value in records:
        assert record_key is not None, "a compacted topic holds no keyless record"
        latest[record_key] = value
    return latest


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> float:
    """Check ``condition`` until it holds (failing after ``timeout_s``); when it first held."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)
    return time.monotonic()


def produce_one(bootstrap: str, topic: str, record_key: bytes | None, value: bytes) -> tuple[KafkaError | None, int]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    reports: list[tuple[KafkaError | None, int]] = []
    producer.produce(
        topic, value, record_key, partition=0, on_delivery=lambda e, m: reports.append((e, m.offset() or 0))
    )
    assert producer.flush(TIMEOUT_S) == 0
    (report,) = reports
    return report


def test_the_latest_value_per_key_survives_cleaning_and_a_restart(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    broker = kafka_broker_process(*CLEANER)
    create_compacted_topic(broker.bootstrap, kafka_topic_name, delete_retention_ms=3_600_000)
    error, _ = produce_one(broker.bootstrap, kafka_topic_name, None, b"no key")
    assert error is not None and error.code() == KafkaError.INVALID_RECORD

    expected = write_versions(broker.bootstrap, kafka_topic_name, VERSIONS, DELETED_AT)
    written = KEYS * (DELETED_AT + 1) + (KEYS - KEYS // 5) * (VERSIONS - DELETED_AT - 1)
    assert sum(value is None for value in expected.values()) == KEYS // 5

    # Cleaned: what is left is about one record per key plus the active segment's tail.
    box: list[list[Record]] = []

    def cleaned() -> bool:
        box[:] = [read_all(broker.bootstrap, kafka_topic_name)]
        return len(box[0]) < written // 5

    wait_until(cleaned, "the cleaner removed the old versions")
    (records,) = box
    # The latest value of every key, tombstones included (kept for delete.retention.ms, an hour).
    assert latest_per_key(records) == expected
    assert records[-1][0] == written - 1, "the last record of the log is never cleaned away"
    for i in range(KEYS):
        if not is_deleted(i):
            assert expected[key(i)] == b"value-%03d-version-%02d" % (i, VERSIONS - 1)

    assert broker.stop() == 0
    broker.restart()
    after = read_all(broker.bootstrap, kafka_topic_name)
    assert latest_per_key(after) == expected
    assert len(after) <= len(records), "records the cleaner removed came back"
    assert {offset for offset, _, _ in after} <= {offset for offset, _, _ in records}
    # The log goes on where it stopped, and still refuses keyless records.
    assert produce_one(broker.bootstrap, kafka_topic_name, key(1), b"after restart") == (None, written)
    error, _ = produce_one(broker.bootstrap, kafka_topic_name, None, b"no key")
    assert error is not None and error.code() == KafkaError.INVALID_RECORD


def test_deleted_keys_disappear_after_delete_retention_ms(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    delete_retention_s = 3.0
    broker = kafka_broker_process(*CLEANER)
    create_compacted_topic(broker.bootstrap, kafka_topic_name, delete_retention_ms=int(delete_retention_s * 1000))
    started = time.monotonic()
    expected = write_versions(broker.bootstrap, kafka_topic_name, versions=12, deleted_at=5)
    live = {k: v for k, v in expected.items() if v is not None}
    deleted = {k for k, v in expected.items() if v is None}
    assert len(deleted) == KEYS // 5

    # Just written: the tombstones are there (the cleaner keeps them delete.retention.ms at least).
    first = latest_per_key(read_all(broker.bootstrap, kafka_topic_name))
    assert first == expected

    box: list[dict[bytes, bytes | None]] = []

    def tombstones_gone() -> bool:
        box[:] = [latest_per_key(read_all(broker.bootstrap, kafka_topic_name))]
        return not deleted & set(box[0])

    gone = wait_until(tombstones_gone, "the tombstones were removed")
    assert gone - started >= delete_retention_s, "tombstones removed before delete.retention.ms"
    assert box[0] == live
