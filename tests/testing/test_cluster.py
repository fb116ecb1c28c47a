"""kafkalike.testing.Cluster: one node works fully; several say why they cannot run yet."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import trio
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkalike.testing import Cluster
from kafkalike.testing.wire_client import WireClient

METADATA = 3


def metadata_node_ids(bootstrap: str) -> list[int]:
    host, _, port = bootstrap.rpartition(":")
    with WireClient(host, int(port)) as client:
        response = client.request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    return [broker.node_id for broker in response.brokers]


def test_one_node_cluster_serves_a_real_client() -> None:
    with Cluster(brokers=1, seed_topics={"seeded": 2}) as cluster:
        (node,) = cluster.brokers
        assert cluster.broker(1) is node and node.node_id == 1 and node.running
        assert cluster.bootstrap_servers == node.bootstrap
        assert metadata_node_ids(cluster.bootstrap_servers) == [1]
        assert cluster.topics()["seeded"] == 2

        cluster.create_topic("events", partitions=3, replication_factor=1)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        assert producer.send("events", b"from a client", partition=2).get(timeout=30).offset == 0
        producer.close()
        assert cluster.produce("events", b"from the helper", partition=2) == 1
        assert [(o, r.value) for o, r in cluster.consume("events", partition=2)] == [
            (0, b"from a client"),
            (1, b"from the helper"),
        ]
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, consumer_timeout_ms=30000)
        consumer.assign([TopicPartition("events", 2)])
        consumer.seek_to_beginning()
        assert next(consumer).value == b"from a client"
        consumer.close()
    assert not node.running


def test_a_node_stops_and_starts_on_its_port_with_its_data() -> None:
    with Cluster(brokers=1) as cluster:
        node = cluster.broker(1)
        cluster.create_topic("kept")
        cluster.produce("kept", b"before")
        address = node.bootstrap
        node.stop()
        assert not node.running and cluster.bootstrap_servers == ""
        with pytest.raises(RuntimeError, match="no broker of the cluster is running"):
            cluster.produce("kept", b"while stopped")
        node.start()
        assert node.bootstrap == address
        node.restart()
        assert cluster.bootstrap_servers == address
        assert [r.value for _, r in cluster.consume("kept")] == [b"before"]


def test_nodes_have_fault_hooks() -> None:
    with Cluster(brokers=1) as cluster:
        cluster.create_topic("paused")
        cluster.broker(1).faults.pause_partition("paused", 0)
        with pytest.raises(RuntimeError, match="error 6"):  # NOT_LEADER_OR_FOLLOWER
            cluster.produce("paused", b"refused")
        cluster.broker(1).faults.resume_partition("paused", 0)
        assert cluster.produce("paused", b"accepted") == 0


def test_a_durable_cluster_keeps_each_node_in_a_directory_of_its_own(tmp_path: Path) -> None:
    with Cluster(brokers=1, ephemeral=False, data_dir=tmp_path) as cluster:
        cluster.create_topic("on-disk")
        cluster.produce("on-disk", b"flushed at stop")
    assert (tmp_path / "node-1" / "on-disk-0").is_dir()
    with Cluster(brokers=1, ephemeral=False, data_dir=tmp_path) as cluster:
        assert [r.value for _, r in cluster.consume("on-disk")] == [b"flushed at stop"]


def test_a_cluster_needs_a_broker_and_topics_need_enough_of_them() -> None:
    with pytest.raises(ValueError, match="at least one broker"):
        Cluster(brokers=0)
    with Cluster() as cluster, pytest.raises(ValueError, match="replication factor 2"):
        cluster.create_topic("too-many-replicas", replication_factor=2)


async def test_async_with_inside_trio() -> None:
    async with Cluster(brokers=1) as cluster:
        await trio.to_thread.run_sync(cluster.create_topic, "from-trio")
        assert await trio.to_thread.run_sync(cluster.produce, "from-trio", b"v") == 0
    assert not cluster.broker(1).running


def test_async_with_under_asyncio() -> None:
    async def scenario() -> list[int]:
        async with Cluster(brokers=1) as cluster:
            return metadata_node_ids(cluster.bootstrap_servers)

    assert asyncio.run(scenario()) == [1]
