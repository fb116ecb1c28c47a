"""`kafkalike serve` refusing to start: one line on stderr, a non-zero exit, never a traceback.

And the data directory guarded as Kafka guards it: locked by the broker using it, and its
meta.properties checked against the configured node.id and cluster.id, never rewritten.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalike.testing.process import BrokerProcess
from kafkalike.testing.wire_client import WireClient

STORED_CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
META_V1 = f"#written by hand\nversion=1\ncluster.id={STORED_CLUSTER_ID}\nnode.id=1\n"


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafkalike", "serve", *args], capture_output=True, text=True, timeout=60
    )


def assert_one_line(result: subprocess.CompletedProcess[str], exit_code: int, line: str) -> None:
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.splitlines() == [f"kafkalike: {line}"]
    assert result.returncode == exit_code


def _with_meta(data: Path, text: str) -> Path:
    data.mkdir()
    (data / "meta.properties").write_text(text)
    return data


def _with_config(data: Path, text: str) -> Path:
    """A server.properties beside ``data``, for ``--config``."""
    data.parent.mkdir(parents=True, exist_ok=True)
    path = data.parent / "server.properties"
    path.write_text(text)
    return path


KRAFT_NODE_1 = (
    "process.roles=broker,controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n"
    "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n"
)


def on_any_port(data: Path, *more: str) -> list[str]:
    return ["--listen", "127.0.0.1:0", "--data-dir", str(data), *more]


# Each case: (set-up returning the arguments, exit code, expected line given the data directory).
Case = tuple[Callable[[Path], list[str]], int, Callable[[Path], str]]
CASES: dict[str, Case] = {
    "listen without a port": (
        lambda d: ["--listen", "localhost", "--data-dir", str(d)],
        2,
        lambda d: (
            "bad configuration: Error creating broker listeners from '[PLAINTEXT://localhost]': "
            "Unable to parse PLAINTEXT://localhost to a broker endpoint"
        ),
    ),
    "listen on a port past 65535": (
        lambda d: ["--listen", "127.0.0.1:70000", "--data-dir", str(d)],
        2,
        lambda d: "bad configuration: Unable to parse PLAINTEXT://127.0.0.1:70000 to a broker endpoint",
    ),
    "unknown log level": (
        lambda d: ["--log-level", "chatty", "--data-dir", str(d)],
        2,
        lambda d: "bad --log-level 'chatty': expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
    ),
    "config value out of bounds": (
        lambda d: on_any_port(d, "--override", "num.partitions=0"),
        2,
        lambda d: "bad configuration: Invalid value 0 for configuration num.partitions: Value must be at least 1",
    ),
    "configs that KafkaConfig requires more of": (
        lambda d: on_any_port(d, "--override", "log.cleaner.dedupe.buffer.size=1048576"),
        2,
        lambda d: (
            "bad configuration: requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per "
            "cleaner thread."
        ),
    ),
    "config file missing": (
        lambda d: on_any_port(d, "--config", str(d.parent / "nope.properties")),
        2,
        lambda d: f"bad configuration: cannot read {d.parent / 'nope.properties'}: No such file or directory",
    ),
    "data directory under a file": (
        lambda d: (d.parent.write_text(""), on_any_port(d))[1],
        1,
        lambda d: f"Failed to create data directory {d}: Not a directory",
    ),
    "data directory is a file": (
        lambda d: (d.write_text(""), on_any_port(d))[1],
        1,
        lambda d: f"{d} is not a readable log directory.",
    ),
    "lock file cannot be written": (
        lambda d: ((d / ".lock").mkdir(parents=True), on_any_port(d))[1],
        1,
        lambda d: f"Disk error while locking directory {d}: Is a directory",
    ),
    "node id differs from meta.properties": (
        lambda d: on_any_port(_with_meta(d, META_V1), "--override", "node.id=2"),
        1,
        lambda d: (
            f"Stored node id 1 doesn't match previous node id 2 in {d / 'meta.properties'}. If you moved "
            "your data, make sure your configured node id matches. If you intend to create a new node, you should "
            "remove all data in your data directories."
        ),
    ),
    "cluster id differs from meta.properties": (
        lambda d: on_any_port(_with_meta(d, META_V1), "--override", "cluster.id=AnotherClusterIdAAAAAA"),
        1,
        lambda d: (
            f"Invalid cluster.id in: {d / 'meta.properties'}. Expected AnotherClusterIdAAAAAA, "
            f"but read {STORED_CLUSTER_ID}"
        ),
    ),
    "data without meta.properties": (
        lambda d: (d.joinpath("orders-0").mkdir(parents=True), on_any_port(d))[1],
        1,
        lambda d: (
            f"No `meta.properties` found in {d}, which is not empty: kafkalike formats only an empty data directory"
        ),
    ),
    "meta.properties of an unknown version": (
        lambda d: on_any_port(_with_meta(d, "version=7\nnode.id=1\n")),
        1,
        lambda d: "Unknown meta.properties version number 7",
    ),
    "a node of a cluster on an unformatted directory": (
        lambda d: [
            "--config",
            str(_with_config(d, KRAFT_NODE_1 + f"controller.quorum.voters=1@h:9093,2@h:9094,3@h:9095\nlog.dirs={d}\n")),
        ],
        1,
        lambda d: (
            f"No readable meta.properties files found in {d}: format it first with "
            "`kafkalike storage format -t CLUSTER_ID -c server.properties`"
        ),
    ),
    "a controller that is not a voter": (
        lambda d: on_any_port(d, "--config", str(_with_config(d, KRAFT_NODE_1 + "controller.quorum.voters=2@h:9093"))),
        2,
        lambda d: (
            "bad configuration: If process.roles contains the 'controller' role, the node id 1 must be included "
            "in the set of voters controller.quorum.voters=2@h:9093"
        ),
    ),
    "a broker-only node without controllers": (
        lambda d: on_any_port(d, "--override", "process.roles=broker"),
        2,
        lambda d: (
            "bad configuration: If using process.roles, either controller.quorum.bootstrap.servers must contain "
            "the set of bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers."
        ),
    ),
    "meta.properties v1 without a cluster id": (
        lambda d: on_any_port(_with_meta(d, "version=1\nnode.id=1\n")),
        1,
        lambda d: f"cluster.id was not specified in the v1 file: {d / 'meta.properties'}",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_start_up_failure_is_one_line_and_a_non_zero_exit(tmp_path: Path, case: str) -> None:
    arrange, exit_code, expected = CASES[case]
    data = tmp_path / "plain" / "data" if case == "data directory under a file" else tmp_path / "data"
    args = arrange(data)
    meta = data / "meta.properties"
    stored = meta.read_bytes() if meta.is_file() else None
    result = serve(*args)
    assert_one_line(result, exit_code, expected(data))
    # Refused, not repaired: the stored identity is exactly as it was (never rewritten).
    assert (meta.read_bytes() if meta.is_file() else None) == stored


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve("--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"))
    assert_one_line(result, 1, f"Socket server failed to bind to 127.0.0.1:{port}: Address already in use.")


def _answers_metadata(broker: BrokerProcess) -> list[str]:
    with WireClient(broker.host, broker.port) as client:
        meta = client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
        return [t.name for t in meta.topics]


def test_a_second_broker_on_a_locked_directory_is_refused_while_the_first_keeps_serving(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data) as first:
        with WireClient(first.host, first.port) as client:
            created = client.request(
                19,
                5,
                {
                    "topics": [
                        {"name": "kept", "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}
                    ],
                    "timeout_ms": 5000,
                    "validate_only": False,
                },
            )
            assert created.topics[0].error_code == 0
        files_before = sorted(p.name for p in data.iterdir())
        meta_before = (data / "meta.properties").read_bytes()

        second = serve("--listen", "127.0.0.1:0", "--data-dir", str(data))

        assert_one_line(
            second,
            1,
            f"Failed to acquire lock on file .lock in {data}. "
            "A Kafka instance in another process or thread is using this directory.",
        )
        assert first.running and _answers_metadata(first) == ["kept"]
        # The refused broker changed nothing: the same files, the same identity.
        assert sorted(p.name for p in data.iterdir()) == files_before
        assert (data / "meta.properties").read_bytes() == meta_before
        assert first.stop() == 0
    assert first.logged_errors() == []
    # Once the first has stopped, the directory is free again.
    with BrokerProcess(data) as again:
        assert _answers_metadata(again) == ["kept"]


def test_matching_identity_starts_and_meta_properties_is_left_alone(tmp_path: Path) -> None:
    data = _with_meta(tmp_path / "data", META_V1)
    with BrokerProcess(data, ["cluster.id=" + STORED_CLUSTER_ID, "node.id=1"]) as broker:
        ready = next(line for line in broker.output if "kafkalike ready on" in line)
        assert f"cluster {STORED_CLUSTER_ID}" in ready
        assert broker.stop() == 0
    assert (data / "meta.properties").read_text() == META_V1


def _unused_warnings(broker: BrokerProcess) -> list[str]:
    return [line for line in broker.output if "were supplied but are not used yet" in line]


def test_unknown_config_names_get_one_warning_line(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions=2\nnum.network.threads=3\n")
    overrides = ["log.retention.hour=5", "message.max.bytes=2000000"]
    with BrokerProcess(tmp_path / "data", overrides, args=["--config", str(properties)]) as broker:
        warnings = _unused_warnings(broker)
        assert len(warnings) == 1
        assert (
            warnings[0]
            .rstrip()
            .endswith(
                "WARNING kafkalike: These configurations '[log.retention.hour, num.network.threads]' "
                "were supplied but are not used yet."
            )
        )


def test_known_config_names_get_no_warning(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", ["num.partitions=2", "log.retention.hours=5"]) as broker:
        assert _unused_warnings(broker) == []


def test_serve_config_starts_from_a_directory_storage_format_wrote_keeping_its_ids(tmp_path: Path) -> None:
    """A Kafka KRaft server.properties (node 5, its own only voter), formatted by
    ``kafkalike storage format``: the node starts with that cluster id and node id, and leaves
    the formatted files as they were."""
    data = tmp_path / "data"
    config = _with_config(
        data,
        KRAFT_NODE_1.replace("node.id=1", "node.id=5")
        + f"controller.quorum.voters=5@127.0.0.1:19093\nlog.dirs={data}\n",
    )
    cluster_id = "RW5vdWdoVG9TdGFydFdpdA"
    formatted = subprocess.run(
        [sys.executable, "-m", "kafkalike", "storage", "format", "-t", cluster_id, "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert formatted.returncode == 0, formatted.stderr
    files = {p.name: p.read_bytes() for p in data.iterdir()}
    assert sorted(files) == ["bootstrap.checkpoint", "meta.properties"]
    with BrokerProcess(data, args=["--config", str(config)]) as broker:
        ready = next(line for line in broker.output if "kafkalike ready on" in line)
        assert f"(node 5, cluster {cluster_id}," in ready
        with WireClient(broker.host, broker.port) as client:
            meta = client.request(3, 12, {"topics": [], "allow_auto_topic_creation": False})
        assert meta.cluster_id == cluster_id and [b.node_id for b in meta.brokers] == [5]
        assert _unused_warnings(broker) == []  # the quorum's names are read, not "supplied but not used"
        assert broker.stop() == 0
    assert {name: (data / name).read_bytes() for name in files} == files


def test_a_node_formatted_standalone_keeps_its_voters_through_its_own_snapshots(tmp_path: Path) -> None:
    """``storage format --standalone`` (no controller.quorum.voters, the voters in the bootstrap
    snapshot): the node serves as its quorum's only voter, every snapshot it writes keeps that
    voter set, so it starts again once its own snapshot replaced the bootstrap one."""
    from kafkalike.log.snapshot_files import parse_snapshot_file_name
    from kafkalike.protocol.metadata_records import read_snapshot
    from kafkalike.testing.process_cluster import free_ports

    data = tmp_path / "data"
    (controller_port,) = free_ports(1)
    config = _with_config(
        data,
        KRAFT_NODE_1.replace("CONTROLLER://127.0.0.1:0", f"CONTROLLER://127.0.0.1:{controller_port}")
        + f"controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}\nlog.dirs={data}\n"
        # Every committed record is worth a snapshot: the bootstrap one is replaced at once.
        + "metadata.log.max.record.bytes.between.snapshots=1\n",
    )
    formatted = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkalike",
            "storage",
            "format",
            "-t",
            STORED_CLUSTER_ID,
            "-c",
            str(config),
            "--standalone",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert formatted.returncode == 0, formatted.stderr
    partition = data / "__cluster_metadata-0"

    def snapshots() -> list[str]:
        return sorted(p.name for p in partition.iterdir() if parse_snapshot_file_name(p.name) is not None)

    bootstrap = "00000000000000000000-0000000000.checkpoint"
    assert snapshots() == [bootstrap]
    with BrokerProcess(data, args=["--config", str(config)]) as broker:
        with WireClient(broker.host, broker.port) as client:
            created = client.request(
                19,
                7,
                {"topics": [{"name": "kept", "num_partitions": 2, "replication_factor": 1}], "timeout_ms": 10_000},
            )
            assert [t.error_code for t in created.topics] == [0]
        assert broker.stop() == 0
        assert broker.logged_errors() == []
        assert bootstrap not in snapshots()
        newest = read_snapshot((partition / snapshots()[-1]).read_bytes())
        assert newest.kraft_version == 1 and newest.voters is not None
        assert [(v.voter_id, v.endpoints[0].port) for v in newest.voters.voters] == [(1, controller_port)]
        broker.restart()
        with WireClient(broker.host, broker.port) as client:
            meta = client.request(3, 12, {"topics": [{"name": "kept"}], "allow_auto_topic_creation": False})
        assert [(t.name, t.error_code, len(t.partitions)) for t in meta.topics] == [("kept", 0, 2)]
        assert meta.cluster_id == STORED_CLUSTER_ID
