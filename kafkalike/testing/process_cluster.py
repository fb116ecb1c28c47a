"""Clusters of real node processes on loopback, kafkalike's or Apache Kafka's, behind one node API.

Every node is a KRaft node started from a ``server.properties`` written here with Kafka's own names
(``node.id``, ``process.roles``, ``controller.quorum.voters``, ``listeners``, ``advertised.listeners``,
``controller.listener.names``, ``inter.broker.listener.name``, ``log.dirs``), its directory formatted
by the product's storage tool, the same cluster id for all. Nothing here asks of a node what a
Kafka node would not be told, so the same scenario runs against either product:

    with KafkalikeCluster(nodes=3, data_dir=tmp_path) as cluster:   # or ApacheKafkaCluster(...)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        leader = cluster.active_controller()
        cluster.node(leader).kill()          # SIGKILL; stop() is SIGTERM, pause()/resume() SIGSTOP/SIGCONT
        cluster.node(leader).start()         # same ports, same data

Each node has a client port (``PLAINTEXT``) and a controller port (``CONTROLLER``), both fixed
before any node starts, since every node's ``controller.quorum.voters`` names every voter. On disk:
``DATA_DIR/node-<id>/`` holds ``server.properties``, ``data/`` (``log.dirs``) and ``output.log``
(everything the process printed). A node is ready when a Metadata request sent to it lists the
node itself (it is registered and unfenced in its own view); the cluster is ready when every node
is, and Metadata lists them all.
"""

from __future__ import annotations

import base64
import collections
import concurrent.futures
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Generic, Self, TypeVar

from kafkalike.testing.cluster_requests import (
    HOST,
    PROBE_TIMEOUT_S,
    NodeAddress,
    QuorumView,
    create_topic,
    describe_quorum,
    metadata_brokers,
    partition_leaders,
    quorum_answers,
)

T = TypeVar("T")
FIRST_NODE_ID = 1
# With a base port P, node i's client port is P+i-1 and its controller port P+100+i-1.
CONTROLLER_PORT_OFFSET = 100
MAX_NODES = CONTROLLER_PORT_OFFSET - 1
COMBINED_ROLES = "broker,controller"
CONTROLLER_ROLE = "controller"
BROKER_ROLE = "broker"
OUTPUT_LINES_KEPT = 1000
POLL_INTERVAL_S = 0.05


class NodeExited(RuntimeError):
    """A node's process ended before it was ready; ``reason`` is the one line that says why."""

    def __init__(self, node_id: int, returncode: int, reason: str) -> None:
        super().__init__(f"node {node_id} did not start (exit status {returncode}): {reason}")
        self.node_id = node_id
        self.returncode = returncode
        self.reason = reason


class NodeNotReady(RuntimeError):
    pass


