"""Requests for a partition another broker leads, on a 2-node Apache Kafka cluster and a 2-node
kafkalike cluster (combined nodes, the same process-cluster kit): Produce v12 and Fetch v16 get
NOT_LEADER_OR_FOLLOWER naming the leader and its epoch (KIP-951's current_leader) and the
leader's endpoint, and ListOffsets and OffsetForLeaderEpoch NOT_LEADER_OR_FOLLOWER, alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compat_tests.differential.conftest import AK_LIB
from kafkalike.protocol.records import Record, build_batch
from kafkalike.testing.apache_kafka import ApacheKafkaCluster
from kafkalike.testing.process_cluster import KafkalikeCluster, ProcessCluster
from kafkalike.testing.request_bodies import fetch_by_id_body, list_offsets_body, produce_body
from kafkalike.testing.wire_client import WireClient

pytestmark = pytest.mark.differential

TOPIC = "hinted"
NOT_LEADER_OR_FOLLOWER = 6


def _answers(cluster: ProcessCluster[Any]) -> dict[str, Any]:
    """What a broker answers for the partition the other broker leads, with the ids and ports
    replaced by what they name (the leader, its client port)."""
    assert cluster.create_topic(TOPIC, partitions=2, via=1) == 0
    cluster.wait_for(lambda: sorted(cluster.partition_leaders(TOPIC, via=1).values()) == [1, 2], "leaders")
    cluster.wait_for(lambda: sorted(cluster.partition_leaders(TOPIC, via=2).values()) == [1, 2], "leaders")
    leaders = cluster.partition_leaders(TOPIC, via=1)
    elsewhere = next(p for p, leader in leaders.items() if leader == 2)
    leader_port = cluster.node(2).address.client_port
    asked = cluster.node(1).address
    with WireClient(asked.host, asked.client_port) as client:
        metadata = client.request(3, 12, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False})
        (topic,) = metadata.topics
        epoch = next(p.leader_epoch for p in topic.partitions if p.partition_index == elsewhere)
        produced = client.request(0, 12, produce_body(TOPIC, elsewhere, build_batch([Record(value=b"misrouted")])))
        fetched = client.request(1, 16, fetch_by_id_body(topic.topic_id, elsewhere, max_wait_ms=10_000))
        listed = client.request(2, 7, list_offsets_body(TOPIC, elsewhere))
        ends = client.request(
            23,
            4,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": TOPIC,
                        "partitions": [{"partition": elsewhere, "current_leader_epoch": -1, "leader_epoch": 0}],
                    }
                ],
            },
        )
    p = produced.responses[0].partition_responses[0]
    f = fetched.responses[0].partitions[0]
    return {
        "produce": (p.error_code, p.current_leader.leader_id, p.current_leader.leader_epoch == epoch),
        "produce endpoints": [(n.node_id, n.port == leader_port) for n in produced.node_endpoints],
        "fetch": (f.error_code, f.current_leader.leader_id, f.current_leader.leader_epoch == epoch),
        "fetch endpoints": [(n.node_id, n.port == leader_port) for n in fetched.node_endpoints],
        "list offsets": listed.topics[0].partitions[0].error_code,
        "offset for leader epoch": ends.topics[0].partitions[0].error_code,
    }


def test_a_broker_names_the_leader_of_a_partition_it_does_not_lead(tmp_path: Path) -> None:
    with ApacheKafkaCluster(2, data_dir=tmp_path / "kafka", lib_dir=Path(AK_LIB)) as kafka:
        expected = _answers(kafka)
    with KafkalikeCluster(2, tmp_path / "kafkalike") as kafkalike:
        found = _answers(kafkalike)
    assert expected == {
        "produce": (NOT_LEADER_OR_FOLLOWER, 2, True),
        "produce endpoints": [(2, True)],
        "fetch": (NOT_LEADER_OR_FOLLOWER, 2, True),
        "fetch endpoints": [(2, True)],
        "list offsets": NOT_LEADER_OR_FOLLOWER,
        "offset for leader epoch": NOT_LEADER_OR_FOLLOWER,
    }
    assert found == expected
