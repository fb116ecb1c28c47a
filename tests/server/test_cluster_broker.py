"""A broker of a cluster over a one-voter quorum: its admin requests go to the active controller
(through the controller channel), it answers once its own published image shows the change,
and Metadata / DescribeCluster come from that image (registered, unfenced brokers; leaders from
the partitions' registrations)."""

from __future__ import annotations

import functools
import math
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from kafkalike.controller.api_error import ControllerError
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.server.broker import Broker, NewTopic
from kafkalike.server.cluster_metadata import request_message
from kafkalike.server.config import BrokerConfig
from kafkalike.server.controller_channel import ControllerChannel
from kafkalike.server.quorum.driver import QuorumDriver
from kafkalike.testing.clock import TrioClock
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
    broker = Broker(config, ephemeral=True)
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


def committed_offset(driver: QuorumDriver) -> int | None:
    hw = driver.high_watermark
    return None if hw is None else hw - 1


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
            at_controller = running.node.host.image.topic("orders")
            assert at_controller is not None and at_controller.topic_id == topic.topic_id

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


async def test_an_old_create_topics_version_is_forwarded_too(tmp_path: Path) -> None:
    with trio.fail_after(DEADLINE_S):
        async with cluster_broker(tmp_path) as running:
            created = await running.client.request(19, 2, {"topics": [new_topic("old", 1)], "timeout_ms": 5000})
            assert created.topics[0].error_code == 0
            assert ("old", 0) in running.broker.replicas


