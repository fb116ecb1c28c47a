"""Produce and Fetch: the same bytes back at every version, and the edge cases: a corrupt CRC, an
unknown topic or partition, a batch too large, an offset out of range, bad acks, idempotence."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from compat_tests.differential.conftest import Pair, Side, assert_same
from kafkalike.protocol.records import Record, build_batch

pytestmark = pytest.mark.differential

BASE_TIMESTAMP = 1_700_000_000_000
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE = 14, 15


def batch(count: int = 5, start: int = 0, **kwargs: Any) -> bytes:
    records = [
        Record(
            key=b"key-%d" % (start + i),
            value=b"value-%d" % (start + i),
            timestamp_delta=10 * i,
            headers=[("h", b"%d" % i)],
        )
        for i in range(count)
    ]
    return build_batch(records, base_timestamp=BASE_TIMESTAMP + 1000 * start, **kwargs)


def produce_body(topic: str, records: bytes | None, partition: int = 0, acks: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def fetch_body(
    topic: str, offset: int = 0, partition: int = 0, max_bytes: int = 1 << 20
) -> Callable[[Side], dict[str, Any]]:
    def make(side: Side) -> dict[str, Any]:
        return {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": 50 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "topic_id": side.topic_ids.get(topic),
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": max_bytes,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    return make


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9, 11, 12])
def test_produce_at_every_version(pair: Pair, name: Callable[[str], str], version: int) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    for start in (0, 5):
        ak, kl = pair.both(0, version, produce_body(topic, batch(5, start)))
        assert_same(ak, kl)


@pytest.mark.parametrize("version", [4, 5, 7, 11, 12, 13, 15, 16, 17])
def test_fetch_at_every_version_returns_the_same_bytes(pair: Pair, name: Callable[[str], str], version: int) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    pair.both(0, 9, produce_body(topic, batch(5, 0)))
    pair.both(0, 9, produce_body(topic, batch(3, 5, compression=1)))
    for offset in (0, 2, 5, 8):
        ak, kl = pair.both(1, version, fetch_body(topic, offset))
        assert_same(ak, kl)


def test_a_corrupt_crc_is_refused(pair: Pair, name: Callable[[str], str]) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    corrupt = bytearray(batch(3))
    corrupt[-1] ^= 0xFF
    ak, kl = pair.both(0, 9, produce_body(topic, bytes(corrupt)))
    assert_same(ak, kl)
    ak, kl = pair.both(1, 12, fetch_body(topic))
    assert_same(ak, kl)


def test_an_unknown_partition_or_topic(pair: Pair, name: Callable[[str], str]) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    for target, partition in ((topic, 7), (name("missing"), 0)):
        ak, kl = pair.both(0, 9, produce_body(target, batch(1), partition))
        assert_same(ak, kl)
        ak, kl = pair.both(1, 12, fetch_body(target, 0, partition))
        assert_same(ak, kl)


def test_a_batch_larger_than_max_message_bytes(pair: Pair, name: Callable[[str], str]) -> None:
    topic = name()
    pair.create_topic(topic, 1, {"max.message.bytes": "1024"})
    big = build_batch([Record(value=b"x" * 4096)], base_timestamp=BASE_TIMESTAMP)
    ak, kl = pair.both(0, 9, produce_body(topic, big))
    assert_same(ak, kl)
    ak, kl = pair.both(0, 9, produce_body(topic, batch(2)))
    assert_same(ak, kl)


def test_a_batch_larger_than_segment_bytes(pair: Pair, name: Callable[[str], str]) -> None:
    """Within max.message.bytes but past the segment size: no segment could hold it (1 KiB segments:
    segment.bytes on 4.0.2, internal.segment.bytes here, as on 4.1+)."""
    topic = name()
    pair.create_topic_with_tiny_segments(topic, 1024)
    big = build_batch([Record(value=b"x" * 4096)], base_timestamp=BASE_TIMESTAMP)
    ak, kl = pair.both(0, 9, produce_body(topic, big))
    assert_same(ak, kl)
    ak, kl = pair.both(0, 9, produce_body(topic, batch(2)))
    assert_same(ak, kl)


@pytest.mark.parametrize("offset", [100, 6, -5])
def test_a_fetch_offset_out_of_range(pair: Pair, name: Callable[[str], str], offset: int) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    pair.both(0, 9, produce_body(topic, batch(5)))
    ak, kl = pair.both(1, 12, fetch_body(topic, offset))
    assert_same(ak, kl)


def test_a_fetch_smaller_than_the_first_batch_still_returns_it(pair: Pair, name: Callable[[str], str]) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    pair.both(0, 9, produce_body(topic, batch(5)))
    pair.both(0, 9, produce_body(topic, batch(5, 5)))
    ak, kl = pair.both(1, 12, fetch_body(topic, 0, max_bytes=10))
    assert_same(ak, kl)


def test_a_fetch_by_an_unknown_topic_id(pair: Pair, name: Callable[[str], str]) -> None:
    import uuid

    topic = name("unknown-id")
    for side in (pair.ak, pair.kl):
        side.topic_ids[topic] = uuid.uuid4()
    ak, kl = pair.both(1, 13, fetch_body(topic))
    assert_same(ak, kl)


@pytest.mark.parametrize("acks", [2, -2])
def test_invalid_acks(pair: Pair, name: Callable[[str], str], acks: int) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    ak, kl = pair.both(0, 9, produce_body(topic, batch(1), acks=acks))
    assert_same(ak, kl)


def test_a_batch_with_a_nonzero_base_offset(pair: Pair, name: Callable[[str], str]) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    ak, kl = pair.both(0, 9, produce_body(topic, batch(2, base_offset=7)))
    assert_same(ak, kl)


def test_no_records(pair: Pair, name: Callable[[str], str]) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    ak, kl = pair.both(0, 9, produce_body(topic, b""))
    assert_same(ak, kl)


# Apache Kafka answers a duplicate batch with log_append_time_ms set to the original batch's max
# timestamp, even under CreateTime (FINDINGS.md); compared on its own below.
DUPLICATE_TIME = ("responses[].partition_responses[].log_append_time_ms",)
SEQUENCES = ((0, 3), (3, 2), (3, 2), (0, 3), (9, 1), (5, 1))


def test_idempotent_duplicates_and_gaps(pair: Pair, name: Callable[[str], str]) -> None:
    for ak, kl in idempotent_answers(pair, name(), SEQUENCES):
        assert_same(ak, kl, DUPLICATE_TIME)


def test_a_duplicate_batch_reports_the_original_timestamp(pair: Pair, name: Callable[[str], str]) -> None:
    for ak, kl in idempotent_answers(pair, name(), ((0, 3), (0, 3))):
        assert_same(ak, kl)


def idempotent_answers(pair: Pair, topic: str, sequences: tuple[tuple[int, int], ...]) -> list[tuple[Any, Any]]:
    pair.create_topic(topic, 1)
    init = {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    ids = {}
    for side in (pair.ak, pair.kl):
        deadline = time.monotonic() + 30
        response = side.request(22, 4, init)
        # Apache Kafka's coordinator may still be loading just after start-up: retry that.
        while (
            response.error_code in (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE)
            and time.monotonic() < deadline
        ):
            time.sleep(0.2)
            response = side.request(22, 4, init)
        assert response.error_code == 0, (side.name, response)
        ids[side.name] = response.producer_id

    def idempotent(sequence: int, count: int) -> Callable[[Side], dict[str, Any]]:
        def make(side: Side) -> dict[str, Any]:
            records = batch(count, sequence, producer_id=ids[side.name], producer_epoch=0, base_sequence=sequence)
            return produce_body(topic, records)

        return make

    return [pair.both(0, 9, idempotent(sequence, count)) for sequence, count in sequences]


def _with_leader_epoch(make: Callable[[Side], dict[str, Any]], epoch: int) -> Callable[[Side], dict[str, Any]]:
    def with_epoch(side: Side) -> dict[str, Any]:
        body = make(side)
        body["topics"][0]["partitions"][0]["current_leader_epoch"] = epoch
        return body

    return with_epoch


@pytest.mark.parametrize("version", [9, 12, 13])
def test_a_fetch_naming_a_leader_epoch_the_broker_does_not_know(
    pair: Pair, name: Callable[[str], str], version: int
) -> None:
    """A new topic's leader epoch is 0: epoch 0 reads, epoch 1 is UNKNOWN_LEADER_EPOCH with the
    offsets unknown (-1), as Kafka's checkCurrentLeaderEpoch and createLogReadResult answer."""
    topic = name()
    pair.create_topic(topic, 1)
    pair.both(0, 9, produce_body(topic, batch(3)))
    for epoch in (0, 1):
        ak, kl = pair.both(1, version, _with_leader_epoch(fetch_body(topic), epoch))
        assert_same(ak, kl)
