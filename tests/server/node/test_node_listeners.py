"""Every client listener of ``listeners`` is served, and each answers with its own endpoints: a
single node (``kafkalike serve`` without a cluster's config) on two advertised listeners and a
third it binds but does not advertise, on which Kafka's rule leaves it without brokers and its
partitions LISTENER_NOT_FOUND (v6+) or LEADER_NOT_AVAILABLE (before)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.config import BrokerConfig
from kafkalike.server.node import Node
from kafkalike.testing.wire_client import AsyncWireClient

DEADLINE_S = 30
METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 3, 10, 60
ALL_TOPICS = {"topics": None, "allow_auto_topic_creation": False}


def _config(tmp_path: Path, **more: str) -> BrokerConfig:
    return BrokerConfig(
        {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,HIDDEN://127.0.0.1:0",
            "advertised.listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://localhost:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,HIDDEN:PLAINTEXT",
            **more,
        }
    )


async def _coordinator(port: int, group: str) -> Any:
    """FindCoordinator's answer once the offsets topic is there (the first asks may make it and
    be COORDINATOR_NOT_AVAILABLE, as Kafka's)."""
    while True:
        found = await _ask(port, FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        if found.coordinators[0].error_code != ErrorCode.COORDINATOR_NOT_AVAILABLE:
            return found.coordinators[0]
        await trio.sleep(0.05)  # the broker's own topic creation is not observable from here


async def _ask(port: int, api_key: int, version: int, body: dict[str, Any]) -> Any:
    client = await AsyncWireClient.connect("127.0.0.1", port)
    try:
        return await client.request(api_key, version, body)
    finally:
        await client.aclose()


async def test_a_single_node_answers_each_listener_with_that_listeners_address(tmp_path: Path) -> None:
    node = Node(_config(tmp_path), seed_topics=[("orders", 2)])
    assert node.single
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            assert node.broker is not None
            bound = node.broker.bound_listeners
            assert list(bound) == ["PLAINTEXT", "INTERNAL", "HIDDEN"]
            ports = {name: port for name, (_, port) in bound.items()}
            assert len(set(ports.values())) == 3 and 0 not in ports.values()
            assert node.client_address == ("127.0.0.1", ports["PLAINTEXT"])
            # Port 0 advertised is the port its listener was bound on; the host as advertised.
            expected = {"PLAINTEXT": ("127.0.0.1", ports["PLAINTEXT"]), "INTERNAL": ("localhost", ports["INTERNAL"])}
            assert node.broker.advertised_listeners == expected
            for name, (host, port) in expected.items():
                metadata = await _ask(ports[name], METADATA, 12, ALL_TOPICS)
                assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [(1, host, port)], name
                orders = [t for t in metadata.topics if t.name == "orders"]
                assert [(p.error_code, p.leader_id) for t in orders for p in t.partitions] == [(0, 1)] * 2
                cluster = await _ask(ports[name], DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
                assert [(b.broker_id, b.host, b.port) for b in cluster.brokers] == [(1, host, port)], name
                coordinator = await _coordinator(ports[name], "g")
                assert (coordinator.error_code, coordinator.host, coordinator.port) == (0, host, port), name
            await node.stop()


@pytest.mark.parametrize(("version", "code"), [(5, ErrorCode.LEADER_NOT_AVAILABLE), (12, ErrorCode.LISTENER_NOT_FOUND)])
async def test_on_a_listener_it_does_not_advertise_no_broker_and_no_leader(
    tmp_path: Path, version: int, code: ErrorCode
) -> None:
    node = Node(_config(tmp_path), seed_topics=[("orders", 1)])
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            assert node.broker is not None
            hidden = node.broker.bound_listeners["HIDDEN"][1]
            metadata = await _ask(hidden, METADATA, version, ALL_TOPICS)
            assert list(metadata.brokers) == [] and metadata.controller_id == 1
            (orders,) = [t for t in metadata.topics if t.name == "orders"]
            (partition,) = orders.partitions
            assert (partition.error_code, partition.leader_id) == (code, -1)
            assert (list(partition.replica_nodes), list(partition.offline_replicas)) == ([1], [1])
            # The coordinator is there (found on PLAINTEXT, the control), and has no address on HIDDEN.
            plain = node.broker.bound_listeners["PLAINTEXT"][1]
            assert (await _coordinator(plain, "g")).error_code == 0
            found = await _ask(hidden, FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
            assert found.coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
            served = await _ask(plain, METADATA, version, ALL_TOPICS)
            assert served.topics[0].partitions[0].error_code == 0 and len(served.brokers) == 1
            await node.stop()


async def test_a_listener_that_cannot_be_bound_stops_the_start_naming_it(tmp_path: Path) -> None:
    taken = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = taken[0].socket.getsockname()[1]
    try:
        config = _config(
            tmp_path,
            listeners=f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{port},HIDDEN://127.0.0.1:0",
        )
        node = Node(config)
        with trio.fail_after(DEADLINE_S), pytest.raises(BaseException) as failed:
            async with trio.open_nursery() as nursery:
                await nursery.start(node.run)
        assert f"Socket server failed to bind to 127.0.0.1:{port}" in _startup_message(failed.value)
    finally:
        for listener in taken:
            await listener.aclose()


def _startup_message(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return str(exc)
