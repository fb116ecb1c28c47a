"""A data directory written by the release before the cluster (JSON metadata records, made here by
that release's own code in a subprocess) is migrated to Kafka's metadata records on first start,
its topic ids kept and its old log kept aside; what cannot be migrated is refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkalike.server.broker import StartupError
from kafkalike.server.config import BrokerConfig
from kafkalike.server.controller_host import ControllerHost
from kafkalike.server.metadata_migration import (
    BACKUP_SUFFIX,
    METADATA_DIR,
    LogKind,
    MigrationRefused,
    finish_interrupted,
    inspect,
    migrate,
)
from kafkalike.server.node import Node
from kafkalike.testing.metadata_node import one_voter_controller

# The release before the cluster: its tree, as checked out on its branch.
# The last commit of the release that kept the single node's metadata as JSON records; its tree
# is taken from this repository's history (KAFKALIKE_PREVIOUS_RELEASE: a checkout of it instead).
PREVIOUS_RELEASE_COMMIT = "4a729e51d5cbc7e41d5231976361ae549ce11d1a"
REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 30

WRITER = r"""
import json, sys
# This tree's own package is installed editable: take the previous release's instead.
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, sys.argv[1])
import kafkalike
assert kafkalike.__file__.startswith(sys.argv[1]), kafkalike.__file__
from kafkalike.server.broker import Broker
from kafkalike.server.config import BrokerConfig

broker = Broker(BrokerConfig({"log.dirs": sys.argv[2], "listeners": "PLAINTEXT://127.0.0.1:0", "node.id": "1"}))
broker.open()
broker.create_topic("orders", 3, {"retention.ms": "60000"})
broker.create_topic("gone", 1, {})
broker.controller.delete_topic("gone")
broker.controller.set_configs(4, "", {"log.retention.ms": "120000"})
producer_id = broker.controller.allocate_producer_id()
topics = {name: str(t.topic_id) for name, t in broker.controller.image.topics.items()}
broker.close()
print(json.dumps({"topics": topics, "producer_id": producer_id}))
"""


@pytest.fixture(scope="session")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's tree (its Python code and protocol specs), from git."""
    given = os.environ.get("KAFKALIKE_PREVIOUS_RELEASE")
    if given:
        return Path(given)
    tree = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", PREVIOUS_RELEASE_COMMIT, "kafkalike", "protocol_specs"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    if archive.returncode != 0:
        pytest.fail(
            f"the previous release ({PREVIOUS_RELEASE_COMMIT}) is not in this clone's history: "
            f"{archive.stderr.decode(errors='replace').strip()}"
        )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True, timeout=120)
    return tree


def previous_release_dir(tmp_path: Path, previous_release: Path) -> tuple[Path, dict[str, Any]]:
    """A data directory made by the previous release's code; what it made."""
    assert (previous_release / "kafkalike" / "controller" / "metadata.py").exists()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "KAFKALIKE_REQUIRE_NATIVE"}  # its walk is not built
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", WRITER, str(previous_release), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    made: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return data, made


async def test_a_previous_release_directory_is_migrated_with_its_topic_ids(
    tmp_path: Path, previous_release: Path
) -> None:
    data, made = previous_release_dir(tmp_path, previous_release)
    metadata = data / METADATA_DIR
    assert inspect(metadata).kind is LogKind.JSON

    image = migrate(metadata, 1, now_ms=1_700_000_000_000)
    assert image is not None
    assert inspect(metadata).kind is LogKind.EMPTY  # a snapshot now, the log after it empty
    assert (data / (METADATA_DIR + BACKUP_SUFFIX)).is_dir()  # the old log kept aside
    assert migrate(metadata, 1, now_ms=0) is None  # a second start finds nothing to do

    # The one-voter quorum over the migrated directory loads it and goes on from it.
    hosts: list[ControllerHost] = []
    with trio.fail_after(DEADLINE_S):
        async with one_voter_controller(metadata_log_dir=data) as node:
            hosts.append(node.host)
            loaded = node.host.image
            orders = loaded.topic("orders")
            assert orders is not None and str(orders.topic_id) == made["topics"]["orders"]
            assert sorted(orders.partitions) == [0, 1, 2]
            assert {p.leader for p in orders.partitions.values()} == {1}
            assert loaded.topic("gone") is None
            assert dict(loaded.topic_configs("orders")) == {"retention.ms": "60000"}
            assert dict(loaded.configs[next(r for r in loaded.configs if r.type == 4)]) == {
                "log.retention.ms": "120000"
            }
            # Producer ids handed out by the previous release are never handed out again.
            assert loaded.next_producer_id > made["producer_id"]
            assert loaded.metadata_version > 0


def test_records_the_release_does_not_know_are_refused_in_one_line(tmp_path: Path, previous_release: Path) -> None:
    data, _ = previous_release_dir(tmp_path, previous_release)
    metadata = data / METADATA_DIR
    found = inspect(metadata)
    from kafkalike.server.metadata_migration import translate

    with pytest.raises(MigrationRefused) as refused:
        translate([*found.json_values, b'{"type":"acl","name":"x"}'], 1)
    message = str(refused.value)
    assert "\n" not in message and "cannot be migrated" in message and "move the metadata directory aside" in message


