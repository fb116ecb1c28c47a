"""A cluster of in-process nodes for tests.

    with Cluster(brokers=3) as cluster:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        cluster.create_topic("orders", partitions=6)
        leader = cluster.leader("orders", 0)
        cluster.broker(leader).kill()          # stop dead; stop() is graceful, start() brings it back
        cluster.isolate(2)                     # node 2 cut off from the other nodes; heal() undoes it
        cluster.create_topic("payments", partitions=3, replication_factor=3)
        cluster.wait_in_sync("payments")       # every replica in every partition's ISR
        cluster.isr("payments", 0)             # (1, 2, 3)

``Cluster(brokers=1)`` (the default) is one ``InProcessBroker`` as node 1: a single node that is
its own controller, in memory unless ``ephemeral=False``. ``Cluster(brokers=N)`` for N > 1 is N
combined nodes (``process.roles=broker,controller``), :class:`~kafkalike.server.node.Node`s voting in
one metadata quorum, each running its own trio loop in a thread of its own, configured with
Kafka's names (``controller.quorum.voters``, PLAINTEXT and CONTROLLER listeners on loopback ports
chosen up front, so a restarted node keeps its ports). Their directories are on disk
(``data_dir``/node-<id>, or a temporary directory removed at ``stop`` when ``ephemeral``), so
``kill`` and ``start`` keep what was written. Every inter-node channel of every node consults one
:class:`~kafkalike.server.quorum.channel.NetworkFaults`: ``isolate(node_id)`` drops the node's
traffic with the others (the quorum's, the controller channel's, the inter-broker client's), the
clients' traffic is untouched.

Either kind works with or without an event loop around (``with`` or ``async with``; in
``async with`` the start and stop run in a worker thread, so they do not block the caller's
loop). Topic and record helpers go to the cluster (to the partition's leader), not to a node.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import trio

from kafkalike.protocol.records import Record
from kafkalike.server.config import TEST_PROFILE, BrokerConfig
from kafkalike.server.quorum.channel import NetworkFaults
from kafkalike.testing import broker as requests
from kafkalike.testing.broker import BROKER_LOGGER, ErrorLog, Faults, InProcessBroker, loop_thread
from kafkalike.testing.cluster_requests import NodeAddress, metadata_brokers, partition_isrs, partition_leaders
from kafkalike.testing.process_cluster import node_properties, plan_addresses

if TYPE_CHECKING:
    from kafkalike.server.node import Node

T = TypeVar("T")
FIRST_NODE_ID = 1
NO_LEADER = -1
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.02
# Elections and fencing in about a second rather than Kafka's several (the same paths, sooner);
# every one can be overridden.
FAST_CLUSTER = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "800",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "800",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
}


class ClusterNode:
    """One node of a single-node ``Cluster``: its id, address and fault hooks; it can be stopped and started."""

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

    @property
    def logged_errors(self) -> list[str]:
        return self.broker.logged_errors

    def start(self) -> None:
        """Start a stopped node, on its previous port, with its data (also when ephemeral)."""
        if not self.running:
            self.broker.start()

    def stop(self) -> None:
        self.broker.stop()

    def kill(self) -> None:
        """A single in-process broker has no harder stop than ``stop``."""
        self.broker.stop()

    def restart(self) -> None:
        self.broker.restart()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"ClusterNode(node_id={self.node_id}, bootstrap={self.bootstrap!r}, {state})"


class NodeThread:
    """One :class:`~kafkalike.server.node.Node` of a multi-node ``Cluster``, on a trio loop in a
    thread of its own; a new ``Node`` at each start, on the same configuration, ports and directory."""

    def __init__(self, address: NodeAddress, config: Mapping[str, str], faults: NetworkFaults) -> None:
        self.node_id = address.node_id
        self.address = address
        self.config = dict(config)
        self.faults = faults
        self.node: Node | None = None
        self._thread: threading.Thread | None = None
        self._errors = ErrorLog()

    @property
    def bootstrap(self) -> str:
        return self.address.client

    @property
    def running(self) -> bool:
        """Started and serving, its loop neither stopped nor crashed."""
        return self._thread is not None and self._thread.is_alive() and self.node is not None

    @property
    def logged_errors(self) -> list[str]:
        """What this node logged at ERROR or with a traceback, oldest first, across restarts."""
        return list(self._errors.records)

    def launch(self) -> threading.Event:
        """Start the node's thread; the event is set once it serves (or failed: see ``wait_started``)."""
        from kafkalike.server.node import Node

        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError(f"node {self.node_id} is already running")
        node = Node(BrokerConfig(self.config), faults=self.faults)
        ready = threading.Event()
        self._failure: list[BaseException] = []

        async def main() -> None:
            self._errors.thread_id = threading.get_ident()
            logger = logging.getLogger(BROKER_LOGGER)
            logger.addHandler(self._errors)
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(node.run)
                    self.node = node
                    ready.set()
            finally:
                logger.removeHandler(self._errors)
                self.node = None

        self._starting = node
        name = f"kafkalike-node-{self.node_id}"
        self._thread = loop_thread(main, ready, self._failure, self._errors, name, f"node {self.node_id}")
        return ready

    def wait_started(self, ready: threading.Event, timeout_s: float = START_TIMEOUT_S) -> None:
        if not ready.wait(timeout_s):
            self._starting.request_kill()
            raise RuntimeError(f"node {self.node_id} did not start within {timeout_s:g} s")
        if self._failure:
            raise RuntimeError(f"node {self.node_id} failed to start: {self._failure[0]}") from self._failure[0]

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start a stopped node on its ports and directory, and wait until it serves."""
        self.wait_started(self.launch(), timeout_s)

    def stop(self) -> None:
        """A graceful stop (the broker's controlled shutdown, a leader's resignation)."""
        self._end(lambda node: node.request_stop())

    def kill(self) -> None:
        """Stop dead, as a killed process: nothing resigned or handed over."""
        self._end(lambda node: node.request_kill())

    def restart(self) -> None:
        self.stop()
        self.start()

    def _end(self, how: Callable[[Node], None]) -> None:
        thread = self._thread
        if thread is None:
            return
        how(self._starting)
        thread.join(STOP_TIMEOUT_S)
        if thread.is_alive():
            self._starting.request_kill()
            thread.join(STOP_TIMEOUT_S)
        self._thread = None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"NodeThread(node_id={self.node_id}, bootstrap={self.bootstrap!r}, {state})"


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
        extra_listeners: Sequence[str] = (),
    ) -> None:
        """``data_dir`` (for a durable cluster) holds one directory per node, ``node-<id>``;
        ``overrides`` are configs (Kafka's names) every node gets, on top of the test profile
        (and, with several brokers, of FAST_CLUSTER); ``extra_listeners``: more client listeners
        (PLAINTEXT, advertised) besides PLAINTEXT on every node, with several brokers
        (``bootstrap_servers_on(name)``)."""
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        if not ephemeral and data_dir is None:
            raise ValueError("a durable cluster needs a data_dir")
        self.faults = NetworkFaults()
        self.seed_topics = dict(seed_topics or {})
        self._temporary: Path | None = None
        self.brokers: list[ClusterNode | NodeThread]
        if brokers == 1:
            if extra_listeners:
                raise ValueError("a single-broker Cluster serves PLAINTEXT only; extra_listeners need brokers >= 2")
            node_dir = None if data_dir is None else Path(data_dir) / f"node-{FIRST_NODE_ID}"
            broker = InProcessBroker(
                ephemeral=ephemeral,
                data_dir=node_dir,
                overrides={**(overrides or {}), "node.id": str(FIRST_NODE_ID)},
                test_profile=test_profile,
                seed_topics=seed_topics,
            )
            self.brokers = [ClusterNode(FIRST_NODE_ID, broker)]
            return
        if data_dir is None:
            data_dir = self._temporary = Path(tempfile.mkdtemp(prefix="kafkalike-cluster-"))
        root = Path(data_dir).absolute()
        addresses = plan_addresses(brokers, extra_listeners=extra_listeners)
        profile = {**(TEST_PROFILE if test_profile else {}), **FAST_CLUSTER}
        nodes: list[ClusterNode | NodeThread] = []
        for address in addresses:
            log_dir = root / f"node-{address.node_id}"
            config = {**profile, **node_properties(address, addresses, log_dir), **(overrides or {})}
            nodes.append(NodeThread(address, config, self.faults))
        self.brokers = nodes
        self.cluster_id = "kafkalike-test-cluster"

    @property
    def node_ids(self) -> list[int]:
        return [node.node_id for node in self.brokers]

    @property
    def bootstrap_servers(self) -> str:
        """The running nodes' addresses, comma-separated, as clients take them."""
        return ",".join(node.bootstrap for node in self.brokers if node.running)

    def bootstrap_servers_on(self, listener: str) -> str:
        """The running nodes' addresses on client listener ``listener`` (PLAINTEXT or one of
        ``extra_listeners``), comma-separated."""
        return ",".join(
            node.address.on(listener) for node in self.brokers if isinstance(node, NodeThread) and node.running
        )

    def broker(self, node_id: int) -> ClusterNode | NodeThread:
        for node in self.brokers:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no broker with node id {node_id}; the nodes are {self.node_ids}")

    node = broker

    @property
    def logged_errors(self) -> list[str]:
        return [f"node {n.node_id}: {e}" for n in self.brokers for e in n.logged_errors]

    # -- network faults between nodes ---------------------------------------------------------

    def isolate(self, node_id: int) -> None:
        """Cut node ``node_id`` off from every other node (clients still reach it)."""
        self.broker(node_id)  # a KeyError for a node that does not exist
        self.faults.isolate(node_id)

    def heal(self) -> None:
        """Every node reaches every other again."""
        self.faults.heal()

    # -- running ----------------------------------------------------------------------------

    def start(self, timeout_s: float = START_TIMEOUT_S) -> Cluster:
        """Start every node (a quorum's voters together) and wait until each broker's Metadata
        lists every broker."""
        try:
            if isinstance(self.brokers[0], ClusterNode):
                for single in self.brokers:
                    single.start()
                return self
            nodes = [n for n in self.brokers if isinstance(n, NodeThread)]
            _ensure_meta_properties(nodes, self.cluster_id)
            readiness = [(node, node.launch()) for node in nodes]
            deadline = time.monotonic() + timeout_s
            for node, ready in readiness:
                node.wait_started(ready, max(deadline - time.monotonic(), 0.1))
            self.wait_for(self.formed, "every broker listed by every broker", max(deadline - time.monotonic(), 0.1))
            for name, partitions in self.seed_topics.items():
                self.create_topic(name, partitions)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every node gracefully, one at a time, the active controller last, while the
        nodes still running hold a majority of the voters; the ones left then are stopped dead
        (nothing lost: their files are closed), as their controlled shutdown would wait for a
        quorum that no longer exists."""
        threads = [n for n in self.brokers if isinstance(n, NodeThread) and n.running]
        if threads:
            leaders = [
                n for n in threads if n.node is not None and n.node.driver is not None and n.node.driver.is_leader
            ]
            ordered = [n for n in threads if n not in leaders] + leaders
            majority = len(self.brokers) // 2 + 1  # every node is a voter
            for left, thread in zip(range(len(ordered), 0, -1), ordered, strict=True):
                if left > 1 and left >= majority:
                    thread.stop()
                else:
                    thread.kill()
        for node in self.brokers:
            node.stop()  # a node already stopped: nothing; one that failed to start: joined
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Cluster:
        return await _off_loop(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await _off_loop(self.stop)

    # -- asking the cluster ---------------------------------------------------------------------

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Poll ``condition`` (nodes in other threads have no event to wait on) until it holds;
        TimeoutError naming ``what`` after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} after {timeout_s:g} s")
            time.sleep(POLL_INTERVAL_S)

    def _running(self) -> list[NodeThread]:
        return [n for n in self.brokers if isinstance(n, NodeThread) and n.running]

    def formed(self) -> bool:
        """Every running node follows the same leader in the same epoch, and every running
        broker's Metadata lists every running broker."""
        running = self._running()
        ids = {n.node_id for n in running}
        views = set(self.quorum_state().values())
        if len(views) != 1 or next(iter(views))[0] not in ids:
            return False
        return all(metadata_brokers(n.address) == ids for n in running)

    def quorum_state(self) -> dict[int, tuple[int, int]]:
        """Each running node's view of the metadata quorum: node id -> (leader id, epoch)."""
        views = {}
        for thread in self._running():
            driver = thread.node.driver if thread.node is not None else None
            if driver is not None:
                views[thread.node_id] = (driver.leader_id, driver.epoch)
        return views

    def active_controller(self, timeout_s: float = START_TIMEOUT_S, exclude: Iterable[int] = ()) -> int:
        """The id of the quorum's leader (a single node: itself), once a running node not in
        ``exclude`` leads the latest epoch any running node knows and its controller is active."""
        if isinstance(self.brokers[0], ClusterNode):
            return self.brokers[0].node_id
        skip = set(exclude)
        found: list[int] = []

        def led() -> bool:
            views = self.quorum_state()
            if not views:
                return False
            latest = max(epoch for _, epoch in views.values())
            for thread in self._running():
                node = thread.node
                if thread.node_id in skip or node is None or node.driver is None:
                    continue
                if node.driver.is_leader and node.driver.epoch == latest and _controller_active(node):
                    found.append(thread.node_id)
                    return True
            return False

        self.wait_for(led, "active controller", timeout_s)
        return found[-1]

    def metadata_brokers(self, via: int | None = None) -> set[int]:
        """The broker ids Metadata lists, asked of node ``via`` (or the first running node)."""
        node = self._via(via)
        if isinstance(node, ClusterNode):
            return {node.node_id} if node.running else set()
        return metadata_brokers(node.address)

    def leader(self, topic: str, partition: int, via: int | None = None) -> int:
        """The id of the partition's leader as Metadata says (-1 when it has none or is unknown)."""
        node = self._via(via)
        if isinstance(node, ClusterNode):
            return node.node_id if partition < node.broker.topics().get(topic, 0) else NO_LEADER
        return partition_leaders(node.address, topic).get(partition, NO_LEADER)

    def isr(self, topic: str, partition: int, via: int | None = None) -> tuple[int, ...]:
        """The partition's in-sync replicas as Metadata says (sorted; empty when unknown)."""
        node = self._via(via)
        if isinstance(node, ClusterNode):
            return (node.node_id,) if partition < node.broker.topics().get(topic, 0) else ()
        return partition_isrs(node.address, topic).get(partition, ())

    def wait_in_sync(
        self, topic: str, replicas: Iterable[int] | None = None, timeout_s: float = START_TIMEOUT_S
    ) -> None:
        """Until every partition of ``topic`` has ``replicas`` (by default every running node)
        in its ISR, as the running nodes' Metadata says."""
        wanted = tuple(sorted(replicas if replicas is not None else (n.node_id for n in self._running())))

        def in_sync() -> bool:
            for node in self._running():
                isrs = partition_isrs(node.address, topic)
                if not isrs or any(tuple(b for b in isr if b in wanted) != wanted for isr in isrs.values()):
                    return False
            return True

        self.wait_for(in_sync, f"{topic}'s ISR holding {list(wanted)}", timeout_s)

    def _via(self, via: int | None) -> ClusterNode | NodeThread:
        if via is not None:
            return self.broker(via)
        for node in self.brokers:
            if node.running:
                return node
        raise RuntimeError("no broker of the cluster is running")

    def _address(self, node: ClusterNode | NodeThread) -> tuple[str, int]:
        if isinstance(node, ClusterNode):
            return node.broker.host, node.broker.port
        return node.address.host, node.address.client_port

    # -- topics and records -------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create the topic through a running node; with several nodes, return once every
        running node's Metadata lists a leader for each partition."""
        if not 1 <= replication_factor <= len(self.brokers):
            raise ValueError(
                f"replication factor {replication_factor} needs as many brokers; the cluster has {len(self.brokers)}"
            )
        requests.create_topic(*self._address(self._via(None)), name, partitions, configs, replication_factor)
        if len(self.brokers) > 1:
            self.wait_for(lambda: self._led_everywhere(name, partitions), f"leaders of {name} known to every node")

    def _led_everywhere(self, topic: str, partitions: int) -> bool:
        for node in self._running():
            leaders = partition_leaders(node.address, topic)
            if len(leaders) != partitions or NO_LEADER in leaders.values():
                return False
        return True

    def delete_topic(self, name: str) -> None:
        requests.delete_topics(*self._address(self._via(None)), [name])

    def topics(self) -> dict[str, int]:
        return requests.topics(*self._address(self._via(None)))

    def _leader_node(self, topic: str, partition: int) -> ClusterNode | NodeThread:
        if len(self.brokers) == 1:
            return self._via(None)  # it leads every partition
        leader = self.leader(topic, partition)
        if leader == NO_LEADER:
            raise RuntimeError(f"{topic}-{partition} has no leader")
        return self.broker(leader)

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int = 0,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> int:
        """Append one record to the partition's leader; returns its offset."""
        node = self._leader_node(topic, partition)
        return requests.produce(*self._address(node), topic, value, key, partition, headers)

    def consume(
        self, topic: str, partition: int = 0, offset: int = 0, max_bytes: int = 1 << 20
    ) -> list[tuple[int, Record]]:
        """The records from ``offset`` up to the high watermark, read from the partition's leader."""
        node = self._leader_node(topic, partition)
        return requests.consume(*self._address(node), topic, partition, offset, max_bytes)


def _controller_active(node: Node) -> bool:
    controller = node.controller
    return controller is None or bool(getattr(controller, "active", True))


def _ensure_meta_properties(nodes: list[NodeThread], cluster_id: str) -> None:
    """Format each node's directory as ``kafkalike storage format`` would (version 1, the
    cluster id, the node id) unless it is formatted already."""
    for node in nodes:
        directory = Path(node.config["log.dirs"].split(",")[0])
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "meta.properties"
        if not path.exists():
            path.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={node.node_id}\n", encoding="utf-8")


async def _off_loop(fn: Callable[[], T]) -> T:
    """Run blocking start/stop off the caller's event loop: a trio worker thread inside trio,
    the default executor elsewhere (asyncio)."""
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return await asyncio.get_running_loop().run_in_executor(None, fn)
    return await trio.to_thread.run_sync(fn)
