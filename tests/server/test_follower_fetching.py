"""Fetching from the closest replica (KIP-392) on a 3-node cluster (in-process nodes) whose
brokers stand in racks ``rack-<id>`` with the rack-aware selector: the leader answers a v11+
consumer fetch from another rack's client with the follower of that rack and no records; the
follower serves it up to its high watermark; a consumer fetch before v11 is refused by a
follower (NOT_LEADER_OR_FOLLOWER), as Kafka refuses it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import decode_records, iter_batches
from kafkalike.testing.cluster import Cluster
from kafkalike.testing.wire_client import WireClient
from tests.server.test_broker_basics import _fetch_body
from tests.server.test_partition_replication import WAIT_S, node, produce

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    running = Cluster(brokers=3, overrides={"replica.selector.class": SELECTOR})
    for member in running.brokers:
        member.config["broker.rack"] = f"rack-{member.node_id}"  # type: ignore[union-attr]
    with running:
        yield running


def fetch(cluster: Cluster, node_id: int, version: int, rack: str, offset: int = 0) -> Any:
    body = {**_fetch_body("racked", 0, offset), "rack_id": rack}
    target = node(cluster, node_id)
    with WireClient(target.address.host, target.address.client_port, timeout_s=WAIT_S) as client:
        (topic,) = client.request(1, version, body).responses
    (partition,) = topic.partitions
    return partition


def values(entry: Any) -> list[bytes | None]:
    data = bytes(entry.records or b"")
    return [r.value for pos, header in iter_batches(data) for r in decode_records(data, pos, header)]


def test_the_leader_sends_a_consumer_to_the_follower_in_its_rack(cluster: Cluster) -> None:
    cluster.create_topic("racked", replication_factor=3)
    written = [b"a", b"b", b"c"]
    assert produce(cluster, "racked", written) is ErrorCode.NONE
    leader = cluster.leader("racked", 0)
    follower = next(n for n in cluster.node_ids if n != leader)
    cluster.wait_in_sync("racked", timeout_s=WAIT_S)

    sent = fetch(cluster, leader, 11, f"rack-{follower}")
    assert (sent.error_code, sent.preferred_read_replica, values(sent)) == (0, follower, [])
    assert sent.high_watermark == 3
    # No rack, an unknown rack, or the leader's own: read at the leader.
    for rack in ("", "rack-9", f"rack-{leader}"):
        here = fetch(cluster, leader, 12, rack)
        assert (here.preferred_read_replica, values(here)) == (-1, written)

    # The follower serves a v11+ consumer up to its high watermark (learnt from its fetches).
    cluster.wait_for(
        lambda: fetch(cluster, follower, 11, f"rack-{follower}").high_watermark == 3, "the follower's HW", WAIT_S
    )
    served = fetch(cluster, follower, 11, f"rack-{follower}")
    assert (served.error_code, served.preferred_read_replica, values(served)) == (0, -1, written)
    assert fetch(cluster, follower, 11, "", offset=1).error_code == 0
    assert fetch(cluster, follower, 11, "", offset=9).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # Before v11 a consumer reads from the leader only.
    assert fetch(cluster, follower, 10, "").error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    follower_node = node(cluster, follower).node
    assert follower_node is not None and follower_node.broker is not None
    assert follower_node.broker.follower_reads.counts[("racked", 0)] >= 1
