"""Two brokers for the differential runs: Apache Kafka (KRaft, broker and controller in one JVM,
from the jars in $KAFKALIKE_AK_LIB) and kafkalike, both with the same settings. Every test sends
the same requests to both and compares the answers (compare.py).

Without $KAFKALIKE_AK_LIB these tests are deselected: ``python scripts/compat.py`` resolves the jars
with Maven and sets it (or ``--only differential`` for these alone).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from compat_tests.differential.compare import differences
from kafkalike.cli.storage_format import random_uuid
from kafkalike.testing.apache_kafka import ApacheKafkaProcess
from kafkalike.testing.process import BrokerProcess
from kafkalike.testing.wire_client import WireClient

AK_LIB = os.environ.get("KAFKALIKE_AK_LIB", "")
LOG_DIR = os.environ.get("KAFKALIKE_COMPAT_LOGS", "")
# The same on both: topics are created explicitly.
SETTINGS = {"auto.create.topics.enable": "false", "num.partitions": "1"}
ZERO_UUID = uuid.UUID(int=0)
NOT_REQUESTED = -2147483648

Body = Mapping[str, Any] | Callable[["Side"], Mapping[str, Any]]


def ak_version_of(lib: Path) -> tuple[int, ...]:
    """The Apache Kafka release whose jars are in ``lib``, from its kafka-clients jar's name."""
    for jar in lib.glob("kafka-clients-*.jar"):
        match = re.fullmatch(r"kafka-clients-(\d+(?:\.\d+)*)\.jar", jar.name)
        if match:
            return tuple(int(part) for part in match.group(1).split("."))
    raise AssertionError(f"no kafka-clients jar in {lib}: cannot tell which Apache Kafka it is")


# The release compared with: the suite's reference is 4.4, and 4.0 (the oldest 4.x) stays
# checkable; an expectation that depends on the version asks AK_BEFORE_4_1 or AK_VERSION.
AK_VERSION = ak_version_of(Path(AK_LIB)) if AK_LIB else ()
AK_VERSION_TEXT = ".".join(map(str, AK_VERSION))
AK_BEFORE_4_1 = bool(AK_VERSION) and AK_VERSION < (4, 1)

# Since Kafka 4.1 (KIP-1030) a topic's segment.bytes is at least 1 MiB, and tiny segments are
# asked for with internal.segment.bytes. A 4.0 broker still takes segment.bytes from 14 up (and
# refuses less as "at least 14"); kafkalike follows 4.1+.
SEGMENT_BYTES_MIN_BEFORE_4_1 = 14
SEGMENT_BYTES_MIN_SINCE_4_1 = 1048576
INVALID_CONFIG = 40
# Configs 4.0 does not have (its jars declare none of them, its brokers refuse them as unknown);
# kafkalike declares them as 4.4 does.
CONFIGS_SINCE_4_1 = frozenset(
    {
        "errors.deadletterqueue.group.enable",
        "max.decompressed.message.bytes",
        "remote.copy.lag.bytes",
        "remote.copy.lag.ms",
        "log.remote.copy.lag.bytes",
        "log.remote.copy.lag.ms",
    }
)


def refused_since_4_1(config: str, value: str) -> tuple[int, str] | None:
    """What kafkalike answers, as Kafka 4.1+ does, where 4.0 answers ``config=value`` otherwise
    (accepts it, or refuses it against the old floor): (error code, message); None where the two
    versions agree."""
    if config != "segment.bytes":
        return None
    try:
        number = int(value.strip())
    except ValueError:
        return None
    if not -(2**31) <= number < SEGMENT_BYTES_MIN_SINCE_4_1:
        return None
    message = f"Value must be at least {SEGMENT_BYTES_MIN_SINCE_4_1}"
    return INVALID_CONFIG, f"Invalid value {number} for configuration segment.bytes: {message}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "differential: compares kafkalike's raw answers with Apache Kafka's (needs Java and the Kafka jars)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if AK_LIB:
        return
    # Not collected at all without the Kafka jars (the default, fast run): python scripts/compat.py
    # resolves them and runs these.
    deselected = [item for item in items if "differential" in item.keywords]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if "differential" not in item.keywords]


@dataclass
class Side:
    """One of the two brokers and a connection to it."""

    name: str
    host: str
    port: int
    client: WireClient
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)

    def request(self, api_key: int, version: int, body: Body) -> Any:
        """One request; a closed connection fails this request and the next one reconnects."""
        resolved = body(self) if callable(body) else body
        try:
            return self.client.request(api_key, version, resolved)
        except OSError:
            self.client.close()
            self.client = self.connect()
            raise

    def connect(self) -> WireClient:
        return WireClient(self.host, self.port)


