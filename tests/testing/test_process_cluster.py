"""The process cluster test kit: nodes as real ``kafkalike serve --config`` processes, with Kafka's
server.properties, formatted by ``kafkalike storage format``, each stopped, killed, paused and
started again by its own id."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkalike.testing.cluster_requests import NodeAddress, metadata_brokers
from kafkalike.testing.process_cluster import (
    CONTROLLER_PORT_OFFSET,
    KafkalikeCluster,
    formatted_cluster_id,
    node_properties,
    plan_addresses,
    voters_value,
)


def test_ports_follow_the_base_port() -> None:
    addresses = plan_addresses(3, base_port=19092)
    assert [(a.node_id, a.client_port, a.controller_port) for a in addresses] == [
        (1, 19092, 19092 + CONTROLLER_PORT_OFFSET),
        (2, 19093, 19093 + CONTROLLER_PORT_OFFSET),
        (3, 19094, 19094 + CONTROLLER_PORT_OFFSET),
    ]


def test_free_ports_never_repeat() -> None:
    addresses = plan_addresses(5)
    ports = [p for a in addresses for p in (a.client_port, a.controller_port)]
    assert len(set(ports)) == 10 and 0 not in ports


@pytest.mark.parametrize(("nodes", "base_port"), [(0, 0), (100, 0), (3, 65500), (1, -1)])
def test_impossible_layouts_are_refused(nodes: int, base_port: int) -> None:
    with pytest.raises(ValueError, match="nodes"):
        plan_addresses(nodes, base_port)


def test_every_node_is_told_all_voters_in_kafkas_names(tmp_path: Path) -> None:
    addresses = [NodeAddress(1, 9092, 9192), NodeAddress(2, 9093, 9193)]
    assert node_properties(addresses[1], addresses, tmp_path) == {
        "node.id": "2",
        "process.roles": "broker,controller",
        "controller.quorum.voters": "1@127.0.0.1:9192,2@127.0.0.1:9193",
        "listeners": "PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:9193",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(tmp_path),
    }
    assert voters_value(addresses) == "1@127.0.0.1:9192,2@127.0.0.1:9193"


def test_a_controller_only_node_has_its_controller_listener_alone(tmp_path: Path) -> None:
    addresses = [NodeAddress(1, 9092, 9192), NodeAddress(2, 9093, 9193)]
    assert node_properties(addresses[0], addresses, tmp_path, roles="controller") == {
        "node.id": "1",
        "process.roles": "controller",
        "controller.quorum.voters": "1@127.0.0.1:9192,2@127.0.0.1:9193",
        "listeners": "CONTROLLER://127.0.0.1:9192",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(tmp_path),
    }
    with pytest.raises(ValueError, match=r"process\.roles=broker,controller,x"):
        node_properties(addresses[0], addresses, tmp_path, roles="broker,controller,x")


def test_a_broker_only_node_reaches_the_voters_at_their_controller_listeners(tmp_path: Path) -> None:
    voters = [NodeAddress(1, 9092, 9192), NodeAddress(2, 9093, 9193)]
    joining = NodeAddress(3, 9094, 9194)
    assert node_properties(joining, voters, tmp_path, roles="broker") == {
        "node.id": "3",
        "process.roles": "broker",
        "controller.quorum.voters": "1@127.0.0.1:9192,2@127.0.0.1:9193",
        "listeners": "PLAINTEXT://127.0.0.1:9094",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:9094",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(tmp_path),
    }
    with pytest.raises(ValueError, match="cannot be one of the voters"):
        node_properties(voters[0], voters, tmp_path, roles="broker")


def test_one_node_cluster_serves_kafka_python_and_stops(tmp_path: Path) -> None:
    cluster = KafkalikeCluster(1, tmp_path)
    with cluster:
        node = cluster.node(1)
        assert formatted_cluster_id(node.log_dir) == cluster.cluster_id  # formatted by storage format
        assert cluster.bootstrap_servers == node.bootstrap
        assert cluster.active_controller(timeout_s=30) == 1
        assert cluster.create_topic("events", partitions=2) == 0
        cluster.wait_for(lambda: cluster.partition_leaders("events") == {0: 1, 1: 1}, "leaders")
        assert cluster.leader("events", 1) == 1
        assert cluster.partition_leaders("no-such-topic") == {} and cluster.leader("no-such-topic", 0) == -1
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        assert producer.send("events", b"through the process cluster", partition=1).get(timeout=30).offset == 0
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, consumer_timeout_ms=30000)
        consumer.assign([TopicPartition("events", 1)])
        consumer.seek_to_beginning()
        assert next(consumer).value == b"through the process cluster"
        consumer.close()
    assert not node.running and node.proc is not None and node.proc.returncode == 0  # a clean SIGTERM exit
    assert (node.node_dir / "output.log").read_text().count("kafkalike ready on") == 1


def test_a_node_starts_again_on_its_ports_with_its_data(tmp_path: Path) -> None:
    with KafkalikeCluster(1, tmp_path) as cluster:
        node = cluster.node(1)
        assert cluster.create_topic("kept") == 0
        address = node.bootstrap
        assert node.stop() == 0
        assert cluster.bootstrap_servers == "" and metadata_brokers(node.address) == set()
        node.start()
        assert node.bootstrap == address and cluster.bootstrap_servers == address
        assert cluster.create_topic("kept") == 36  # TOPIC_ALREADY_EXISTS: the data survived the restart
        node.kill()
        assert node.proc is not None and node.proc.returncode == -signal.SIGKILL
        node.start()
        assert cluster.metadata_brokers() == {1}


def test_a_paused_node_stops_answering_until_resumed(tmp_path: Path) -> None:
    with KafkalikeCluster(1, tmp_path) as cluster:
        node = cluster.node(1)
        node.pause()
        assert node.paused and node.running
        assert cluster.live_nodes() == [] and cluster.bootstrap_servers == ""
        assert metadata_brokers(node.address, timeout_s=0.5) == set()  # frozen: the request times out
        node.resume()
        assert metadata_brokers(node.address) == {1}
        node.pause()  # a paused node still stops cleanly: SIGTERM, then SIGCONT
    assert node.proc is not None and node.proc.returncode == 0


def test_a_restarted_data_dir_keeps_its_cluster_id(tmp_path: Path) -> None:
    with KafkalikeCluster(1, tmp_path) as first:
        cluster_id = first.cluster_id
    again = KafkalikeCluster(1, tmp_path)
    assert again.cluster_id == cluster_id
    with again:
        assert again.metadata_brokers() == {1}