def wait_until(condition: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll ``condition`` (another process's state has no event to wait on) until it returns a
    value other than None or False, at most ``timeout_s``; NodeNotReady naming ``what`` after that."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise NodeNotReady(f"no {what} after {timeout_s:g} s")
        time.sleep(POLL_INTERVAL_S)


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (all held open while choosing, so none repeats)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def plan_addresses(nodes: int, base_port: int = 0, extra_listeners: Sequence[str] = ()) -> list[NodeAddress]:
    """Every node's ports: from ``base_port`` (see CONTROLLER_PORT_OFFSET; the k-th of
    ``extra_listeners``, more client listeners, k+2 offsets up), or free ones when it is 0."""
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"a cluster has 1 to {MAX_NODES} nodes, not {nodes}")
    ids = range(FIRST_NODE_ID, FIRST_NODE_ID + nodes)
    per_node = 2 + len(extra_listeners)
    if base_port == 0:
        ports = free_ports(per_node * nodes)
        planned = [ports[per_node * i : per_node * (i + 1)] for i in range(nodes)]
    else:
        if not 1 <= base_port <= 65535 - (per_node - 1) * CONTROLLER_PORT_OFFSET - nodes:
            raise ValueError(f"base port {base_port} leaves no room for {nodes} nodes' client and controller ports")
        planned = [[base_port + k * CONTROLLER_PORT_OFFSET + i for k in range(per_node)] for i in range(nodes)]
    return [
        NodeAddress(n, own[0], own[1], listener_ports=tuple(zip(extra_listeners, own[2:], strict=True)))
        for n, own in zip(ids, planned, strict=True)
    ]


def voters_value(addresses: Iterable[NodeAddress]) -> str:
    """``controller.quorum.voters``: id@host:port of every controller."""
    return ",".join(f"{a.node_id}@{a.host}:{a.controller_port}" for a in addresses)


def node_properties(
    address: NodeAddress, voters: Sequence[NodeAddress], log_dir: Path, roles: str = COMBINED_ROLES
) -> dict[str, str]:
    """A KRaft node's server.properties, in Kafka's names: a combined node (the default); with
    ``roles="controller"``, a controller-only one (its CONTROLLER listener alone); with
    ``roles="broker"``, a broker-only one, not one of ``voters`` (no CONTROLLER listener: it
    reaches the voters at theirs)."""
    extra = [f"{name}://{address.on(name)}" for name, _ in address.listener_ports]
    properties = {
        "node.id": str(address.node_id),
        "process.roles": roles,
        "controller.quorum.voters": voters_value(voters),
        "listeners": ",".join([f"PLAINTEXT://{address.client}", *extra, f"CONTROLLER://{address.controller}"]),
        "advertised.listeners": ",".join([f"PLAINTEXT://{address.client}", *extra]),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(
            [
                "PLAINTEXT:PLAINTEXT",
                *(f"{name}:PLAINTEXT" for name, _ in address.listener_ports),
                "CONTROLLER:PLAINTEXT",
            ]
        ),
        "log.dirs": str(log_dir),
    }
    if roles == CONTROLLER_ROLE:
        properties["listeners"] = f"CONTROLLER://{address.controller}"
        for broker_only in ("advertised.listeners", "inter.broker.listener.name"):
            del properties[broker_only]
    elif roles == BROKER_ROLE:
        if any(v.node_id == address.node_id for v in voters):
            raise ValueError(f"broker-only node {address.node_id} cannot be one of the voters")
        properties["listeners"] = ",".join([f"PLAINTEXT://{address.client}", *extra])
    elif roles != COMBINED_ROLES:
        raise ValueError(
            f"process.roles={roles}: the kit runs {COMBINED_ROLES}, {CONTROLLER_ROLE} or {BROKER_ROLE} nodes"
        )
    return properties


def write_properties(path: Path, properties: Mapping[str, str]) -> None:
    path.write_text("".join(f"{name}={value}\n" for name, value in properties.items()), encoding="utf-8")


def random_cluster_id() -> str:
    """A cluster id as Kafka's Uuid.randomUuid prints one (never starting with '-', which reads as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def formatted_cluster_id(log_dir: Path) -> str | None:
    """The cluster id in ``log_dir``'s meta.properties, or None when the directory is not formatted."""
    try:
        text = (log_dir / "meta.properties").read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "cluster.id":
            return value.strip()
    return None


class NodeProcess:
    """One node's process. Subclasses say how the product formats a directory and runs a node."""

    def __init__(self, address: NodeAddress, node_dir: Path, properties: Mapping[str, str]) -> None:
        self.address = address
        self.node_dir = node_dir
        self.properties = dict(properties)
        self.proc: subprocess.Popen[str] | None = None
        self.output: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES_KEPT)
        self.paused = False
        self._drainer: threading.Thread | None = None

    # -- what a product defines ------------------------------------------------------------------

    def format_command(self, cluster_id: str) -> list[str]:
        raise NotImplementedError

    def serve_command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def exit_reason(self) -> str:
        """The line of the output that says why the process stopped (the last one by default)."""
        lines = [line.strip() for line in self.output if line.strip()]
        return lines[-1] if lines else "(no output)"

    # -- addresses and state ---------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.address.node_id

    @property
    def bootstrap(self) -> str:
        return self.address.client

    @property
    def controller_bootstrap(self) -> str:
        return self.address.controller

    @property
    def config_path(self) -> Path:
        return self.node_dir / "server.properties"

    @property
    def log_dir(self) -> Path:
        return Path(self.properties["log.dirs"].split(",")[0])

    @property
    def is_broker(self) -> bool:
        """Whether the node has the broker role (a client listener); else it is a controller only."""
        return "broker" in self.properties.get("process.roles", "")

    @property
    def is_voter(self) -> bool:
        """Whether the node has the controller role (every controller here is a static voter)."""
        return "controller" in self.properties.get("process.roles", "")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    # -- life cycle --------------------------------------------------------------------------------

    def prepare(self, cluster_id: str) -> None:
        """Write server.properties and format the directory, unless it is formatted already."""
        self.node_dir.mkdir(parents=True, exist_ok=True)
        write_properties(self.config_path, self.properties)
        if formatted_cluster_id(self.log_dir) is not None:
            return
        ran = subprocess.run(
            self.format_command(cluster_id),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=self.environment(),
        )
        if ran.returncode != 0:
            raise NodeExited(self.node_id, ran.returncode, f"storage format failed: {ran.stdout}{ran.stderr}".strip())

    def launch(self) -> None:
        """Start the process and return at once; ``wait_ready`` waits for it."""
        if self.running:
            raise RuntimeError(f"node {self.node_id} is already running")
        self.paused = False
        log_file = (self.node_dir / "output.log").open("a", encoding="utf-8")
        self.proc = subprocess.Popen(
            self.serve_command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.environment(),
        )
        self._drainer = threading.Thread(target=self._drain, args=(self.proc, log_file), daemon=True)
        self._drainer.start()

    def _drain(self, proc: subprocess.Popen[str], log_file: IO[str]) -> None:
        assert proc.stdout is not None
        with proc.stdout, log_file:  # closed at EOF, so no pipe outlives the process
            for line in proc.stdout:
                self.output.append(line)
                log_file.write(line)
                log_file.flush()

    def answers(self) -> bool:
        """A broker: a Metadata request sent to it lists it (it is registered and unfenced in its own
        view). A controller only: it answers DescribeQuorum on its controller port (with an error
        when it is not the leader)."""
        if self.is_broker:
            return self.node_id in metadata_brokers(self.address, timeout_s=PROBE_TIMEOUT_S)
        return quorum_answers(self.address.host, self.address.controller_port)

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Until the node ``answers``. NodeExited if the process ends first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None:
                raise RuntimeError(f"node {self.node_id} was never started")
            if self.proc.poll() is not None:
                self._join_drainer()
                raise NodeExited(self.node_id, self.proc.returncode, self.exit_reason())
            if self.answers():
                return
            time.sleep(POLL_INTERVAL_S)
        raise NodeNotReady(f"node {self.node_id} not ready after {timeout_s:g} s; its last line: {self.exit_reason()}")

    def start(self, timeout_s: float = 120.0) -> None:
        """Start a stopped node on its ports and data, and wait until it is ready."""
        self.launch()
        self.wait_ready(timeout_s)

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM (a clean shutdown) and wait; SIGKILL if it takes longer than ``timeout_s``.
        The exit status (of an earlier exit, when it was not running), or None when it was never
        started or had to be killed."""
        if not self.terminate():
            return None if self.proc is None else self.proc.returncode
        return self.wait_stopped(timeout_s)

    def terminate(self) -> bool:
        """Send SIGTERM (and SIGCONT to a paused node, so it can act on it); False if not running."""
        if self.proc is None or not self.running:
            return False
        self.proc.send_signal(signal.SIGTERM)
        if self.paused:
            self.resume()
        return True

    def wait_stopped(self, timeout_s: float = 60.0) -> int | None:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self._join_drainer()
        return code

    def kill(self) -> None:
        """SIGKILL: nothing flushed, no controlled shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.paused = False
        self._join_drainer()

    def pause(self) -> None:
        """SIGSTOP: the process is frozen, its sockets open, as a node that stopped answering."""
        if not self.running:
            raise RuntimeError(f"node {self.node_id} is not running")
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def _join_drainer(self) -> None:
        if self._drainer is not None:
            self._drainer.join(30)

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running" if self.running else "stopped"
        return f"{type(self).__name__}(node_id={self.node_id}, bootstrap={self.bootstrap!r}, {state})"


