"""DescribeQuorum sent to the broker: Kafka forwards it to its controller, kafkalike is both; a
single voter either way. What differs between any two clusters is ignored: the metadata log's
length (high watermark, end offsets), the clocks, and the controller listener (Kafka's is a
separate CONTROLLER listener)."""

from __future__ import annotations

import pytest

from compat_tests.differential.conftest import Pair, assert_same

pytestmark = pytest.mark.differential

CLUSTER_SPECIFIC = (
    "topics[].partitions[].high_watermark",
    "topics[].partitions[].current_voters[].log_end_offset",
    "topics[].partitions[].current_voters[].last_fetch_timestamp",
    "topics[].partitions[].current_voters[].last_caught_up_timestamp",
    "nodes[].listeners[].*",
)


def body(topic: str = "__cluster_metadata", partition: int = 0) -> dict[str, object]:
    return {"topics": [{"topic_name": topic, "partitions": [{"partition_index": partition}]}]}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_metadata_quorum(pair: Pair, version: int) -> None:
    ak, kl = pair.both(55, version, body())
    assert_same(ak, kl, CLUSTER_SPECIFIC)


@pytest.mark.parametrize(("topic", "partition"), [("__consumer_offsets", 0), ("__cluster_metadata", 1)])
def test_another_partition(pair: Pair, topic: str, partition: int) -> None:
    ak, kl = pair.both(55, 2, body(topic, partition))
    assert_same(ak, kl)


def test_no_partition(pair: Pair) -> None:
    ak, kl = pair.both(55, 2, {"topics": []})
    assert_same(ak, kl)