def test_an_interrupted_migration_is_finished_at_the_next_start(tmp_path: Path, previous_release: Path) -> None:
    data, _ = previous_release_dir(tmp_path, previous_release)
    metadata = data / METADATA_DIR
    migrate(metadata, 1, now_ms=0)
    # As a crash after the old log was moved aside and before the new one was renamed in.
    migrating = metadata.with_name(METADATA_DIR + ".migrating")
    metadata.rename(migrating)
    finish_interrupted(metadata)
    assert metadata.is_dir() and not migrating.exists()
    assert any(p.suffix == ".checkpoint" for p in metadata.iterdir())


async def test_a_log_of_kafka_records_is_left_as_it_is(tmp_path: Path) -> None:
    assert inspect(tmp_path / "missing").kind is LogKind.EMPTY
    with trio.fail_after(DEADLINE_S):
        async with one_voter_controller(metadata_log_dir=tmp_path):
            pass  # elected and activated: the bootstrap records are in the log
    metadata = tmp_path / METADATA_DIR
    assert inspect(metadata).kind is LogKind.KRAFT
    assert migrate(metadata, 1, now_ms=0) is None
    assert not (tmp_path / (METADATA_DIR + BACKUP_SUFFIX)).exists()


async def test_a_node_of_a_larger_quorum_refuses_a_previous_release_directory(
    tmp_path: Path, previous_release: Path
) -> None:
    data, _ = previous_release_dir(tmp_path, previous_release)
    config = BrokerConfig(
        {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": "1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "log.dirs": str(data),
        }
    )
    with trio.fail_after(DEADLINE_S), pytest.raises(BaseExceptionGroup) as refused:
        async with trio.open_nursery() as nursery:
            await nursery.start(Node(config).run)
    error: BaseException = refused.value
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    assert isinstance(error, StartupError), refused.value
    message = str(error)
    assert "\n" not in message and "earlier kafkalike release" in message and "move the directory aside" in message
    assert inspect(data / METADATA_DIR).kind is LogKind.JSON  # left as it was


async def test_the_single_node_runs_on_a_log_of_kafka_records(tmp_path: Path) -> None:
    """A directory a one-voter quorum wrote is the single node's own metadata: opened, not migrated."""
    data = tmp_path / "data"
    with trio.fail_after(DEADLINE_S):
        async with one_voter_controller(metadata_log_dir=data):
            pass
    (data / "meta.properties").write_text("version=1\ncluster.id=quorum-test-cluster-0A\nnode.id=1\n")
    node = Node(BrokerConfig({"log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0", "node.id": "1"}))
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            assert node.cluster_id == "quorum-test-cluster-0A"
            await node.stop()
    assert inspect(data / METADATA_DIR).kind is LogKind.KRAFT
    assert not (data / (METADATA_DIR + BACKUP_SUFFIX)).exists()


async def test_the_single_node_migrates_a_previous_release_directory_at_start(
    tmp_path: Path, previous_release: Path
) -> None:
    """``kafkalike serve`` over its old data directory: the JSON log becomes a snapshot of the
    one-voter quorum at the first start, the topics keep their ids and their partition logs, and
    a later start finds nothing left to migrate."""
    from kafkalike.testing.wire_client import AsyncWireClient

    data, made = previous_release_dir(tmp_path, previous_release)
    config = {"log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0", "node.id": "1"}
    produce = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 10000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 1, "records": None}]}],
    }
    metadata_request = {"topics": None, "allow_auto_topic_creation": False}
    for start in range(2):
        node = Node(BrokerConfig(config))
        assert node.single
        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as nursery:
                await nursery.start(node.run)
                assert node.client_address is not None
                client = await AsyncWireClient.connect(*node.client_address)
                try:
                    response = await client.request(3, 12, metadata_request)
                    ids = {t.name: str(t.topic_id) for t in response.topics}
                    assert ids == {"orders": made["topics"]["orders"]}
                    assert {len(t.partitions) for t in response.topics} == {3}
                    if start == 0:
                        from kafkalike.protocol.records import Record, build_batch

                        produce["topic_data"][0]["partition_data"][0]["records"] = build_batch(  # type: ignore[index]
                            [Record(value=b"after the migration")]
                        )
                        answer = await client.request(0, 9, produce)
                        assert answer.responses[0].partition_responses[0].error_code == 0
                    offsets = await client.request(
                        2,
                        7,
                        {
                            "replica_id": -1,
                            "isolation_level": 0,
                            "topics": [{"name": "orders", "partitions": [{"partition_index": 1, "timestamp": -1}]}],
                        },
                    )
                    assert offsets.topics[0].partitions[0].offset == 1  # the record kept across the restart
                finally:
                    await client.aclose()
                await node.stop()
        assert inspect(data / METADATA_DIR).kind is not LogKind.JSON
        assert (data / (METADATA_DIR + BACKUP_SUFFIX)).is_dir()
