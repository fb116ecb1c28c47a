"""Run real Apache Kafka (KRaft) from its jars, for tests that compare this project's answers with
Kafka's own: one node (``ApacheKafkaProcess``, broker and controller in one JVM) or a cluster of
combined nodes (``ApacheKafkaCluster``, the node API of ``kafkalike.testing.process_cluster``).

The jars come from Maven Central (``compat_tests/java/tools/pom.xml`` copies ``kafka_2.13`` and its
dependencies into one directory); nothing is downloaded here. ``start`` picks two free loopback
ports, writes a ``server.properties``, formats the storage with Kafka's ``StorageTool`` and starts
``kafka.Kafka``, then waits until the broker answers a Metadata request listing itself. Everything
listens on 127.0.0.1 only; ``stop`` sends SIGTERM (SIGKILL after a timeout).
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from kafkalike.testing.cluster_requests import NodeAddress
from kafkalike.testing.process_cluster import (
    COMBINED_ROLES,
    CONTROLLER_ROLE,
    KafkalikeNode,
    NodeProcess,
    ProcessCluster,
    node_properties,
    plan_addresses,
)
from kafkalike.testing.wire_client import WireClient

# What every run gets: a single node acting as broker and controller, loopback listeners,
# internal topics that a single node can host.
BASE_PROPERTIES = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


LOG4J2_WARN_TO_STDERR = (
    "appender.err.type = Console\nappender.err.name = STDERR\nappender.err.target = SYSTEM_ERR\n"
    "appender.err.layout.type = PatternLayout\nappender.err.layout.pattern = [%d] %p %m (%c)%n\n"
    "rootLogger.level = {level}\nrootLogger.appenderRef.err.ref = STDERR\n"
)
# Where scripts/compat.py (compat_lib.tools.resolve_ak) puts a version's jars, in this checkout.
RESOLVED_JARS = Path(__file__).resolve().parents[2] / "compat_tests" / ".work"


def resolved_lib_dir(version: str) -> Path:
    """The directory of Apache Kafka ``version``'s jars that ``resolve_ak`` made; RuntimeError if absent."""
    lib = RESOLVED_JARS / f"ak-{version}" / "lib"
    if not any(lib.glob("kafka_2.13-*.jar")):
        raise RuntimeError(
            f"no Apache Kafka {version} jars in {lib}: resolve them first "
            f"(scripts/compat_lib/tools.py resolve_ak({version!r}), which scripts/compat.py runs)"
        )
    return lib


def jar_version(lib_dir: Path) -> str:
    """The Kafka version of a directory of jars, read from its kafka_2.13 jar's name."""
    for jar in sorted(Path(lib_dir).glob("kafka_2.13-*.jar")):
        return jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")
    raise RuntimeError(f"{lib_dir} holds no kafka_2.13 jar")


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise RuntimeError("no java on PATH (and JAVA_HOME unset)")
    return found


