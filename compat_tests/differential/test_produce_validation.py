"""Produce validation: every hostile payload of kafkalike.testing.hostile_batches sent to Apache
Kafka and to kafkalike, the answers compared field by field (error code, log start offset,
error_message, RecordError entries), then a valid batch and a fetch, so that what each broker
stored (nothing, for a refused batch) is compared too. The codes the catalogue states are checked
against Apache Kafka's here, so kafkalike's own tests assert Kafka's answers, not guesses."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from compat_tests.differential.conftest import Pair, assert_same
from compat_tests.differential.test_produce_fetch import fetch_body, produce_body
from kafkalike.protocol.records import iter_batches
from kafkalike.testing.hostile_batches import ACCEPTED, CASES, HostileCase, patched, valid_batch
from kafkalike.testing.wire_client import WireClient

pytestmark = pytest.mark.differential

MESSAGE = "responses[].partition_responses[].record_errors[].batch_index_error_message"
# The bounds in a timestamp message come from each broker's clock.
_RANGE = re.compile(r"within \[-?\d+, -?\d+\]")


def _partition(answer: Any) -> Any:
    return answer.responses[0].partition_responses[0]


def _messages(answer: Any) -> tuple[list[tuple[int, str]], str | None]:
    part = _partition(answer)
    errors = [(e.batch_index, _RANGE.sub("within [..]", e.batch_index_error_message)) for e in part.record_errors]
    return errors, part.error_message


def _compare_produce(pair: Pair, topic: str, case: HostileCase, records: bytes) -> Any:
    ak, kl = pair.both(0, case.api_version, produce_body(topic, records))
    # Under LogAppendTime each broker stamps its own clock.
    clock = ("responses[].partition_responses[].log_append_time_ms",) if case.configs else ()
    assert_same(ak, kl, (MESSAGE, *clock))
    assert _messages(kl) == _messages(ak)
    return ak


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_batch_gets_kafkas_answer_and_stores_nothing(
    pair: Pair, name: Callable[[str], str], case: HostileCase
) -> None:
    topic = name()
    pair.create_topic(topic, 1, case.configs)
    now_ms = int(time.time() * 1000)
    ak = _compare_produce(pair, topic, case, case.make(now_ms))
    part = _partition(ak)
    # The catalogue's answer is Apache Kafka's.
    assert (part.error_code, part.log_start_offset == 0, len(part.record_errors)) == (
        case.code,
        case.with_log_start,
        case.record_errors,
    )
    ak = _compare_produce(pair, topic, dataclasses.replace(case, api_version=9), valid_batch(now_ms, 2))
    assert _partition(ak).base_offset == 0  # nothing was stored before it
    _compare_fetch(pair, topic, case)


def test_a_fault_that_fails_the_whole_request(pair: Pair, name: Callable[[str], str]) -> None:
    """A corrupt first entry in one partition: Kafka answers every partition with it, stores nothing."""
    topic = name()
    pair.create_topic(topic, 2)
    now_ms = int(time.time() * 1000)
    body = produce_body(topic, valid_batch(now_ms))
    body["topic_data"][0]["partition_data"].append({"index": 1, "records": patched(valid_batch(now_ms), 16, ">b", 7)})
    ak, kl = pair.both(0, 9, body)
    assert_same(ak, kl)
    assert [p.error_code for p in ak.responses[0].partition_responses] == [2, 2]
    ak, kl = pair.both(1, 12, fetch_body(topic))
    assert_same(ak, kl)


def _compare_fetch(pair: Pair, topic: str, case: HostileCase) -> None:
    ak, kl = pair.both(1, 12, fetch_body(topic))
    if {"compression.type", "message.timestamp.type"} & set(case.configs):
        # Rebuilt with the topic's codec, or stamped with each broker's clock: the bytes differ, the
        # batches they describe do not.
        shapes = [
            [(h.records_count, h.last_offset_delta, h.log_append_time) for _, h in iter_batches(bytes(a.records))]
            for a in (ak.responses[0].partitions[0], kl.responses[0].partitions[0])
        ]
        assert shapes[0] == shapes[1]
        assert_same(ak, kl, ("responses[].partitions[].records",))
    else:
        assert_same(ak, kl)


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.name for c in ACCEPTED])
def test_an_odd_batch_kafka_accepts_is_stored_the_same(
    pair: Pair, name: Callable[[str], str], case: HostileCase
) -> None:
    topic = name()
    pair.create_topic(topic, 1, case.configs)
    now_ms = int(time.time() * 1000)
    ak = _compare_produce(pair, topic, case, case.make(now_ms))
    assert _partition(ak).error_code == 0
    _compare_fetch(pair, topic, case)


def test_acks_0_with_a_refused_batch_closes_the_connection(pair: Pair, name: Callable[[str], str]) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    bad = next(c for c in CASES if c.name == "garbage_zstd").make(int(time.time() * 1000))
    body = produce_body(topic, bad, acks=0)
    for side in (pair.ak, pair.kl):
        with WireClient(side.host, side.port) as client:
            client.send(0, 9, body)
            assert client.receive_frame() is None, f"{side.name} kept the connection open"


VERSIONED = ["two_batches", "garbage_gzip", "compacted_without_key", "timestamp_two_hours_ahead", "magic_7", "codec_7"]


@pytest.mark.parametrize("version", [3, 6, 7, 8, 11, 12])
@pytest.mark.parametrize("case_name", VERSIONED)
def test_hostile_batches_at_other_versions(
    pair: Pair, name: Callable[[str], str], case_name: str, version: int
) -> None:
    case = next(c for c in CASES if c.name == case_name)
    topic = name()
    pair.create_topic(topic, 1, case.configs)
    _compare_produce(pair, topic, dataclasses.replace(case, api_version=version), case.make(int(time.time() * 1000)))


def test_the_request_check_comes_before_acks(pair: Pair, name: Callable[[str], str]) -> None:
    """Two batches and acks=2: Kafka checks the records before the acks."""
    topic = name()
    pair.create_topic(topic, 2)
    now_ms = int(time.time() * 1000)
    body = produce_body(topic, valid_batch(now_ms) + valid_batch(now_ms), acks=2)
    body["topic_data"][0]["partition_data"].append({"index": 1, "records": valid_batch(now_ms)})
    ak, kl = pair.both(0, 9, body)
    assert_same(ak, kl)
    assert sorted(p.error_code for p in ak.responses[0].partition_responses) == [21, 87]
