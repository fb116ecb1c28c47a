"""A broker-only node that knows the controller quorum through controller.quorum.bootstrap.servers
alone (no controller.quorum.voters), as Kafka 4's brokers may: its metadata observer asks a
bootstrap server, learns the leader and its endpoint from the answer and fetches from it; its
controller channel reaches the active controller there. It registers, is unfenced, leads the
partitions assigned to it, and clients write and read through it, also after the active controller
changes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import trio
from confluent_kafka import KafkaError, Producer
from kafka import KafkaConsumer, TopicPartition

from kafkalike.raft.state import Role
from kafkalike.server.config import BrokerConfig
from kafkalike.server.node import Node
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.node.test_node_roles import Nodes, start_together

DEADLINE_S = 90
CLIENT_TIMEOUT_S = 30
TOPIC = "through-bootstrap"
BROKER = 4
PER_PARTITION = 10


class BootstrapNodes(Nodes):
    """Three combined voters; the broker-only node is given the voters' controller listeners as
    bootstrap servers, and no voters."""

    def config(self, node_id: int, roles: str) -> BrokerConfig:
        config = super().config(node_id, roles)
        if node_id not in self.observer_ids:
            return config
        props = dict(config.explicit)
        del props["controller.quorum.voters"]
        props["controller.quorum.bootstrap.servers"] = ",".join(f"127.0.0.1:{self.ports[i]}" for i in self.voter_ids)
        return BrokerConfig(props)


async def create_topic_on(client: AsyncWireClient, broker_ids: list[int], name: str = TOPIC) -> None:
    """CreateTopics with every partition's replica named (forwarded to the active controller)."""
    assignments = [{"partition_index": i, "broker_ids": [b]} for i, b in enumerate(broker_ids)]
    topic = {"name": name, "num_partitions": -1, "replication_factor": -1, "assignments": assignments, "configs": []}
    created = await client.request(19, 7, {"topics": [topic], "timeout_ms": 10_000})
    assert created.topics[0].error_code == 0, created


def produce(bootstrap: str, partitions: int) -> list[str]:
    """confluent-kafka, acks=all: PER_PARTITION values to each partition; the delivery errors."""
    errors: list[str] = []

    def delivered(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            errors.append(str(error))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": CLIENT_TIMEOUT_S * 1000})
    for i in range(PER_PARTITION):
        for partition in range(partitions):
            producer.produce(TOPIC, value=f"{partition}-{i}".encode(), partition=partition, on_delivery=delivered)
    remaining = producer.flush(CLIENT_TIMEOUT_S)
    return errors + ([f"{remaining} not delivered"] if remaining else [])


def consume(bootstrap: str, partitions: int) -> list[str]:
    """kafka-python, every partition assigned: the values read, until all are or the time is up."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=1000)
    consumer.assign([TopicPartition(TOPIC, p) for p in range(partitions)])
    values: list[str] = []
    end = time.monotonic() + CLIENT_TIMEOUT_S  # a bound on the client's polls, on its own thread
    while len(values) < partitions * PER_PARTITION and time.monotonic() < end:
        for batch in consumer.poll(timeout_ms=500).values():
            values.extend(m.value.decode() for m in batch)
    consumer.close()
    return values


async def test_a_broker_with_only_bootstrap_servers_registers_hosts_partitions_and_serves_clients(
    tmp_path: Path,
) -> None:
    nodes = BootstrapNodes(tmp_path, 3, brokers_only=1)
    await nodes.bind()
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await start_together(nursery, nodes, "broker,controller")
            # Reports started once registered, unfenced and caught up with the leader.
            broker: Node = await nodes.start(nursery, BROKER, "broker")
            assert broker.driver is not None and broker.broker is not None and broker.client_address is not None
            assert broker.settings is not None and not broker.settings.config.voters
            (leader,) = nodes.leaders()
            assert leader.driver is not None
            observer = broker.driver.node
            assert (observer.leader_id, observer.epoch) == (leader.node_id, leader.driver.epoch)
            assert observer.endpoints[leader.node_id] == ("127.0.0.1", nodes.ports[leader.node_id])
            image = leader.image.image
            assert BROKER in image.brokers and not image.brokers[BROKER].fenced
            # Its registration and heartbeats went over the network to the learned endpoint.
            assert broker.broker.cluster is not None
            channel = broker.broker.cluster.channel
            assert channel.sent_over_network > 0 and channel.endpoints == {}
            # The leader counts it an observer of the metadata log.
            described = (await leader.driver.describe())["topics"][0]["partitions"][0]
            assert [o["replica_id"] for o in described["observers"]] == [BROKER]

            client = await AsyncWireClient.connect(*broker.client_address)
            await create_topic_on(client, [BROKER, BROKER, 1])
            await client.aclose()
            await broker.broker.publisher.wait_until(
                lambda image: (t := image.topic(TOPIC)) is not None and len(t.partitions) == 3
            )
            topic = broker.broker.publisher.image.topic(TOPIC)
            assert topic is not None and [topic.partitions[p].leader for p in range(3)] == [BROKER, BROKER, 1]
            bootstrap = "{}:{}".format(*broker.client_address)
            assert await trio.to_thread.run_sync(produce, bootstrap, 3) == []
            values = await trio.to_thread.run_sync(consume, bootstrap, 3)
            assert sorted(values) == sorted(f"{p}-{i}" for p in range(3) for i in range(PER_PARTITION))

            # The active controller goes: the observer finds the next leader, and the broker's
            # controller requests follow it.
            old_leader, old_epoch = leader.node_id, leader.driver.epoch
            await leader.stop()
            await nodes.wait(
                lambda: (
                    observer.epoch > old_epoch
                    and observer.leader_id not in (-1, old_leader)
                    and observer.role is Role.FOLLOWER
                )
            )
            (new_leader,) = [n for n in nodes.leaders() if n.node_id != old_leader]
            assert observer.leader_id == new_leader.node_id
            client = await AsyncWireClient.connect(*broker.client_address)
            await create_topic_on(client, [BROKER], name="after-the-change")
            await client.aclose()
            await broker.broker.publisher.wait_until(lambda image: image.topic("after-the-change") is not None)
            assert not broker.broker.publisher.image.brokers[BROKER].fenced
            # The broker first: with one voter gone, the next one stopped ends the quorum.
            await broker.stop()
            await nodes.stop_in_turn()
            nursery.cancel_scope.cancel()
