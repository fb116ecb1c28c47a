"""Nodes in one trio run: every role combination starts and stops cleanly; three combined nodes
elect one leader and replay the same image; a broker-only node follows the log as an observer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trio

from kafkalike.raft.log import MemoryRaftLog
from kafkalike.server.config import BrokerConfig
from kafkalike.server.node import Node
from kafkalike.server.quorum.channel import NetworkFaults
from kafkalike.testing.wire_client import AsyncWireClient

DEADLINE_S = 30
CLUSTER = "node-test-cluster-00000A"
FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "800",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "800",
    # A restarted broker (a new incarnation) registers once its predecessor's session lapsed.
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "300",
}


class Nodes:
    """Node configs over controller ports bound up front (the voters' endpoints name them)."""

    ephemeral = True  # partitions in memory

    def __init__(self, tmp_path: Path, voters: int, brokers_only: int = 0) -> None:
        self.tmp_path = tmp_path
        self.voter_ids = list(range(1, voters + 1))
        self.observer_ids = list(range(voters + 1, voters + brokers_only + 1))
        self.bound: dict[int, list[trio.SocketListener]] = {}
        self.ports: dict[int, int] = {}
        self.logs: dict[int, MemoryRaftLog] = {}
        self.faults = NetworkFaults()
        self.nodes: dict[int, Node] = {}
        self.started: set[int] = set()  # reported started: a broker registered and unfenced

    async def bind(self) -> None:
        for node_id in self.voter_ids:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            self.bound[node_id] = listeners
            self.ports[node_id] = listeners[0].socket.getsockname()[1]

    def config(self, node_id: int, roles: str) -> BrokerConfig:
        voters = ",".join(f"{i}@127.0.0.1:{self.ports[i]}" for i in self.voter_ids)
        listeners = ["PLAINTEXT://127.0.0.1:0"] if "broker" in roles else []
        if "controller" in roles:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.ports[node_id]}")
        return BrokerConfig(
            {
                "process.roles": roles,
                "node.id": str(node_id),
                "controller.quorum.voters": voters,
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "listeners": ",".join(listeners),
                "log.dirs": str(self.tmp_path / f"node-{node_id}"),
                "cluster.id": CLUSTER,
                **FAST,
            }
        )

    async def start(self, nursery: trio.Nursery, node_id: int, roles: str) -> Node:
        node = Node(
            self.config(node_id, roles),
            ephemeral=self.ephemeral,
            faults=self.faults,
            memory_log=self.logs.setdefault(node_id, MemoryRaftLog()),
            controller_bound=self.bound.pop(node_id, None),
        )
        self.nodes[node_id] = node
        await nursery.start(node.run)
        self.started.add(node_id)
        return node

    async def stop_in_turn(self) -> None:
        """Each node stopped gracefully in turn, the active controller last, and the last one
        killed: its controlled shutdown would wait for a quorum that no longer exists (five
        minutes, as Kafka's broker waits), as ``Cluster.stop`` does."""
        running = [n for n in self.nodes.values() if n.broker is not None or n.driver is not None]
        running.sort(key=lambda n: n.driver is not None and n.driver.is_leader)
        for node in running[:-1]:
            await node.stop()
        if running:
            await running[-1].kill()

    def leaders(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.driver is not None and n.driver.is_leader]

    async def wait(self, predicate: Callable[[], bool]) -> None:
        """Until ``predicate()`` holds after some node's quorum step."""
        while not predicate():
            async with trio.open_nursery() as nursery:
                for node in self.nodes.values():
                    if node.driver is not None:
                        nursery.start_soon(_changed_then_cancel, node, nursery.cancel_scope)


async def _changed_then_cancel(node: Node, scope: trio.CancelScope) -> None:
    assert node.driver is not None
    await node.driver.changed()
    scope.cancel()


