"""A broker of a cluster over a one-voter quorum: its admin requests go to the active controller
(through the controller channel), it answers once its own published image shows the change,
and Metadata / DescribeCluster come from that image (registered, unfenced brokers; leaders from
the partitions' registrations)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.server.broker import Broker
from kafkalike.server.config import BrokerConfig
from kafkalike.testing.controller_requests import heartbeat, registration
from kafkalike.testing.metadata_node import OneVoterController, one_voter_controller
from kafkalike.testing.quorum import CLUSTER_ID
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.test_broker_basics import _fetch_body, _produce_body

DEADLINE_S = 30


@dataclass
class ClusterBroker:
    broker: Broker
    node: OneVoterController
    client: AsyncWireClient
    port: int


async def register(node: OneVoterController, broker_id: int, port: int, *, unfence: bool = True) -> int:
    channel = node.channel()
    registered = await channel.request(62, 4, registration(broker_id, CLUSTER_ID, port=port))
    assert registered.error_code == 0, registered
    if unfence:
        beat = await channel.request(63, 1, heartbeat(broker_id, registered.broker_epoch, 2**40))
        assert beat.error_code == 0 and not beat.is_fenced, beat
    await channel.aclose()
    return int(registered.broker_epoch)


@asynccontextmanager
async def cluster_broker(tmp_path: Path) -> AsyncIterator[ClusterBroker]:
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    broker = Broker(config, ephemeral=True, own_metadata_log=False)
    async with trio.open_nursery() as nursery, one_voter_controller(listeners=[broker.publisher]) as node:
        driver = node.driver
        broker.attach_controller(
            node.channel(), lambda: None if driver.high_watermark is None else driver.high_watermark - 1
        )
        broker.open()
        await nursery.start(broker.publisher.run)
        _, port = await nursery.start(broker.serve, "127.0.0.1", 0)
        epoch = await register(node, 1, port)
        assert broker.cluster is not None
        broker.cluster.broker_epoch = epoch
        client = await AsyncWireClient.connect("127.0.0.1", port)
        try:
            yield ClusterBroker(broker, node, client, port)
        finally:
            await client.aclose()
            nursery.cancel_scope.cancel()


def new_topic(name: str, partitions: int) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [], "configs": []}


async def test_a_topic_created_through_the_controller_is_served_at_once(tmp_path: Path) -> None:
    with trio.fail_after(DEADLINE_S):
        async with cluster_broker(tmp_path) as running:
            client = running.client
            created = await client.request(19, 7, {"topics": [new_topic("orders", 2)], "timeout_ms": 5000})
            (topic,) = created.topics
            assert (topic.error_code, topic.num_partitions, topic.replication_factor) == (0, 2, 1)
            # Answered once this broker's image has it: the controller's own image and ours agree.
            assert running.broker.publisher.image.topic("orders") is not None
            assert running.node.host.image.topic("orders").topic_id == topic.topic_id

            metadata = await client.request(3, 12, {"topics": [{"name": "orders", "topic_id": uuid.UUID(int=0)}]})
            assert [(b.node_id, b.port) for b in metadata.brokers] == [(1, running.port)]
            assert metadata.controller_id == 1
            (entry,) = metadata.topics
            assert entry.error_code == 0 and entry.topic_id == topic.topic_id
            assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in entry.partitions] == [
                (0, 1, [1], [1]),
                (1, 1, [1], [1]),
            ]

            batch = build_batch([Record(value=b"hello")], base_timestamp=int(time.time() * 1000))
            produced = await client.request(0, 9, _produce_body("orders", 1, batch))
            assert produced.responses[0].partition_responses[0].error_code == 0
            fetched = await client.request(1, 12, _fetch_body("orders", 1, 0))
            data = bytes(fetched.responses[0].partitions[0].records or b"")
            assert [r.value for pos, h in iter_batches(data) for r in decode_records(data, pos, h)] == [b"hello"]

            again = await client.request(19, 7, {"topics": [new_topic("orders", 2)], "timeout_ms": 5000})
            assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS

            grown = await client.request(
                37,
                3,
                {
                    "topics": [{"name": "orders", "count": 3, "assignments": None}],
                    "timeout_ms": 5000,
                    "validate_only": False,
                },
            )
            assert grown.results[0].error_code == 0
            assert ("orders", 2) in running.broker.replicas

            changed = await client.request(
                44,
                1,
                {
                    "resources": [
                        {
                            "resource_type": 2,
                            "resource_name": "orders",
                            "configs": [{"name": "retention.ms", "config_operation": 0, "value": "60000"}],
                        }
                    ],
                    "validate_only": False,
                },
            )
            assert changed.responses[0].error_code == 0
            assert running.broker.replicas[("orders", 0)].config.retention_ms == 60000

            deleted = await client.request(
                20, 6, {"topics": [{"name": "orders", "topic_id": uuid.UUID(int=0)}], "timeout_ms": 5000}
            )
            assert deleted.responses[0].error_code == 0
            assert not any(tp[0] == "orders" for tp in running.broker.replicas)
            gone = await client.request(
                3,
                12,
                {"topics": [{"name": "orders", "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": False},
            )
            assert gone.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_fenced_brokers_leave_metadata_and_their_partitions_lose_their_leader(tmp_path: Path) -> None:
    with trio.fail_after(DEADLINE_S):
        async with cluster_broker(tmp_path) as running:
            client = running.client
            await register(running.node, 2, 19092, unfence=False)  # registered, still fenced
            cluster = await client.request(
                60,
                2,
                {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": True},
            )
            assert [(b.broker_id, b.is_fenced) for b in cluster.brokers] == [(1, False), (2, True)]
            assert cluster.controller_id == 1
            unfenced_only = await client.request(
                60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1}
            )
            assert [b.broker_id for b in unfenced_only.brokers] == [1]
            metadata = await client.request(3, 12, {"topics": None})
            assert [b.node_id for b in metadata.brokers] == [1]
