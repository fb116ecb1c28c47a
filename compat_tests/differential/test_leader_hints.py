"""KIP-951's leader hints where a single Kafka node can show them: an epoch from the future
(UNKNOWN_LEADER_EPOCH) and a partition the broker does not have (Produce v10+) get the error and no
hint; a negative epoch is no epoch to Fetch (Kafka's FetchRequest.optionalEpoch), so it reads. (A
single node's leader epoch stays 0, so FENCED_LEADER_EPOCH with its hint needs a second broker:
tests/server/test_leader_routing.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from compat_tests.differential.conftest import Pair, Side, assert_same
from compat_tests.differential.test_produce_fetch import batch, fetch_body, produce_body

pytestmark = pytest.mark.differential

NONE, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION = 0, 75, 3


def _fetch(topic: str, epoch: int, partition: int = 0) -> Callable[[Side], dict[str, Any]]:
    make = fetch_body(topic, partition=partition)

    def body(side: Side) -> dict[str, Any]:
        made = make(side)
        made["replica_state"] = {"replica_id": -1, "replica_epoch": -1}
        made["topics"][0]["partitions"][0]["current_leader_epoch"] = epoch
        return made

    return body


@pytest.mark.parametrize("version", [15, 16, 17])
def test_a_fetch_with_a_fenced_or_unknown_epoch(pair: Pair, name: Callable[[str], str], version: int) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    pair.both(0, 9, produce_body(topic, batch(2)))
    # A new partition's leader epoch is 0: 1 is above it (unknown); -2 is no epoch at all.
    for epoch, code in ((1, UNKNOWN_LEADER_EPOCH), (-2, NONE)):
        ak, kl = pair.both(1, version, _fetch(topic, epoch))
        assert ak.responses[0].partitions[0].error_code == code
        assert_same(ak, kl)
        assert len(kl.node_endpoints) == 0


@pytest.mark.parametrize("version", [9, 10, 12])
def test_a_produce_to_a_partition_that_does_not_exist(pair: Pair, name: Callable[[str], str], version: int) -> None:
    topic = name()
    pair.create_topic(topic, 1)
    ak, kl = pair.both(0, version, produce_body(topic, batch(1), partition=3))
    assert ak.responses[0].partition_responses[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert_same(ak, kl)
