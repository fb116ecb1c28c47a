"""Two brokers (broker-only nodes beside a controller-only voter), a topic with a partition led by
each: a request for the other broker's partition gets NOT_LEADER_OR_FOLLOWER with KIP-951's hint
naming that broker and its endpoint; real clients bootstrapped to one broker only follow Metadata
to the right broker and write and read both partitions; a controlled shutdown is approved and the
broker is fenced."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import trio
from confluent_kafka import KafkaError, Producer
from kafka import KafkaConsumer, TopicPartition

from kafkalike.controller.image import MetadataImage
from kafkalike.protocol.records import Record, build_batch
from kafkalike.server.node import Node
from kafkalike.testing.request_bodies import fetch_by_id_body, list_offsets_body, produce_body
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.node.test_node_roles import Nodes, create_topic

DEADLINE_S = 90
CLIENT_TIMEOUT_S = 30
TOPIC = "spread"
NOT_LEADER_OR_FOLLOWER = 6
PER_PARTITION = 10


def _leaders(image: MetadataImage) -> dict[int, tuple[int, int]]:
    topic = image.topic(TOPIC)
    return {} if topic is None else {i: (p.leader, p.leader_epoch) for i, p in topic.partitions.items()}


def _produce_with_a_real_client(bootstrap: str) -> list[str]:
    """confluent-kafka: PER_PARTITION messages to each partition; the delivery errors."""
    errors: list[str] = []

    def delivered(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            errors.append(str(error))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": CLIENT_TIMEOUT_S * 1000})
    for i in range(PER_PARTITION):
        for partition in (0, 1):
            producer.produce(TOPIC, value=f"{partition}-{i}".encode(), partition=partition, on_delivery=delivered)
    remaining = producer.flush(CLIENT_TIMEOUT_S)
    return errors + ([f"{remaining} not delivered"] if remaining else [])


def _consume_with_a_real_client(bootstrap: str) -> list[str]:
    """kafka-python, both partitions assigned: every value, until all are read or the time is up."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=1000)
    consumer.assign([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
    values: list[str] = []
    end = time.monotonic() + CLIENT_TIMEOUT_S  # a bound on the client's polls, on its own thread
    while len(values) < 2 * PER_PARTITION and time.monotonic() < end:
        for batch in consumer.poll(timeout_ms=500).values():
            values.extend(m.value.decode() for m in batch)
    consumer.close()
    return values


async def test_clients_are_routed_to_the_leader_of_each_partition(tmp_path: Path) -> None:
    nodes = Nodes(tmp_path, 1, brokers_only=2)
    await nodes.bind()
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            controller: Node = await nodes.start(nursery, 1, "controller")
            first: Node = await nodes.start(nursery, 2, "broker")
            second: Node = await nodes.start(nursery, 3, "broker")
            assert first.broker is not None and second.broker is not None
            assert first.client_address is not None and second.client_address is not None
            await create_topic(nodes.ports[1], TOPIC, 2)
            for node in (first, second):
                assert node.broker is not None
                await node.broker.publisher.wait_until(lambda image: len(_leaders(image)) == 2)
            leaders = _leaders(first.broker.publisher.image)
            assert {leader for leader, _ in leaders.values()} == {2, 3}  # one partition on each broker
            elsewhere = next(i for i, (leader, _) in leaders.items() if leader == 3)

            # Asked of broker 2, the partition broker 3 leads: the error and where to go instead.
            client = await AsyncWireClient.connect(*first.client_address)
            answer = await client.request(
                0, 11, produce_body(TOPIC, elsewhere, build_batch([Record(value=b"misrouted")]))
            )
            entry = answer.responses[0].partition_responses[0]
            assert entry.error_code == NOT_LEADER_OR_FOLLOWER
            assert (entry.current_leader.leader_id, entry.current_leader.leader_epoch) == leaders[elsewhere]
            assert [(n.node_id, n.host, n.port) for n in answer.node_endpoints] == [(3, *second.client_address)]
            listed = await client.request(2, 7, list_offsets_body(TOPIC, elsewhere))
            assert listed.topics[0].partitions[0].error_code == NOT_LEADER_OR_FOLLOWER
            topic_image = first.broker.publisher.image.topic(TOPIC)
            assert topic_image is not None
            # A long poll, which a misrouted partition ends at once.
            fetched = await client.request(1, 16, fetch_by_id_body(topic_image.topic_id, elsewhere, max_wait_ms=60_000))
            entry = fetched.responses[0].partitions[0]
            assert entry.error_code == NOT_LEADER_OR_FOLLOWER
            assert (entry.current_leader.leader_id, entry.current_leader.leader_epoch) == leaders[elsewhere]
            assert [(n.node_id, n.host, n.port) for n in fetched.node_endpoints] == [(3, *second.client_address)]
            await client.aclose()

            # Real clients that know only broker 2 find broker 3 through Metadata.
            bootstrap = "{}:{}".format(*first.client_address)
            assert await trio.to_thread.run_sync(_produce_with_a_real_client, bootstrap) == []
            values = await trio.to_thread.run_sync(_consume_with_a_real_client, bootstrap)
            assert sorted(values) == sorted(f"{p}-{i}" for p in (0, 1) for i in range(PER_PARTITION))

            # A controlled shutdown of broker 3: the controller lets it go and fences it.
            lifecycle = second.broker.lifecycle
            assert await lifecycle.controlled_shutdown(timeout_s=CLIENT_TIMEOUT_S)
            await first.broker.publisher.wait_until(lambda image: image.brokers[3].fenced)
            await second.stop()
            await first.stop()
            await controller.stop()
            nursery.cancel_scope.cancel()