@dataclass
class Pair:
    ak: Side
    kl: Side

    def both(self, api_key: int, version: int, body: Body) -> tuple[Any, Any]:
        """The same request to each broker; ``body`` may be a function of the side (for topic ids)."""
        return self.ak.request(api_key, version, body), self.kl.request(api_key, version, body)

    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None) -> None:
        """Create on both, and wait until each has a leader ready (Apache Kafka makes it a moment later)."""
        body = create_topics_body([topic_spec(name, partitions, configs)])
        for side in (self.ak, self.kl):
            response = side.request(19, 7, body)
            assert response.topics[0].error_code == 0, (side.name, response.topics[0])
            side.topic_ids[name] = response.topics[0].topic_id
        for side in (self.ak, self.kl):
            wait_ready(side, name, partitions)

    def create_topic_with_tiny_segments(
        self, name: str, segment_bytes: int, configs: Mapping[str, str] | None = None
    ) -> None:
        """A topic whose segments hold ``segment_bytes`` (below 1 MiB): internal.segment.bytes,
        once kafkalike has refused segment.bytes as 4.1+ does; segment.bytes on Apache Kafka 4.0."""
        configs = configs or {}
        tiny = {"segment.bytes": str(segment_bytes)}
        refusal = self.kl.request(19, 7, create_topics_body([topic_spec(name, 1, {**configs, **tiny})], True))
        expected = refused_since_4_1("segment.bytes", str(segment_bytes))
        assert expected is not None and segment_bytes >= SEGMENT_BYTES_MIN_BEFORE_4_1, segment_bytes
        assert (refusal.topics[0].error_code, refusal.topics[0].error_message) == expected
        internal = {"internal.segment.bytes": str(segment_bytes)}
        for side, segment_config in ((self.ak, tiny if AK_BEFORE_4_1 else internal), (self.kl, internal)):
            response = side.request(19, 7, create_topics_body([topic_spec(name, 1, {**configs, **segment_config})]))
            assert response.topics[0].error_code == 0, (side.name, response.topics[0])
            side.topic_ids[name] = response.topics[0].topic_id
        for side in (self.ak, self.kl):
            wait_ready(side, name, 1)


def assert_same(ak: Any, kl: Any, ignore: tuple[str, ...] = ()) -> None:
    """Fail with every difference between the two answers, one a line."""
    found = differences(ak, kl, ignore)
    assert not found, "kafkalike differs from Apache Kafka:\n" + "\n".join(found)


def topic_spec(
    name: str, partitions: int = 1, configs: Mapping[str, str | None] | None = None, rf: int = 1
) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": rf,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


def create_topics_body(topics: list[dict[str, Any]], validate_only: bool = False) -> dict[str, Any]:
    return {"topics": topics, "timeout_ms": 15000, "validate_only": validate_only}


def wait_ready(side: Side, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
    """Until every partition answers ListOffsets without an error."""
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(partitions)
                ],
            }
        ],
    }
    deadline = time.monotonic() + timeout_s
    while True:
        response = side.request(2, 7, body)
        if all(p.error_code == 0 for p in response.topics[0].partitions):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic} not ready on {side.name}: {response}")
        time.sleep(0.1)


# The metadata.version Kafka formats a new node at, where kafkalike's own differs: 4.0.x formats at
# 4.0-IV3 (no eligible leader replicas), kafkalike's single node at 4.4's default, 4.4-IV2.
KAFKA_RELEASE_VERSION = "4.0-IV3" if AK_BEFORE_4_1 else None


def format_single_node(data_dir: Path, release_version: str) -> None:
    """Format the single node's data directory at ``release_version`` as a user would: a
    server.properties describing the node (``kafkalike serve`` without a config: node 1, broker and
    controller, its own only voter) and ``kafkalike storage format -r``."""
    properties = data_dir.parent / f"{data_dir.name}.properties"
    properties.write_text(
        "process.roles=broker,controller\n"
        "node.id=1\n"
        "controller.listener.names=CONTROLLER\n"
        "controller.quorum.voters=1@127.0.0.1:9093\n"
        f"log.dirs={data_dir}\n"
    )
    command = [sys.executable, "-m", "kafkalike", "storage", "format", "-t", random_uuid(), "-c", str(properties)]
    ran = subprocess.run([*command, "-r", release_version], capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 0, f"storage format failed: {ran.stdout}{ran.stderr}"


@contextmanager
def running_pair(work: Path, settings: Mapping[str, str], name: str = "differential") -> Iterator[Pair]:
    """Both brokers with the same ``settings``, data under ``work``, stopped when the block ends;
    ``name`` names their logs, which scripts/compat.py keeps with its own."""
    ak = ApacheKafkaProcess(Path(AK_LIB), work / "apache-kafka", settings)
    if KAFKA_RELEASE_VERSION is not None:
        format_single_node(work / "kafkalike", KAFKA_RELEASE_VERSION)
    kl = BrokerProcess(work / "kafkalike", [f"{k}={v}" for k, v in settings.items()])
    ak.start()
    try:
        kl.start()
        try:
            pair = Pair(
                Side("Apache Kafka", ak.host, ak.port, WireClient(ak.host, ak.port)),
                Side("kafkalike", kl.host, kl.port, WireClient(kl.host, kl.port)),
            )
            yield pair
            pair.ak.client.close()
            pair.kl.client.close()
        finally:
            if kl.proc is not None and kl.proc.poll() is None:
                kl.stop()
    finally:
        ak.stop()
        if LOG_DIR:
            Path(LOG_DIR).mkdir(parents=True, exist_ok=True)
            (Path(LOG_DIR) / f"{name}-apache-kafka.log").write_text("".join(ak.output))
            (Path(LOG_DIR) / f"{name}-kafkalike.log").write_text("".join(kl.output))


@pytest.fixture(scope="session")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with running_pair(tmp_path_factory.mktemp("differential"), SETTINGS) as pair:
        yield pair


@pytest.fixture
def name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Topic names unique to the test, the same on both brokers."""
    suffix = uuid.uuid4().hex[:6]
    base = re.sub(r"[^a-zA-Z0-9-]+", "-", request.node.name.removeprefix("test_")).strip("-")[:60]

    def make(tag: str = "t") -> str:
        return f"d-{base}-{tag}-{suffix}"

    return make
