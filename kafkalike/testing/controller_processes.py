"""A quorum of ``kafkalike serve`` controller processes on loopback (some may be Apache Kafka's
controllers instead), started as Kafka's would be:
a server.properties per node (``process.roles=controller``, ``controller.quorum.voters`` of all),
``kafkalike storage format -t ID -c FILE`` on each, then ``kafkalike serve --config FILE``.

``ControllerQuorumProcesses(work_dir, voters=3).start()``; ``kill(node_id)`` is SIGKILL;
``describe(node_id)`` asks one node for DescribeQuorum over the wire (None when it cannot
answer); ``leader()`` the (leader id, epoch, high watermark) a leader reports, once it has committed
a record of its own epoch.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kafkalike.testing.wire_client import WireClient

T = TypeVar("T")
CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"
DESCRIBE_QUORUM = 55
READY_TIMEOUT_S = 60.0


POLL_S = 0.01


def wait_until(condition: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll ``condition`` (another process's state has no event to wait on) until it returns a
    value, at most ``timeout_s``; RuntimeError naming ``what`` after that."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value is not None and value is not False:
            return value
        if time.monotonic() >= deadline:
            raise RuntimeError(f"{what}: not within {timeout_s} s")
        time.sleep(POLL_S)


def free_ports(count: int) -> list[int]:
    """Ports free now on 127.0.0.1 (bound and released; the nodes bind them next)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def node_properties(node_id: int, ports: dict[int, int], data_dir: Path, extra: dict[str, str] | None = None) -> str:
    voters = ",".join(f"{i}@127.0.0.1:{port}" for i, port in sorted(ports.items()))
    props = {
        "process.roles": "controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": f"CONTROLLER://127.0.0.1:{ports[node_id]}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
        **(extra or {}),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


class ControllerProcess:
    """A ``kafkalike serve`` controller, or with ``kafka_lib`` an Apache Kafka controller
    (``kafka.Kafka`` from those jars) on the same server.properties."""

    def __init__(self, node_id: int, config: Path, port: int, kafka_lib: Path | None = None) -> None:
        self.node_id = node_id
        self.config = config
        self.port = port
        self.kafka_lib = kafka_lib
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    def _java(self) -> list[str]:
        from kafkalike.testing.apache_kafka import java_executable

        assert self.kafka_lib is not None
        log4j = self.config.with_name(f"log4j2-{self.node_id}.properties")
        log4j.write_text(
            "appender.out.type = Console\nappender.out.name = STDOUT\nappender.out.layout.type = PatternLayout\n"
            "appender.out.layout.pattern = [%d] %p %m (%c)%n\nrootLogger.level = INFO\n"
            "rootLogger.appenderRef.out.ref = STDOUT\n"
        )
        return [java_executable(), "-Xmx384m", f"-Dlog4j2.configurationFile={log4j}", "-cp", str(self.kafka_lib / "*")]

    def format_command(self) -> list[str]:
        if self.kafka_lib is not None:
            return [*self._java(), "kafka.tools.StorageTool", "format", "-t", CLUSTER_ID, "-c", str(self.config)]
        return [sys.executable, "-m", "kafkalike", "storage", "format", "-t", CLUSTER_ID, "-c", str(self.config)]

    def command(self) -> list[str]:
        if self.kafka_lib is not None:
            return [*self._java(), "kafka.Kafka", str(self.config)]
        return [sys.executable, "-m", "kafkalike", "serve", "--config", str(self.config)]

    @property
    def ready_marker(self) -> str:
        # Kafka's: its raft client runs (the server's own start may wait for a quorum).
        return "raft-io-thread]: Starting" if self.kafka_lib is not None else "kafkalike ready on"

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        self.output = []
        self.proc = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._drain, args=(self.proc, self._lines), daemon=True).start()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise RuntimeError("controller did not become ready:\n" + "".join(self.output)) from None
            if line is None:
                raise RuntimeError("controller exited before it was ready:\n" + "".join(self.output))
            if self.ready_marker in line:
                return

    def _drain(self, proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        with proc.stdout:
            for line in proc.stdout:
                self.output.append(line)
                lines.put(line)
        lines.put(None)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(30)

    def stop(self, timeout_s: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)


class ControllerQuorumProcesses:
    def __init__(
        self,
        work_dir: Path,
        voters: int = 3,
        extra: dict[str, str] | None = None,
        *,
        kafka_lib: Path | None = None,
        kafka_nodes: frozenset[int] = frozenset(),
        extra_for: dict[int, dict[str, str]] | None = None,
    ) -> None:
        """``kafka_nodes``: the ids run as Apache Kafka controllers from ``kafka_lib`` instead;
        ``extra_for``: more settings for some nodes only."""
        self.work_dir = work_dir
        ids = list(range(1, voters + 1))
        self.ports = dict(zip(ids, free_ports(voters), strict=True))
        self.nodes: dict[int, ControllerProcess] = {}
        for node_id in ids:
            data_dir = work_dir / f"data-{node_id}"
            config = work_dir / f"controller-{node_id}.properties"
            settings = {**(extra or {}), **(extra_for or {}).get(node_id, {})}
            config.write_text(node_properties(node_id, self.ports, data_dir, settings))
            lib = kafka_lib if node_id in kafka_nodes else None
            self.nodes[node_id] = ControllerProcess(node_id, config, self.ports[node_id], lib)

    def format(self) -> None:
        running = [subprocess.Popen(n.format_command(), stdout=subprocess.DEVNULL) for n in self.nodes.values()]
        for proc in running:
            if proc.wait(120) != 0:
                raise RuntimeError(f"storage format failed: {proc.args!r}")

    def start(self, order: list[int] | None = None) -> ControllerQuorumProcesses:
        """Format and start every node; with ``order``, one after the other in that order,
        else all at once."""
        self.format()
        if order is not None:
            for node_id in order:
                self.nodes[node_id].start()
            return self
        for node in self.nodes.values():
            node.launch()
        for node in self.nodes.values():
            node.wait_ready()
        return self

    def bootstrap(self, node_id: int | None = None) -> str:
        node_id = node_id if node_id is not None else next(iter(self.nodes))
        return f"127.0.0.1:{self.ports[node_id]}"

    def kill(self, node_id: int) -> None:
        self.nodes[node_id].kill()

    def close(self) -> None:
        for node in self.nodes.values():
            if node.running:
                try:
                    node.stop(10)
                except subprocess.TimeoutExpired:
                    node.kill()

    def __enter__(self) -> ControllerQuorumProcesses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self, node_id: int, timeout_s: float = 2.0) -> Any | None:
        """The node's DescribeQuorum v2 partition, or None when it does not answer."""
        body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
        try:
            with WireClient("127.0.0.1", self.ports[node_id], timeout_s=timeout_s) as client:
                response = client.request(DESCRIBE_QUORUM, 2, body)
        except OSError:
            return None
        return response.topics[0].partitions[0]

    def leader(self, among: list[int] | None = None) -> tuple[int, int, int] | None:
        """(leader id, epoch, high watermark) from a node that leads and has committed its own
        epoch's first record (its high watermark reached its log end), or None."""
        for node_id in among or [i for i, n in self.nodes.items() if n.running]:
            p = self.describe(node_id)
            if p is None or p.error_code != 0 or p.leader_id != node_id:
                continue
            own = next((v for v in p.current_voters if v.replica_id == node_id), None)
            if own is not None and p.high_watermark >= own.log_end_offset > 0:
                return p.leader_id, p.leader_epoch, p.high_watermark
        return None