N = TypeVar("N", bound=NodeProcess)


class ProcessCluster(Generic[N]):
    """Nodes of one product forming one cluster; ``start`` formats, launches and waits for all."""

    def __init__(self, nodes: Sequence[N], cluster_id: str | None = None, ready_timeout_s: float = 120.0) -> None:
        """``cluster_id``: by default the one a node's directory was formatted with, else a new one."""
        self.nodes = list(nodes)
        known = (formatted_cluster_id(node.log_dir) for node in self.nodes)
        self.cluster_id = cluster_id or next((c for c in known if c), None) or random_cluster_id()
        self.ready_timeout_s = ready_timeout_s

    def node(self, node_id: int) -> N:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node with id {node_id}; the nodes are {[n.node_id for n in self.nodes]}")

    @property
    def node_ids(self) -> list[int]:
        return [node.node_id for node in self.nodes]

    @property
    def broker_ids(self) -> list[int]:
        return [node.node_id for node in self.nodes if node.is_broker]

    def live_nodes(self, exclude: Iterable[int] = ()) -> list[N]:
        """The nodes running and not paused (that can answer), but those in ``exclude``."""
        skip = set(exclude)
        return [n for n in self.nodes if n.running and not n.paused and n.node_id not in skip]

    def live_brokers(self, exclude: Iterable[int] = ()) -> list[N]:
        return [n for n in self.live_nodes(exclude) if n.is_broker]

    @property
    def bootstrap_servers(self) -> str:
        """The live brokers' client addresses, comma-separated, as clients take them."""
        return ",".join(node.bootstrap for node in self.live_brokers())

    @property
    def controller_bootstrap_servers(self) -> str:
        """For ``--bootstrap-controller``: the live nodes' controller addresses."""
        return ",".join(node.controller_bootstrap for node in self.live_nodes())

    # -- running -----------------------------------------------------------------------------------

    def start(self, order: Sequence[int] | None = None) -> Self:
        """Format every node, launch them all (a quorum needs its voters together), wait for all;
        with ``order``, start the nodes one after the other in that order, each ready before the next."""
        try:
            with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:  # formats take ~1-5 s each
                for done in [pool.submit(node.prepare, self.cluster_id) for node in self.nodes]:
                    done.result()
            deadline = time.monotonic() + self.ready_timeout_s
            if order is not None:
                for node_id in order:
                    self.node(node_id).start(max(deadline - time.monotonic(), PROBE_TIMEOUT_S))
            for node in self.nodes:
                if not node.running:
                    node.launch()
            for node in self.nodes:
                node.wait_ready(max(deadline - time.monotonic(), PROBE_TIMEOUT_S))
            self.wait_for(
                self.formed,
                "Metadata listing every broker" if self.broker_ids else "quorum leader",
                max(deadline - time.monotonic(), PROBE_TIMEOUT_S),
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM to one node after the other (each waited for, SIGKILL past ``timeout_s``),
        broker-only nodes first and the active controller last, so that each broker's controlled
        shutdown finds a quorum to approve it; once the voters still running are no majority (and
        for the last node of a multi-node cluster) the rest are SIGKILLed, as no quorum is left
        to approve their controlled shutdown (they would wait, then log that it timed out)."""
        for node in self.nodes:
            if node.paused:
                node.resume()
        running = [node for node in self.nodes if node.running]
        if len(running) > 1:
            view = self.quorum(timeout_s=PROBE_TIMEOUT_S)
            leader = view.leader_id if view is not None else None
            running.sort(key=lambda node: (node.is_voter, node.node_id == leader))
            majority = sum(node.is_voter for node in self.nodes) // 2 + 1
            for index, node in enumerate(running):
                voters_left = sum(n.is_voter for n in running[index:])
                if index < len(running) - 1 and voters_left >= majority:
                    node.stop(timeout_s)
                else:
                    node.kill()
        elif running:
            running[0].stop(timeout_s)
        for node in self.nodes:
            node.kill()  # a node already gone: only joins its output

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- asking the cluster --------------------------------------------------------------------------

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
        wait_until(condition, timeout_s, what)

    def formed(self) -> bool:
        """Metadata lists every broker; without brokers, a controller names a leader."""
        if self.broker_ids:
            return self.metadata_brokers() >= set(self.broker_ids)
        return self.quorum() is not None

    def metadata_brokers(self, via: int | None = None) -> set[int]:
        """The broker ids a Metadata response lists, asked of node ``via`` or of the first live
        broker that answers; empty when none answers."""
        candidates = [self.node(via)] if via is not None else self.live_brokers()
        for node in candidates:
            brokers = metadata_brokers(node.address, timeout_s=PROBE_TIMEOUT_S)
            if brokers:
                return brokers
        return set()

    def partition_leaders(self, topic: str, via: int | None = None) -> dict[int, int]:
        """Partition -> leader id (-1: none) as Metadata lists ``topic``, asked of node ``via`` or
        of the first live broker; empty when the topic is unknown there or nobody answers."""
        node = self.node(via) if via is not None else self.live_brokers()[0]
        return partition_leaders(node.address, topic)

    def leader(self, topic: str, partition: int, via: int | None = None) -> int:
        """The id of the partition's leader as Metadata says (-1 when it has none or is unknown)."""
        return self.partition_leaders(topic, via).get(partition, -1)

    def quorum(self, exclude: Iterable[int] = (), timeout_s: float = PROBE_TIMEOUT_S) -> QuorumView | None:
        """DescribeQuorum from the first live node (not in ``exclude``) that answers it without an
        error: the controller ports first (where Kafka's leader answers at once and its followers
        refuse), then the client ports (where Kafka's brokers forward it to the active controller,
        which holds the request up to ``timeout_s`` when that controller is frozen)."""
        nodes = self.live_nodes(exclude)
        ports = [(n, n.address.controller_port) for n in nodes] + [
            (n, n.address.client_port) for n in nodes if n.is_broker
        ]
        for node, port in ports:
            view = describe_quorum(node.node_id, node.address.host, port, timeout_s)
            if view is not None and view.leader_id >= 0:
                return view
        return None

    def describe_quorum(self, node_id: int, timeout_s: float = PROBE_TIMEOUT_S) -> QuorumView | None:
        """DescribeQuorum at node ``node_id``'s controller port: what its leader says, or None when
        the node does not answer or is not the leader (Kafka's followers answer NOT_LEADER_OR_FOLLOWER)."""
        node = self.node(node_id)
        return describe_quorum(node_id, node.address.host, node.address.controller_port, timeout_s)

    def committed_leader(self, among: Iterable[int] | None = None) -> QuorumView | None:
        """The view of a live node (of ``among``) that leads and has committed a record of its own
        epoch (its high watermark reached its own log end offset), or None."""
        candidates = [n.node_id for n in self.live_nodes()] if among is None else list(among)
        for node_id in candidates:
            view = self.describe_quorum(node_id)
            if view is None or view.leader_id != node_id:
                continue
            if view.high_watermark >= view.voters.get(node_id, -1) > 0:
                return view
        return None

    def leader_after(self, epoch: int, among: Iterable[int] | None = None, timeout_s: float = 60.0) -> QuorumView:
        """Wait until a node (of ``among``) leads an epoch later than ``epoch`` and has committed in it."""
        nodes = None if among is None else list(among)

        def found() -> QuorumView | None:
            view = self.committed_leader(nodes)
            return view if view is not None and view.leader_epoch > epoch else None

        return wait_until(found, timeout_s, f"leader past epoch {epoch}")

    def active_controller(self, timeout_s: float = 60.0, exclude: Iterable[int] = ()) -> int:
        """The id of the quorum's leader, once a live node (not in ``exclude``) names one."""
        skip = set(exclude)
        found: list[QuorumView] = []

        def named() -> bool:
            view = self.quorum(skip)
            if view is None or view.leader_id in skip:
                return False
            found.append(view)
            return True

        self.wait_for(named, "active controller", timeout_s)
        return found[-1].leader_id

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        via: int | None = None,
        timeout_ms: int = 10000,
    ) -> int:
        """CreateTopics through node ``via`` (or the first live broker): the topic's error code."""
        node = self.node(via) if via is not None else self.live_brokers()[0]
        return create_topic(node.address, name, partitions, replication_factor, timeout_ms)