class ApacheKafkaProcess:
    """One Apache Kafka 4.x node in KRaft combined mode, started from a directory of jars."""

    def __init__(
        self,
        lib_dir: Path,
        work_dir: Path,
        overrides: Mapping[str, str] | None = None,
        heap: str = "512m",
        ready_timeout_s: float = 120.0,
        format_command: Callable[[Path, str], list[str]] | None = None,
    ) -> None:
        """``format_command``: the command line that formats the storage, given the
        server.properties and the cluster id (default: Kafka's own StorageTool format)."""
        self.lib_dir = Path(lib_dir)
        self.work_dir = Path(work_dir)
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.ready_timeout_s = ready_timeout_s
        self.format_command = format_command
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self.host = "127.0.0.1"
        self.port = 0
        self.controller_port = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def _classpath(self) -> str:
        if not any(self.lib_dir.glob("kafka_2.13-*.jar")):
            raise RuntimeError(f"{self.lib_dir} holds no kafka_2.13 jar")
        return str(self.lib_dir / "*")

    def properties(self) -> dict[str, str]:
        props = dict(BASE_PROPERTIES)
        props.update(
            {
                "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
                "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
                "log.dirs": str(self.work_dir / "logs"),
            }
        )
        props.update(self.overrides)
        return props

    def start(self) -> ApacheKafkaProcess:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port, self.controller_port = free_port(), free_port()
        config = self.work_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        log4j = self.work_dir / "log4j2.properties"
        log4j.write_text(LOG4J2_WARN_TO_STDERR.format(level="WARN"))
        java = java_executable()
        jvm = [java, f"-Xmx{self.heap}", f"-Dlog4j2.configurationFile={log4j}", "-cp", self._classpath()]
        cluster_id = "-"
        while cluster_id.startswith("-"):  # as Kafka's Uuid.randomUuid: "-..." would read as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        command = [*jvm, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)]
        if self.format_command is not None:
            command = self.format_command(config, cluster_id)
        formatted = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if formatted.returncode != 0:
            raise RuntimeError(f"storage format failed:\n{formatted.stdout}{formatted.stderr}")
        self.proc = subprocess.Popen(
            [*jvm, "kafka.Kafka", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        self._wait_ready()
        return self

    def _drain(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with proc.stdout:
            for line in proc.stdout:
                self.output.append(line)

    def _wait_ready(self) -> None:
        """Until a Metadata request lists this node (the broker has joined its own quorum)."""
        deadline = time.monotonic() + self.ready_timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError("Apache Kafka exited before it was ready:\n" + "".join(self.output[-80:]))
            try:
                with WireClient(self.host, self.port, timeout_s=5.0) as client:
                    response = client.request(3, 12, {"topics": [], "allow_auto_topic_creation": False})
                    if response.brokers:
                        return
            except (OSError, ConnectionError) as exc:
                last = exc
            time.sleep(0.25)
        self.kill()
        raise RuntimeError(f"Apache Kafka not ready after {self.ready_timeout_s} s ({last}):\n" + "".join(self.output))

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM and wait for a controlled shutdown; SIGKILL if it takes longer than ``timeout_s``."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.terminate()
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def __enter__(self) -> ApacheKafkaProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def kafka_jvm_options(root: Path, heap: str, log_level: str) -> list[str]:
    """A Kafka node's JVM options: its heap, and logging at ``log_level`` to stderr (configured in ``root``)."""
    root.mkdir(parents=True, exist_ok=True)
    log4j = root / "log4j2.properties"
    log4j.write_text(LOG4J2_WARN_TO_STDERR.format(level=log_level))
    return [f"-Xmx{heap}", f"-Dlog4j2.configurationFile={log4j}"]


class ApacheKafkaNode(NodeProcess):
    """One combined Apache Kafka node (``kafka.Kafka``), formatted by Kafka's StorageTool."""

    def __init__(
        self, address: NodeAddress, node_dir: Path, properties: Mapping[str, str], lib_dir: Path, jvm_options: list[str]
    ) -> None:
        super().__init__(address, node_dir, properties)
        self.lib_dir = lib_dir
        self.jvm_options = jvm_options

    def _java(self) -> list[str]:
        return [java_executable(), *self.jvm_options, "-cp", str(self.lib_dir / "*")]

    def format_command(self, cluster_id: str) -> list[str]:
        return [*self._java(), "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.config_path)]

    def serve_command(self) -> list[str]:
        return [*self._java(), "kafka.Kafka", str(self.config_path)]

    def exit_reason(self) -> str:
        """Kafka's last ERROR line, when it logged one."""
        for line in reversed(self.output):
            if " ERROR " in line:
                return line.strip()
        return super().exit_reason()


class ApacheKafkaCluster(ProcessCluster[ApacheKafkaNode]):
    """``nodes`` Apache Kafka JVMs, the static voters of one quorum, each broker and controller
    (``process.roles=broker,controller``, or controller only), with Kafka's defaults otherwise
    (timeouts included) but the internal topics' replication capped by the node count. About
    400 MB and 15 s per node."""

    def __init__(
        self,
        nodes: int = 3,
        *,
        data_dir: str | Path,
        version: str | None = None,
        lib_dir: str | Path | None = None,
        base_port: int = 0,
        overrides: Mapping[str, str] | None = None,
        heap: str = "512m",
        log_level: str = "WARN",
        roles: str = COMBINED_ROLES,
        overrides_for: Mapping[int, Mapping[str, str]] | None = None,
        ready_timeout_s: float = 180.0,
        extra_listeners: Sequence[str] = (),
    ) -> None:
        """The jars: ``lib_dir``, or the ones ``resolve_ak(version)`` put in this checkout.
        ``roles``: ``process.roles`` of every node (``controller``: controllers only, no broker);
        ``overrides_for``: more configs for some nodes only (by id); ``extra_listeners``: more
        client listeners besides PLAINTEXT (as KafkalikeCluster's)."""
        if lib_dir is None:
            if version is None:
                raise ValueError("ApacheKafkaCluster needs a version or a lib_dir")
            lib_dir = resolved_lib_dir(version)
        self.lib_dir = Path(lib_dir)
        self.version = jar_version(self.lib_dir)
        root = Path(data_dir).absolute()
        jvm_options = kafka_jvm_options(root, heap, log_level)
        defaults = {
            "offsets.topic.replication.factor": str(min(3, nodes)),
            "transaction.state.log.replication.factor": str(min(3, nodes)),
            "transaction.state.log.min.isr": str(min(2, nodes)),
            "share.coordinator.state.topic.replication.factor": str(min(3, nodes)),
            "share.coordinator.state.topic.min.isr": str(min(2, nodes)),
            "group.initial.rebalance.delay.ms": "0",
        }
        addresses = plan_addresses(nodes, base_port, extra_listeners)
        members = []
        for address in addresses:
            node_dir = root / f"node-{address.node_id}"
            broker_defaults = defaults if roles == COMBINED_ROLES else {}
            properties = {**node_properties(address, addresses, node_dir / "data", roles), **broker_defaults}
            properties.update({**(overrides or {}), **(overrides_for or {}).get(address.node_id, {})})
            members.append(ApacheKafkaNode(address, node_dir, properties, self.lib_dir, jvm_options))
        super().__init__(members, ready_timeout_s=ready_timeout_s)


def mixed_quorum(
    data_dir: str | Path,
    *,
    kafka_nodes: Collection[int],
    lib_dir: str | Path,
    nodes: int = 3,
    roles: str = CONTROLLER_ROLE,
    overrides_for: Mapping[int, Mapping[str, str]] | None = None,
    log_level: str = "INFO",
) -> ProcessCluster[NodeProcess]:
    """One quorum of kafkalike and Apache Kafka nodes: the ids in ``kafka_nodes`` run Kafka from
    ``lib_dir``, the others ``kafkalike serve``; each formatted by its own product's tool with the
    same cluster id. Kafka logs at ``log_level`` (INFO shows its raft state changes)."""
    root = Path(data_dir).absolute()
    jvm_options = kafka_jvm_options(root, "512m", log_level)
    addresses = plan_addresses(nodes)
    members: list[NodeProcess] = []
    for address in addresses:
        node_dir = root / f"node-{address.node_id}"
        properties = node_properties(address, addresses, node_dir / "data", roles)
        properties.update((overrides_for or {}).get(address.node_id, {}))
        if address.node_id in kafka_nodes:
            members.append(ApacheKafkaNode(address, node_dir, properties, Path(lib_dir), jvm_options))
        else:
            members.append(KafkalikeNode(address, node_dir, properties))
    return ProcessCluster(members)
