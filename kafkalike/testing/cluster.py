"""A cluster of in-process brokers for tests, shaped for several nodes before replication exists.

    with Cluster(brokers=1, seed_topics={"orders": 3}) as cluster:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        ...
        cluster.broker(1).restart()

Each node is an ``InProcessBroker`` with its own ``node.id`` (1, 2, ...), running in a thread
of its own, with or without an event loop around (``with`` or ``async with``; in ``async
with`` the start and stop run in a worker thread, so they do not block the caller's loop).
Tests written against this API keep working when nodes can be more than one: they address
nodes by id, and topic helpers go to the cluster, not to a node.

Only ``brokers=1`` runs today. Several nodes need replication (partition leaders and followers,
in-sync replicas, leader election) and a controller quorum, which kafkalike does not have yet,
so ``brokers > 1`` raises ``NotImplementedError`` rather than start nodes that would not form a
cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import trio

from kafkalike.protocol.records import Record
from kafkalike.testing.broker import Faults, InProcessBroker

T = TypeVar("T")
FIRST_NODE_ID = 1


class ClusterNode:
    """One broker of a ``Cluster``: its id, address and fault hooks; it can be stopped and started."""

    def __init__(self, node_id: int, broker: InProcessBroker) -> None:
        self.node_id = node_id
        self.broker = broker

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap_servers

    @property
    def running(self) -> bool:
        return self.broker.running

    @property
    def faults(self) -> Faults:
        return self.broker.faults

    def start(self) -> None:
        """Start a stopped node, on its previous port, with its data (also when ephemeral)."""
        if not self.running:
            self.broker.start()

    def stop(self) -> None:
        self.broker.stop()

    def restart(self) -> None:
        self.broker.restart()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"ClusterNode(node_id={self.node_id}, bootstrap={self.bootstrap!r}, {state})"


class Cluster:
    def __init__(
        self,
        brokers: int = 1,
        *,
        ephemeral: bool = True,
        data_dir: str | Path | None = None,
        overrides: Mapping[str, str] | None = None,
        test_profile: bool = True,
        seed_topics: Mapping[str, int] | None = None,
    ) -> None:
        """``data_dir`` (for a durable cluster) holds one directory per node, ``node-<id>``;
        ``overrides`` are broker configs (Kafka's names) every node gets."""
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        if brokers > 1:
            raise NotImplementedError(
                f"Cluster(brokers={brokers}): several brokers need replication, which kafkalike does not have "
                "yet (partition followers, in-sync replicas, leader election); use Cluster(brokers=1)"
            )
        self.brokers: list[ClusterNode] = []
        for node_id in range(FIRST_NODE_ID, FIRST_NODE_ID + brokers):
            node_dir = None if data_dir is None else Path(data_dir) / f"node-{node_id}"
            broker = InProcessBroker(
                ephemeral=ephemeral,
                data_dir=node_dir,
                overrides={**(overrides or {}), "node.id": str(node_id)},
                test_profile=test_profile,
                seed_topics=seed_topics,
            )
            self.brokers.append(ClusterNode(node_id, broker))

    @property
    def bootstrap_servers(self) -> str:
        """The running nodes' addresses, comma-separated, as clients take them."""
        return ",".join(node.bootstrap for node in self.brokers if node.running)

    def broker(self, node_id: int) -> ClusterNode:
        for node in self.brokers:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no broker with node id {node_id}; the nodes are {[n.node_id for n in self.brokers]}")

    # -- running ----------------------------------------------------------------------------

    def start(self) -> Cluster:
        started: list[ClusterNode] = []
        try:
            for node in self.brokers:
                node.start()
                started.append(node)
        except BaseException:
            for node in started:
                node.stop()
            raise
        return self

    def stop(self) -> None:
        for node in reversed(self.brokers):
            node.stop()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Cluster:
        return await _off_loop(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await _off_loop(self.stop)

    # -- topics and records -------------------------------------------------------------------

    def _any_node(self) -> InProcessBroker:
        """A running node: with one node, the controller and every partition's leader."""
        for node in self.brokers:
            if node.running:
                return node.broker
        raise RuntimeError("no broker of the cluster is running")

    def _leader(self, topic: str, partition: int) -> InProcessBroker:
        # One node leads every partition; with replication this asks the metadata for the leader.
        return self._any_node()

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        if not 1 <= replication_factor <= len(self.brokers):
            raise ValueError(
                f"replication factor {replication_factor} needs as many brokers; the cluster has {len(self.brokers)}"
            )
        self._any_node().create_topic(name, partitions, configs, replication_factor=replication_factor)

    def delete_topic(self, name: str) -> None:
        self._any_node().delete_topic(name)

    def topics(self) -> dict[str, int]:
        return self._any_node().topics()

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int = 0,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> int:
        """Append one record to the partition's leader; returns its offset."""
        return self._leader(topic, partition).produce(topic, value, key, partition, headers)

    def consume(
        self, topic: str, partition: int = 0, offset: int = 0, max_bytes: int = 1 << 20
    ) -> list[tuple[int, Record]]:
        """The records from ``offset`` up to the high watermark, read from the partition's leader."""
        return self._leader(topic, partition).consume(topic, partition, offset, max_bytes)


async def _off_loop(fn: Callable[[], T]) -> T:
    """Run blocking start/stop off the caller's event loop: a trio worker thread inside trio,
    the default executor elsewhere (asyncio)."""
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return await asyncio.get_running_loop().run_in_executor(None, fn)
    return await trio.to_thread.run_sync(fn)