async def test_a_partition_whose_broker_is_gone_has_no_leader(tmp_path: Path) -> None:
    with trio.fail_after(DEADLINE_S):
        async with cluster_broker(tmp_path) as running:
            client = running.client
            await register(running.node, 2, 19092)
            assignments = [{"partition_index": 0, "broker_ids": [1]}, {"partition_index": 1, "broker_ids": [2]}]
            topic = {**new_topic("split", -1), "replication_factor": -1, "assignments": assignments}
            created = await client.request(19, 7, {"topics": [topic], "timeout_ms": 5000})
            assert created.topics[0].error_code == 0, created
            assert ("split", 0) in running.broker.replicas and ("split", 1) not in running.broker.replicas
            channel = running.node.channel()
            gone = await channel.request(64, 0, {"broker_id": 2})
            await channel.aclose()
            assert gone.error_code == 0, gone
            assert await running.broker.publisher.wait_until(lambda i: 2 not in i.brokers)
            metadata = await client.request(3, 12, {"topics": [{"name": "split", "topic_id": uuid.UUID(int=0)}]})
            by_index = {p.partition_index: p for p in metadata.topics[0].partitions}
            assert (by_index[0].error_code, by_index[0].leader_id, by_index[0].offline_replicas) == (0, 1, [])
            assert (by_index[1].error_code, by_index[1].leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
            assert by_index[1].offline_replicas == [2]
            assert [b.node_id for b in metadata.brokers] == [1]


class NoLeader:
    leader_id = -1

    async def changed(self) -> None:
        await trio.sleep(math.inf)


async def test_admin_requests_without_a_controller_answer_request_timed_out(
    tmp_path: Path, autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    broker = Broker(config, ephemeral=True, clock=trio_clock)
    broker.attach_controller(ControllerChannel(1, NoLeader(), {}, clock=trio_clock), lambda: None)
    broker.open()
    assert broker.cluster is not None
    start = trio.current_time()
    request = request_message(19, 7, {"topics": [new_topic("t", 1)], "timeout_ms": 5000, "validate_only": False})
    answer = await broker.cluster.forward(19, 7, request)
    assert [(t.name, t.error_code) for t in answer.topics] == [("t", ErrorCode.REQUEST_TIMED_OUT)]
    assert trio.current_time() - start == pytest.approx(5.0)
    (result,) = await broker.create_topics([NewTopic("u", 1, {})])
    assert isinstance(result, ControllerError) and result.code == ErrorCode.REQUEST_TIMED_OUT
    with pytest.raises(ControllerError) as refused:
        await broker.create_internal_topic("__consumer_offsets", 1, {})
    assert refused.value.code == ErrorCode.REQUEST_TIMED_OUT
    broker.close()


async def test_a_restarted_cluster_broker_reopens_its_partitions_from_the_committed_log(tmp_path: Path) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    batch = build_batch([Record(value=b"kept")], base_timestamp=int(time.time() * 1000))
    topic_ids = []
    for start in range(2):
        broker = Broker(config)
        try:
            with trio.fail_after(DEADLINE_S):
                async with (
                    trio.open_nursery() as nursery,
                    one_voter_controller(listeners=[broker.publisher], metadata_log_dir=tmp_path / "quorum") as node,
                ):
                    broker.attach_controller(node.channel(), functools.partial(committed_offset, node.driver))
                    broker.open()
                    await nursery.start(broker.publisher.run)
                    _, port = await nursery.start(broker.serve, "127.0.0.1", 0)
                    client = await AsyncWireClient.connect("127.0.0.1", port)
                    if start == 0:
                        await register(node, 1, port)
                        created = await client.request(19, 7, {"topics": [new_topic("kept", 1)], "timeout_ms": 5000})
                        assert created.topics[0].error_code == 0
                        produced = await client.request(0, 9, _produce_body("kept", 0, batch))
                        assert produced.responses[0].partition_responses[0].error_code == 0
                    else:
                        # Replayed from the quorum's log, the partition is open again with its data.
                        assert await broker.publisher.wait_until(lambda i: i.topic("kept") is not None)
                        assert ("kept", 0) in broker.replicas
                    topic_ids.append(broker.replicas[("kept", 0)].topic_id)
                    fetched = await client.request(1, 12, _fetch_body("kept", 0, 0))
                    data = bytes(fetched.responses[0].partitions[0].records or b"")
                    assert [r.value for pos, h in iter_batches(data) for r in decode_records(data, pos, h)] == [b"kept"]
                    await client.aclose()
                    nursery.cancel_scope.cancel()
        finally:
            await broker.aclose()
    assert topic_ids[0] == topic_ids[1]


async def test_partitions_deleted_while_their_broker_was_down_are_removed(tmp_path: Path) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    quorum_dir = tmp_path / "data"  # as a combined node keeps it: the quorum's log among the partitions
    quorum_dir.mkdir()
    (quorum_dir / "meta.properties").write_text("version=1\ncluster.id=quorum-test-cluster-0A\nnode.id=1\n")
    stray = tmp_path / "data" / "doomed-0"
    orphan = tmp_path / "data" / "orphan-0"
    for phase in ("create", "delete while down", "restart"):
        if phase == "restart":
            orphan.mkdir()
        broker = Broker(config)
        listeners = [] if phase == "delete while down" else [broker.publisher]
        try:
            with trio.fail_after(DEADLINE_S):
                async with (
                    trio.open_nursery() as nursery,
                    one_voter_controller(listeners=listeners, metadata_log_dir=quorum_dir) as node,
                ):
                    channel = node.channel()
                    if phase == "delete while down":
                        deleted = await channel.request(
                            20, 6, {"topics": [{"name": "doomed", "topic_id": uuid.UUID(int=0)}], "timeout_ms": 5000}
                        )
                        assert deleted.responses[0].error_code == 0
                    else:
                        broker.attach_controller(channel, functools.partial(committed_offset, node.driver))
                        broker.open()
                        await nursery.start(broker.publisher.run)
                        if phase == "create":
                            await register(node, 1, 9092)
                            for name in ("doomed", "kept"):
                                (result,) = await broker.create_topics([NewTopic(name, 1, {})])
                                assert not isinstance(result, ControllerError), result
                            assert stray.is_dir()
                        else:
                            assert await broker.publisher.wait_for_offset(node.driver.delivered_offset - 1)
                            # Replaying the log from its start deletes it again (created, then removed).
                            assert not stray.exists() and ("kept", 0) in broker.replicas
                            # A directory no record names (left by a snapshot that no longer has
                            # its topic, or by hand) is a stray: deleted after the first image.
                            assert broker.remove_stray_partitions() == [("orphan", 0)]
                            assert not orphan.exists() and (tmp_path / "data" / "kept-0").is_dir()
                            assert (quorum_dir / "__cluster_metadata-0").is_dir()
                    await channel.aclose()
                    nursery.cancel_scope.cancel()
        finally:
            await broker.aclose()
