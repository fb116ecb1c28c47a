"""ListOffsets: earliest, latest, max timestamp and by timestamp, on an empty and a filled partition;
each special timestamp at every version, those not yet defined at it too (UNSUPPORTED_VERSION)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from compat_tests.differential.conftest import AK_VERSION, Pair, assert_same
from compat_tests.differential.test_produce_fetch import BASE_TIMESTAMP, batch, produce_body

pytestmark = pytest.mark.differential

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
# v11 (the earliest offset pending upload, KIP-1023) is served since Kafka 4.2.
VERSIONS = [1, 2, 4, 5, 6, 7, 8, 9, 10, *([11] if AK_VERSION >= (4, 2) else [])]


def list_body(topic: str, timestamp: int, partition: int = 0, isolation: int = 0) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "isolation_level": isolation,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}],
            }
        ],
    }


TARGETS = {
    "latest": LATEST,
    "earliest": EARLIEST,
    "max-timestamp": MAX_TIMESTAMP,
    "earliest-local": EARLIEST_LOCAL,
    "latest-tiered": LATEST_TIERED,
    "earliest-pending-upload": EARLIEST_PENDING_UPLOAD,
    "no-such-special": -7,
    "before-all": BASE_TIMESTAMP - 1000,
    "exact-first": BASE_TIMESTAMP,
    "between": BASE_TIMESTAMP + 15,
    "second-batch": BASE_TIMESTAMP + 5000,
    "exact-last": BASE_TIMESTAMP + 5020,
    "after-all": BASE_TIMESTAMP + 999_999,
}


@pytest.fixture
def filled(pair: Pair, name: Callable[[str], str]) -> str:
    topic = name()
    pair.create_topic(topic, 1)
    pair.both(0, 9, produce_body(topic, batch(5, 0)))
    pair.both(0, 9, produce_body(topic, batch(3, 5, compression=3)))
    return topic


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("target", list(TARGETS))
def test_a_filled_partition(pair: Pair, filled: str, target: str, version: int) -> None:
    ak, kl = pair.both(2, version, list_body(filled, TARGETS[target]))
    assert_same(ak, kl)


@pytest.mark.parametrize("version", [1, 7, 10])
def test_a_special_timestamp_not_yet_defined_comes_before_an_unknown_partition(
    pair: Pair, name: Callable[[str], str], version: int
) -> None:
    ak, kl = pair.both(2, version, list_body(name("missing"), EARLIEST_PENDING_UPLOAD))
    assert_same(ak, kl)
    assert kl.topics[0].partitions[0].error_code == 35


@pytest.mark.parametrize("target", list(TARGETS))
def test_an_empty_partition(pair: Pair, name: Callable[[str], str], target: str) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    ak, kl = pair.both(2, VERSIONS[-1], list_body(topic, TARGETS[target]))
    assert_same(ak, kl)


def test_read_committed_and_unknown_partitions(pair: Pair, filled: str, name: Callable[[str], str]) -> None:
    ak, kl = pair.both(2, 9, list_body(filled, LATEST, isolation=1))
    assert_same(ak, kl)
    ak, kl = pair.both(2, 9, list_body(filled, LATEST, partition=4))
    assert_same(ak, kl)
    ak, kl = pair.both(2, 9, list_body(name("missing"), LATEST))
    assert_same(ak, kl)


@pytest.mark.parametrize("target", ["latest", "earliest", "between"])
def test_a_leader_epoch_the_broker_does_not_know(pair: Pair, filled: str, target: str) -> None:
    """A new topic's leader epoch is 0: epoch 0 is answered, epoch 1 is UNKNOWN_LEADER_EPOCH."""
    for epoch in (0, 1):
        body = list_body(filled, TARGETS[target])
        body["topics"][0]["partitions"][0]["current_leader_epoch"] = epoch
        ak, kl = pair.both(2, 9, body)
        assert_same(ak, kl)