async def create_topic(port: int, name: str, partitions: int) -> None:
    """Create a topic at the active controller at ``port`` (the nodes' brokers registered themselves)."""
    client = await AsyncWireClient.connect("127.0.0.1", port)
    try:
        topic = {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        created = await client.request(19, 7, {"topics": [topic], "timeout_ms": 5000})
        assert created.topics[0].error_code == 0, created
    finally:
        await client.aclose()


async def test_a_single_node_without_a_config_serves_clients_and_stops(tmp_path: Path) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    node = Node(config, seed_topics=[("orders", 2)])
    assert node.single and node.roles == ["broker", "controller"]
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            assert node.caught_up() and node.client_address is not None and node.controller_address is None
            client = await AsyncWireClient.connect(*node.client_address)
            metadata = await client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
            assert [t.name for t in metadata.topics] == ["orders"]
            await client.aclose()
            await node.stop()
    assert node.broker is None and (tmp_path / "data" / "meta.properties").exists()


async def test_three_combined_nodes_elect_one_leader_and_replay_the_same_image(tmp_path: Path) -> None:
    nodes = Nodes(tmp_path, 3)
    await nodes.bind()
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await start_together(nursery, nodes, "broker,controller")
            await nodes.wait(
                lambda: (
                    len(nodes.leaders()) == 1
                    and all(n.caught_up() for n in nodes.nodes.values())
                    and nodes.started == set(nodes.voter_ids)
                )
            )
            (leader,) = nodes.leaders()
            assert leader.controller is not None
            await leader.controller.wait_active()
            await create_topic(nodes.ports[leader.node_id], "orders", 3)
            end = leader.metadata_offset
            await nodes.wait(lambda: all(n.metadata_offset >= end for n in nodes.nodes.values()))
            images = [n.image.image for n in nodes.nodes.values()]
            topic = images[0].topic("orders")
            assert topic is not None and len(topic.partitions) == 3
            assert all(image.records() == images[0].records() for image in images)
            assert len({image.provenance.last_offset for image in images}) == 1
            # Every node's broker serves clients, and the controller host replays the same log.
            assert all(n.broker is not None and n.client_address is not None for n in nodes.nodes.values())
            assert leader.controller.image.topic("orders") == topic
            await nodes.stop_in_turn()
            nursery.cancel_scope.cancel()
    assert all(n.driver is None and n.broker is None for n in nodes.nodes.values())


async def start_together(nursery: trio.Nursery, nodes: Nodes, roles: str) -> None:
    """Start every voter at once and wait until each reports started: a combined node does so
    only once its broker is registered and unfenced, which needs a leader, so none can wait for
    the others before starting."""
    async with trio.open_nursery() as starting:
        for node_id in nodes.voter_ids:
            starting.start_soon(_start_one, nursery, nodes, node_id, roles)


async def _start_in_background(
    nodes: Nodes, node_id: int, roles: str, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Start one node in a task of its own and report at once (``nodes.started`` says when the
    node itself reported started)."""
    async with trio.open_nursery() as nursery:
        task_status.started()
        await nodes.start(nursery, node_id, roles)


async def _start_one(nursery: trio.Nursery, nodes: Nodes, node_id: int, roles: str) -> None:
    await nodes.start(nursery, node_id, roles)


async def test_controller_only_voters_and_a_broker_only_observer_start_and_stop(tmp_path: Path) -> None:
    nodes = Nodes(tmp_path, 1, brokers_only=1)
    await nodes.bind()
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            controller = await nodes.start(nursery, 1, "controller")
            assert controller.broker is None and controller.controller_address is not None
            assert controller.client_address is None
            # The broker-only node reports started once it has caught up with the leader.
            broker = await nodes.start(nursery, 2, "broker")
            assert broker.caught_up() and broker.controller is None and broker.controller_address is None
            assert broker.driver is not None and not broker.driver.is_leader
            assert broker.client_address is not None
            assert controller.controller is not None
            await controller.controller.wait_active()
            await create_topic(nodes.ports[1], "events", 2)
            end = controller.metadata_offset
            await nodes.wait(lambda: broker.metadata_offset >= end)
            assert broker.image.image.topic("events") == controller.image.image.topic("events") is not None
            # The leader counts it an observer of the metadata log, never a voter.
            assert controller.driver is not None
            described = (await controller.driver.describe())["topics"][0]["partitions"][0]
            assert [v["replica_id"] for v in described["current_voters"]] == [1]
            assert [o["replica_id"] for o in described["observers"]] == [2]
            await broker.stop()
            await controller.stop()
            nursery.cancel_scope.cancel()


async def test_a_killed_node_resigns_nothing_and_a_stopped_leader_hands_over(tmp_path: Path) -> None:
    nodes = Nodes(tmp_path, 3)
    await nodes.bind()
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            for node_id in nodes.voter_ids:
                await nodes.start(nursery, node_id, "controller")
            await nodes.wait(lambda: len(nodes.leaders()) == 1)
            (leader,) = nodes.leaders()
            assert leader.driver is not None
            epoch = leader.driver.epoch
            await leader.stop()  # resigns: the others elect at once, well before the fetch timeout
            del nodes.nodes[leader.node_id]
            await nodes.wait(lambda: any(n.driver.epoch > epoch for n in nodes.leaders() if n.driver is not None))
            (second,) = nodes.leaders()
            await second.kill()
            assert second.driver is None and second.controller is None
            nursery.cancel_scope.cancel()


async def test_a_node_stopped_or_killed_starts_again_and_replays_the_log_into_a_new_image(tmp_path: Path) -> None:
    nodes = Nodes(tmp_path, 3)
    await nodes.bind()
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await start_together(nursery, nodes, "broker,controller")
            await nodes.wait(lambda: len(nodes.leaders()) == 1 and all(n.caught_up() for n in nodes.nodes.values()))
            (leader,) = nodes.leaders()
            assert leader.controller is not None
            await leader.controller.wait_active()
            await create_topic(nodes.ports[leader.node_id], "before", 1)
            follower = next(n for n in nodes.nodes.values() if n is not leader)
            await follower.stop()
            assert follower.driver is None and follower.broker is None
            await create_topic(nodes.ports[leader.node_id], "while-away", 2)
            await nursery.start(follower.run)  # the same node object, on its ports and its (memory) log
            end = leader.metadata_offset
            await nodes.wait(lambda: follower.metadata_offset >= end)
            assert follower.image.image.records() == leader.image.image.records()
            await follower.kill()
            await nursery.start(follower.run)
            await nodes.wait(lambda: follower.metadata_offset >= end)
            assert follower.image.image.topic("while-away") == leader.image.image.topic("while-away") is not None
            await nodes.stop_in_turn()
            nursery.cancel_scope.cancel()


async def test_the_single_node_on_its_own_one_voter_quorum_serves_and_keeps_its_topics(tmp_path: Path) -> None:
    """The single node on its own one-voter quorum: no CONTROLLER port, its broker registered with
    its own controller in process, its data directory formatted by itself, and its topics back
    after a restart."""
    # The restarted broker is a new incarnation: it registers once its predecessor's session lapsed.
    config = BrokerConfig(
        {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "broker.session.timeout.ms": "1500",
            "broker.heartbeat.interval.ms": "300",
        }
    )
    for start in range(2):
        node = Node(config, seed_topics=[("orders", 2)] if start == 0 else [])
        assert node.single
        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as nursery:
                await nursery.start(node.run)
                assert node.controller_address is None and node.client_address is not None
                assert node.driver is not None and node.driver.is_leader
                client = await AsyncWireClient.connect(*node.client_address)
                with trio.fail_after(10):
                    while True:  # seed topics go through the controller once the broker registered
                        metadata = await client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
                        if [t.name for t in metadata.topics] == ["orders"]:
                            break
                        await node.driver.changed()
                assert [b.node_id for b in metadata.brokers] == [1]
                assert metadata.cluster_id == node.cluster_id
                await client.aclose()
                await node.stop()
    assert (tmp_path / "data" / "meta.properties").exists()
    assert (tmp_path / "data" / "__cluster_metadata-0").is_dir()