# -- kafkalike's nodes ---------------------------------------------------------------------------------


class KafkalikeNode(NodeProcess):
    """``kafkalike serve --config node-<id>/server.properties``, formatted by ``kafkalike storage format``."""

    def __init__(
        self, address: NodeAddress, node_dir: Path, properties: Mapping[str, str], env: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(address, node_dir, properties)
        self.env = dict(env or {})

    def format_command(self, cluster_id: str) -> list[str]:
        return [sys.executable, "-m", "kafkalike", "storage", "format", "-t", cluster_id, "-c", str(self.config_path)]

    def serve_command(self) -> list[str]:
        return [sys.executable, "-m", "kafkalike", "serve", "--config", str(self.config_path)]

    def environment(self) -> dict[str, str]:
        return {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}

    def exit_reason(self) -> str:
        """serve's one line (``kafkalike: ...``) when it printed one."""
        for line in reversed(self.output):
            if line.startswith("kafkalike: "):
                return line.removeprefix("kafkalike: ").strip()
        return super().exit_reason()


class KafkalikeCluster(ProcessCluster[KafkalikeNode]):
    """``nodes`` kafkalike processes, voters of one quorum, each broker and controller (or only
    controller)."""

    def __init__(
        self,
        nodes: int,
        data_dir: str | Path,
        *,
        base_port: int = 0,
        overrides: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        roles: str = COMBINED_ROLES,
        overrides_for: Mapping[int, Mapping[str, str]] | None = None,
        ready_timeout_s: float = 60.0,
        extra_listeners: Sequence[str] = (),
    ) -> None:
        """``overrides``: more configs (Kafka's names) for every node, ``overrides_for`` for some
        nodes only (by id); ``env``: variables for the node processes (``PYTHONPATH`` chooses the
        tree whose kafkalike they run); ``roles``: ``process.roles`` of every node
        (``controller``: a quorum of controllers, no broker); ``extra_listeners``: more client
        listeners (PLAINTEXT, advertised) besides PLAINTEXT, each on a port of its own."""
        root = Path(data_dir).absolute()
        addresses = plan_addresses(nodes, base_port, extra_listeners)
        members = []
        for address in addresses:
            node_dir = root / f"node-{address.node_id}"
            properties = node_properties(address, addresses, node_dir / "data", roles)
            properties.update({**(overrides or {}), **(overrides_for or {}).get(address.node_id, {})})
            members.append(KafkalikeNode(address, node_dir, properties, env))
        super().__init__(members, ready_timeout_s=ready_timeout_s)
