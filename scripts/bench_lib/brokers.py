"""The brokers a benchmark runs against, behind one small interface.

- ``KafkalikeBroker``: ``python -m kafkalike serve`` on a loopback port with a data directory
  (``kafkalike.testing.process.BrokerProcess``);
- ``ApacheKafkaBroker``: Apache Kafka 4.x in KRaft combined mode from its Maven Central jars
  (``kafkalike.testing.apache_kafka.ApacheKafkaProcess``), with the JVM options
  ``kafka-server-start.sh`` uses (1 GiB heap, G1) and a restart that keeps the formatted storage;
- ``ExternalBroker``: any broker already listening at an address (no process, so no RSS/CPU).

``start`` returns the seconds from exec to the first Metadata answer (Apache Kafka: one listing
the broker itself).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench_lib.procstat import cpu_seconds

from kafkalike.testing.apache_kafka import ApacheKafkaProcess, java_executable
from kafkalike.testing.process import BrokerProcess
from kafkalike.testing.wire_client import WireClient

METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False}
# The checkout this benchmark belongs to: the kafkalike a broker runs unless told another tree.
THIS_TREE = Path(__file__).resolve().parents[2]
# The settings both brokers run with (Apache Kafka's defaults otherwise).
COMMON_OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "false"}
# kafka-server-start.sh / kafka-run-class.sh defaults.
KAFKA_JVM_OPTS = [
    "-Xms1g",
    "-Xmx1g",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]


def metadata_answer(host: str, port: int, need_brokers: bool, deadline: float, poll_s: float = 0.02) -> None:
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with WireClient(host, port, timeout_s=5.0) as client:
                response = client.request(3, 12, METADATA_ALL)
                if response.brokers or not need_brokers:
                    return
        except (OSError, ConnectionError) as exc:
            last = exc
        time.sleep(poll_s)
    raise RuntimeError(f"no Metadata answer from {host}:{port}: {last}")


class Broker:
    name = "broker"
    pid: int | None = None
    bootstrap = ""

    def start(self) -> float | None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def restart(self) -> float | None:
        self.stop()
        return self.start()

    def data_files(self) -> list[Path]:
        return []

    def close(self) -> None:
        self.stop()

    def output_tail(self) -> str:
        return ""

    def quiet(self, deadline_s: float = 30.0) -> None:
        """Keep a broker that is not being measured from taking CPU from the one that is: by
        default, wait (up to ``deadline_s``) until it uses under 5% of a core, as a JVM still
        compiling or collecting after its restart does not; ``resume`` undoes what this did."""
        deadline = time.monotonic() + deadline_s
        before = cpu_seconds(self.pid)
        while before is not None and time.monotonic() < deadline:
            time.sleep(0.5)
            now = cpu_seconds(self.pid)
            if now is None or now - before < 0.025:
                return
            before = now

    def resume(self) -> None:
        pass

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.bootstrap.rpartition(":")
        return host, int(port)


def _files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


class KafkalikeBroker(Broker):
    """The kafkalike package of this checkout, or of ``source``, another checkout (e.g. the code
    before a change), under the name ``name``.

    Each broker starts in its own work directory with ``PYTHONPATH`` naming its tree: ``python -m``
    puts the working directory first on the import path, so a broker started in a checkout would
    run that checkout's package whatever ``PYTHONPATH`` says (a baseline measured as this tree).
    """

    name = "kafkalike"

    def __init__(
        self, work_dir: Path, overrides: dict[str, str] | None = None, source: Path | None = None, name: str = ""
    ) -> None:
        self.work_dir = work_dir.absolute()
        self.overrides = {**COMMON_OVERRIDES, **(overrides or {})}
        self.tree = (source or THIS_TREE).resolve()
        self.proc = BrokerProcess(
            self.work_dir / "data",
            [f"{k}={v}" for k, v in self.overrides.items()],
            cwd=self.work_dir,
            env={"PYTHONPATH": str(self.tree)},
        )
        self.name = name or self.name

    def quiet(self, deadline_s: float = 30.0) -> None:
        """SIGSTOP: kafkalike runs no timers that a pause could upset between measurements (no
        group or session is live then), unlike a KRaft controller that fences its broker after a
        missed heartbeat."""
        if self.pid is not None:
            os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.pid is not None:
            os.kill(self.pid, signal.SIGCONT)

    def start(self) -> float:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self.proc.start()
        metadata_answer(self.proc.host, self.proc.port, False, started + 60)
        elapsed = time.monotonic() - started
        assert self.proc.proc is not None
        self.pid = self.proc.proc.pid
        self.bootstrap = self.proc.bootstrap
        return elapsed

    def stop(self) -> None:
        if self.proc.proc is not None and self.proc.proc.poll() is None:
            try:
                self.proc.stop(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.pid = None

    def data_files(self) -> list[Path]:
        return _files_under(self.work_dir / "data")

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def output_tail(self) -> str:
        return "".join(self.proc.output[-40:])


class ApacheKafkaBroker(Broker):
    name = "apache-kafka"

    def __init__(self, lib_dir: Path, work_dir: Path, version: str) -> None:
        self.work_dir = work_dir
        self.version = version
        self.proc = ApacheKafkaProcess(lib_dir, work_dir, overrides=COMMON_OVERRIDES, ready_timeout_s=180)
        self._formatted = False

    def _jvm(self) -> list[str]:
        log4j = self.work_dir / "log4j2.properties"
        return [
            java_executable(),
            *KAFKA_JVM_OPTS,
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            self.proc._classpath(),
        ]

    def start(self) -> float:
        """The first time: ports, config and storage format (ApacheKafkaProcess.start, not timed),
        then stopped; each start times exec of ``kafka.Kafka`` to a Metadata answer listing itself."""
        if not self._formatted:
            self.proc.ready_timeout_s = 180
            self.proc.start()  # writes server.properties + log4j, formats, starts
            self.proc.stop()
            self._formatted = True
        config = self.work_dir / "server.properties"
        started = time.monotonic()
        self.proc.proc = subprocess.Popen(
            [*self._jvm(), "kafka.Kafka", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_java_env(),
        )
        threading.Thread(target=self.proc._drain, args=(self.proc.proc,), daemon=True).start()
        try:
            metadata_answer(self.proc.host, self.proc.port, True, started + 180, poll_s=0.05)
        except RuntimeError:
            self.proc.kill()
            raise RuntimeError("Apache Kafka did not start:\n" + self.output_tail()) from None
        elapsed = time.monotonic() - started
        self.pid = self.proc.proc.pid
        self.bootstrap = self.proc.bootstrap
        return elapsed

    def stop(self) -> None:
        self.proc.stop(90)
        self.pid = None

    def data_files(self) -> list[Path]:
        return _files_under(self.work_dir / "logs")

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def output_tail(self) -> str:
        return "".join(self.proc.output[-40:])


class ExternalBroker(Broker):
    name = "external"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def start(self) -> None:
        host, port = self.host_port
        metadata_answer(host, port, True, time.monotonic() + 30)
        return None

    def stop(self) -> None:
        pass

    def restart(self) -> None:
        return None


def _java_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("JAVA_TOOL_OPTIONS", None)
    env.pop("_JAVA_OPTIONS", None)
    return env


# ---- topics through the raw protocol client -------------------------------------------------------


def create_topic(broker: Broker, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    host, port = broker.host_port
    body: dict[str, Any] = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout_ms": 30000,
        "validate_only": False,
    }
    with WireClient(host, port, timeout_s=60) as client:
        code = client.request(19, 5, body).topics[0].error_code
        if code != 0:
            raise RuntimeError(f"CreateTopics {name}: error {code}")
        # Apache Kafka names the leaders a moment before they take writes: wait for ListOffsets.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            request = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": name,
                        "partitions": [
                            {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                            for p in range(partitions)
                        ],
                    }
                ],
            }
            answer = client.request(2, 7, request)
            if answer.topics and all(p.error_code == 0 for p in answer.topics[0].partitions):
                return
            time.sleep(0.05)
    raise RuntimeError(f"topic {name} has no ready leaders after 60 s")


def delete_topic(broker: Broker, name: str) -> None:
    host, port = broker.host_port
    try:
        with WireClient(host, port, timeout_s=60) as client:
            client.request(20, 4, {"topic_names": [name], "timeout_ms": 30000})
    except (OSError, ConnectionError):
        pass


def end_offsets(broker: Broker, name: str, partitions: int) -> list[int]:
    host, port = broker.host_port
    request = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(partitions)
                ],
            }
        ],
    }
    with WireClient(host, port, timeout_s=60) as client:
        answer = client.request(2, 7, request)
    return [p.offset for p in sorted(answer.topics[0].partitions, key=lambda p: p.partition_index)]
