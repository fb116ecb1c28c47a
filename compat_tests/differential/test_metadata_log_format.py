"""The __cluster_metadata format against Apache Kafka's own tools and files.

One way: a log segment and a snapshot written by kafkalike's codec are decoded by Kafka's
``kafka-dump-log --cluster-metadata-decoder`` (``kafka.tools.DumpLogSegments``), every record named
with the type and field values written. The other way: the metadata log segment and the snapshots
of a real Kafka 4.0.2 node, where topics were created, are read by kafkalike's codec into the
images Kafka had (topics, partitions, the broker's registration, and the controlled shutdown that
ended it), and every batch decoded and rebuilt by kafkalike is the bytes Kafka wrote; likewise the
files kafka-storage format writes.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compat_tests.differential.conftest import AK_BEFORE_4_1, AK_LIB, AK_VERSION, create_topics_body, topic_spec
from kafkalike.controller.features import BOOTSTRAP_CHECKPOINT, bootstrap_records, feature_levels
from kafkalike.controller.image import MetadataImage
from kafkalike.controller.loader import MetadataLoader
from kafkalike.log.snapshot_files import SnapshotFiles, SnapshotId, parse_snapshot_file_name
from kafkalike.log.storage import FileLogDirectory
from kafkalike.protocol.metadata_records import (
    ApiMessageAndVersion,
    ControlMessageType,
    MetadataRecordType,
    build_control_batch,
    build_metadata_batch,
    build_snapshot,
    control_message,
    encode_metadata_record,
    leader_change_batch,
    metadata_record,
    read_metadata_batches,
    read_snapshot,
)
from kafkalike.protocol.records import Record, build_batch
from kafkalike.testing.apache_kafka import ApacheKafkaProcess, java_executable
from kafkalike.testing.wire_client import WireClient

pytestmark = pytest.mark.differential

T = MetadataRecordType
TOPIC_ID = uuid.UUID("6f1c0d3a-2b4e-4c5d-8e9f-a0b1c2d3e4f5")
INCARNATION = uuid.UUID("11111111-2222-4333-8444-555555555555")
DIRECTORY = uuid.UUID("aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee")


# The newest versions of the broker records, and those a release before 4.2 reads (the cordoned
# log directories came after 4.1).
NEWEST = {T.REGISTER_BROKER_RECORD: 4, T.BROKER_REGISTRATION_CHANGE_RECORD: 3}
NEWEST_BEFORE_4_2 = {T.REGISTER_BROKER_RECORD: 3, T.BROKER_REGISTRATION_CHANGE_RECORD: 2}


def sample_records() -> list[ApiMessageAndVersion]:
    """One record of every type kafkalike models, each with fields away from their defaults, at
    the newest version the Kafka compared with reads."""
    newest = NEWEST_BEFORE_4_2 if AK_VERSION < (4, 2) else NEWEST
    cordoned = {"cordoned_log_dirs": [DIRECTORY]} if AK_VERSION >= (4, 2) else {}
    return [
        metadata_record(T.FEATURE_LEVEL_RECORD, name="metadata.version", feature_level=25),
        metadata_record(
            T.REGISTER_BROKER_RECORD,
            newest.get(T.REGISTER_BROKER_RECORD),
            broker_id=2,
            incarnation_id=INCARNATION,
            broker_epoch=17,
            end_points=[{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 19092, "security_protocol": 0}],
            features=[{"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 25}],
            rack="rack-a",
            fenced=True,
            in_controlled_shutdown=False,
            log_dirs=[DIRECTORY],
            **cordoned,
        ),
        metadata_record(T.UNFENCE_BROKER_RECORD, id=2, epoch=17),
        metadata_record(
            T.BROKER_REGISTRATION_CHANGE_RECORD,
            newest.get(T.BROKER_REGISTRATION_CHANGE_RECORD),
            broker_id=2,
            broker_epoch=17,
            in_controlled_shutdown=1,
            **cordoned,
        ),
        metadata_record(T.FENCE_BROKER_RECORD, id=2, epoch=17),
        metadata_record(T.TOPIC_RECORD, name="orders", topic_id=TOPIC_ID),
        metadata_record(
            T.PARTITION_RECORD,
            partition_id=0,
            topic_id=TOPIC_ID,
            replicas=[2],
            isr=[2],
            leader=2,
            leader_epoch=3,
            partition_epoch=4,
            directories=[DIRECTORY],
        ),
        metadata_record(T.PARTITION_CHANGE_RECORD, partition_id=0, topic_id=TOPIC_ID, leader=-1, isr=[]),
        metadata_record(
            T.CONFIG_RECORD, resource_type=2, resource_name="orders", name="cleanup.policy", value="compact"
        ),
        metadata_record(T.CONFIG_RECORD, resource_type=4, resource_name="", name="log.retention.ms", value=None),
        metadata_record(T.PRODUCER_IDS_RECORD, broker_id=2, broker_epoch=17, next_producer_id=5000),
        metadata_record(T.NO_OP_RECORD),
        metadata_record(T.BEGIN_TRANSACTION_RECORD, name="a transaction"),
        metadata_record(T.END_TRANSACTION_RECORD),
        metadata_record(T.REMOVE_TOPIC_RECORD, topic_id=TOPIC_ID),
        metadata_record(T.UNREGISTER_BROKER_RECORD, broker_id=2, broker_epoch=17),
    ]


# -- Kafka's JSON view of a record, to compare with what DumpLogSegments prints


def camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(w[:1].upper() + w[1:] for w in rest)


def kafka_json(value: Any) -> Any:
    """A decoded message as Kafka's generated JSON converters print it (camelCase, base64 uuids)."""
    if isinstance(value, dict):
        return {camel(k): kafka_json(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [kafka_json(v) for v in value]
    if isinstance(value, uuid.UUID):
        return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
    return value


# Where releases differ: DumpLogSegments moved to the tools module (Java) after 4.0; since 4.1
# eligible leader replicas are on by default (KIP-966), so a controlled shutdown of the last
# replica empties the ISR and moves it to the ELR; after 4.1 (4.1.1's jars still write
# bootstrap.checkpoint, 4.4.0's do not) kafka-storage format writes the bootstrap records into the
# metadata log's first snapshot, 00000000000000000000-0000000000.checkpoint.
DUMP_LOG_SEGMENTS = "kafka.tools.DumpLogSegments" if AK_VERSION < (4, 1) else "org.apache.kafka.tools.DumpLogSegments"
ELR_BY_DEFAULT = AK_VERSION >= (4, 1)
BOOTSTRAP_IN_THE_FIRST_SNAPSHOT = AK_VERSION >= (4, 2)


# How DumpLogSegments shows a control record: its type (4.0), the decoded message (4.4).
def leader_change_line(leader_id: int) -> str:
    if AK_VERSION < (4, 1):
        return "controlType: LEADER_CHANGE(2)"
    return f'LeaderChange: {{"version":0,"leaderId":{leader_id}'


LEADER_CHANGE_LINE = leader_change_line(2)


def dump(path: Path) -> list[str]:
    """The output lines of Kafka's DumpLogSegments with the cluster metadata decoder."""
    result = subprocess.run(
        [
            java_executable(),
            "-Xmx256m",
            "-cp",
            str(Path(AK_LIB) / "*"),
            DUMP_LOG_SEGMENTS,
            "--cluster-metadata-decoder",
            "--files",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def payloads(lines: list[str]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        assert "Error at" not in line, line
        if " payload: " in line:
            out.append(json.loads(line.split(" payload: ", 1)[1]))
    return out


def assert_decoded_as_written(decoded: list[dict[str, Any]], written: list[ApiMessageAndVersion]) -> None:
    assert [(d["type"], d["version"]) for d in decoded] == [(r.type.name, r.version) for r in written]
    for d, r in zip(decoded, written, strict=True):
        ours = kafka_json(dict(r.message))
        # Kafka prints every regular field and the tagged ones away from their defaults.
        assert set(d["data"]) <= set(ours), (r.type.name, d["data"], ours)
        assert {k: ours[k] for k in d["data"]} == d["data"], r.type.name
        for k, v in ours.items():
            if k not in d["data"]:
                default = kafka_json(dict(metadata_record(r.type, r.version).message))[k]
                assert v == default, f"{r.type.name}.{k} = {v!r} was not printed by Kafka"


def test_kafka_dump_log_decodes_a_segment_written_by_kafkalike(tmp_path: Path) -> None:
    records = sample_records()
    segment = leader_change_batch(leader_id=2, voters=[2], granting_voters=[2], base_offset=0, epoch=5, now_ms=1000)
    segment += build_metadata_batch(records[:6], base_offset=1, leader_epoch=5, append_time_ms=2000)
    segment += build_metadata_batch(records[6:], base_offset=7, leader_epoch=6, append_time_ms=3000)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(segment)
    lines = dump(path)
    assert_decoded_as_written(payloads(lines), records)
    batch_lines = [line for line in lines if line.startswith("baseOffset:")]
    assert len(batch_lines) == 3 and all("isvalid: true" in line for line in batch_lines)
    assert "isControl: true" in batch_lines[0] and "partitionLeaderEpoch: 5" in batch_lines[0]
    assert "partitionLeaderEpoch: 6" in batch_lines[2] and "lastOffset: 16" in batch_lines[2]
    assert any(LEADER_CHANGE_LINE in line for line in lines)
    assert not any(line.startswith("Found") and "invalid bytes" in line for line in lines)


def test_kafka_dump_log_decodes_a_snapshot_written_by_kafkalike(tmp_path: Path) -> None:
    records = sample_records()
    snapshot_id = SnapshotId(42, 6)
    voters = control_message(
        ControlMessageType.KRAFT_VOTERS,
        voters=[
            {
                "voter_id": 2,
                "voter_directory_id": DIRECTORY,
                "endpoints": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 19093}],
                "k_raft_version_feature": {"min_supported_version": 0, "max_supported_version": 1},
            }
        ],
    ).message
    data = build_snapshot(
        records,
        epoch=6,
        last_contained_log_timestamp=3000,
        now_ms=4000,
        kraft_version=1,
        voters=voters,
        max_batch_bytes=300,
    )
    path = tmp_path / snapshot_id.file_name
    path.write_bytes(data)
    lines = dump(path)
    assert lines[1] == "Snapshot end offset: 42, epoch: 6"
    assert_decoded_as_written(payloads(lines), records)
    header = next(line for line in lines if " SnapshotHeader " in line)
    assert json.loads(header.split(" SnapshotHeader ", 1)[1]) == {"version": 0, "lastContainedLogTimestamp": 3000}
    assert any(' KRaftVersion {"version":0,"kRaftVersion":1}' in line for line in lines)
    voters_line = next(line for line in lines if " KRaftVoters " in line)
    assert json.loads(voters_line.split(" KRaftVoters ", 1)[1]) == kafka_json(dict(voters))
    assert " SnapshotFooter " in [line for line in lines if "offset:" in line][-1]


def run_node_writing_a_snapshot(tmp_path: Path) -> tuple[Path, SnapshotId, list[ApiMessageAndVersion]]:
    """A controller node (one voter, its metadata log on disk) where two topics were created and
    a snapshot taken after each batch; its metadata directory, latest snapshot and the records of
    its image at that snapshot."""
    import trio

    from kafkalike.server.config import BrokerConfig
    from kafkalike.server.node import Node
    from kafkalike.testing.controller_requests import heartbeat, registration
    from kafkalike.testing.wire_client import AsyncWireClient

    cluster_id = "dump-log-cluster-000000A"
    data = tmp_path / "node"
    data.mkdir()
    (data / "meta.properties").write_text(f"version=1\ncluster.id={cluster_id}\nnode.id=1\n")
    if AK_BEFORE_4_1:  # formatted at 4.0's release: 4.0's tools read no RegisterBrokerRecord v4 (4.3-IV0+)
        bootstrap = bootstrap_records(feature_levels("4.0-IV3", dynamic_quorum=False))
        (data / BOOTSTRAP_CHECKPOINT).write_bytes(
            build_snapshot(bootstrap, epoch=0, last_contained_log_timestamp=0, now_ms=0)
        )
    out: list[Any] = []

    async def main() -> None:
        bound = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = bound[0].socket.getsockname()[1]
        config = BrokerConfig(
            {
                "process.roles": "controller",
                "node.id": "1",
                "controller.quorum.voters": f"1@127.0.0.1:{port}",
                "controller.listener.names": "CONTROLLER",
                "listeners": f"CONTROLLER://127.0.0.1:{port}",
                "log.dirs": str(data),
                "controller.quorum.election.timeout.ms": "200",
                "metadata.log.max.record.bytes.between.snapshots": "1",
            }
        )
        node = Node(config, controller_bound=bound)
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                await nursery.start(node.run)
                driver, host = node.driver, node.controller
                assert driver is not None and host is not None
                await driver.wait_for(lambda: driver.is_leader)
                await host.wait_active()
                client = await AsyncWireClient.connect("127.0.0.1", port)
                registered = await client.request(62, 4, registration(1, cluster_id))
                await client.request(63, 1, heartbeat(1, registered.broker_epoch, 2**40))
                specs = [topic_spec("dumped", 3, {"cleanup.policy": "compact"}), topic_spec("plain", 1)]
                created = await client.request(19, 7, create_topics_body(specs))
                assert [t.error_code for t in created.topics] == [0, 0]
                await client.aclose()
                end = node.metadata_offset + 1
                await driver.wait_for(lambda: bool(node.snapshots_written) and node.snapshots_written[-1].offset == end)
                latest = node.snapshots_written[-1]
                out.extend([SnapshotId(latest.offset, latest.epoch), node.image.image.records()])
                await node.stop()
                nursery.cancel_scope.cancel()

    trio.run(main)
    return data / "__cluster_metadata-0", out[0], out[1]


def test_kafka_dump_log_decodes_the_snapshot_and_log_of_a_running_node(tmp_path: Path) -> None:
    metadata, snapshot_id, records = run_node_writing_a_snapshot(tmp_path)
    lines = dump(metadata / snapshot_id.file_name)
    assert lines[1] == f"Snapshot end offset: {snapshot_id.end_offset}, epoch: {snapshot_id.epoch}"
    assert_decoded_as_written(payloads(lines), records)
    assert any(r.type == T.TOPIC_RECORD and r.message["name"] == "dumped" for r in records)
    assert " SnapshotFooter " in [line for line in lines if "offset:" in line][-1]
    # The log the snapshot was taken of: every batch valid, the leader's control record first.
    (segment,) = sorted(metadata.glob("*.log"))
    log_lines = dump(segment)
    batches = [line for line in log_lines if line.startswith("baseOffset:")]
    assert batches and all("isvalid: true" in line for line in batches)
    assert any(leader_change_line(1) in line for line in log_lines)
    assert {d["type"] for d in payloads(log_lines)} >= {"TOPIC_RECORD", "PARTITION_RECORD", "FEATURE_LEVEL_RECORD"}


# -- the other way: a real Kafka node's files read by kafkalike


@pytest.fixture(scope="module")
def kafka_metadata_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, uuid.UUID]]]:
    """A stopped Kafka 4.0.2 node's __cluster_metadata-0 (copied), where three topics were created,
    with at least one snapshot taken after they were; and the topics' ids."""
    work = tmp_path_factory.mktemp("ak-metadata")
    overrides = {"metadata.log.max.record.bytes.between.snapshots": "10"}  # a snapshot after every few records
    kafka = ApacheKafkaProcess(Path(AK_LIB), work, overrides).start()
    try:
        topic_ids = create_topics(kafka, {"md-one": 1, "md-three": 3, "md-config": 2})
        metadata = work / "logs" / "__cluster_metadata-0"
        wait_for_snapshot_with(metadata, set(topic_ids.values()))
    finally:
        kafka.stop()
    copy = work / "copy"
    shutil.copytree(metadata, copy)
    yield copy, topic_ids


def create_topics(kafka: ApacheKafkaProcess, partitions: dict[str, int]) -> dict[str, uuid.UUID]:
    specs = [
        topic_spec(name, count, {"cleanup.policy": "compact"} if name == "md-config" else None)
        for name, count in partitions.items()
    ]
    with WireClient(kafka.host, kafka.port) as client:
        response = client.request(19, 7, create_topics_body(specs))
    assert [t.error_code for t in response.topics] == [0] * len(partitions)
    return {t.name: t.topic_id for t in response.topics}


def snapshot_images(metadata: Path) -> Iterator[tuple[SnapshotId, MetadataImage]]:
    files = SnapshotFiles(FileLogDirectory(metadata))
    for snapshot_id in reversed(files.ids()):
        loader = MetadataLoader()
        loader.load_snapshot(snapshot_id, files.read(snapshot_id))
        yield snapshot_id, loader.image


def wait_for_snapshot_with(metadata: Path, topic_ids: set[uuid.UUID], timeout_s: float = 60.0) -> None:
    """Until Kafka has written a snapshot holding every topic (bounded: snapshots follow records)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for _, image in snapshot_images(metadata):
            if topic_ids <= set(image.topics_by_id):
                return
            break
        time.sleep(0.2)
    raise AssertionError(f"no snapshot with topics {topic_ids} in {sorted(p.name for p in metadata.iterdir())}")


def assert_has_kafkas_topics(image: MetadataImage, topic_ids: dict[str, uuid.UUID], *, running: bool) -> None:
    """The topics as Kafka created them: while the node ran, led by it; after its controlled
    shutdown, without a leader (leader -1 bumped the leader epoch) and the broker fenced (and,
    with ELR, out of the ISR and in the ELR)."""
    counts = {"md-one": 1, "md-three": 3, "md-config": 2}
    for name, topic_id in topic_ids.items():
        topic = image.topic(name)
        assert topic is not None and topic.topic_id == topic_id
        assert sorted(topic.partitions) == list(range(counts[name]))
        for p in topic.partitions.values():
            expected = (1, 0, 0) if running else (-1, 1, 1)
            in_elr = ELR_BY_DEFAULT and not running
            assert (p.replicas, p.isr, p.elr) == ((1,), () if in_elr else (1,), (1,) if in_elr else ())
            assert (p.leader, p.leader_epoch, p.partition_epoch) == expected
    assert dict(image.topic_configs("md-config")) == {"cleanup.policy": "compact"}
    broker = image.brokers[1]
    assert broker.listeners[0].name == "PLAINTEXT" and broker.listeners[0].host == "127.0.0.1"
    assert (broker.fenced, broker.in_controlled_shutdown) == ((False, False) if running else (True, True))
    assert image.metadata_version > 0 and "metadata.version" in broker.supported_features


def log_images(metadata: Path) -> dict[int, MetadataImage]:
    """The image after each batch of the node's metadata log segment, by the batch's last offset."""
    loader = MetadataLoader()
    images = {}
    for batch in read_metadata_batches((metadata / "00000000000000000000.log").read_bytes()):
        loader.apply_batch(batch)
        images[batch.last_offset] = loader.image
    assert not loader.in_transaction
    return images


def test_kafkalike_reads_a_kafka_metadata_log_segment(kafka_metadata_dir: tuple[Path, dict[str, uuid.UUID]]) -> None:
    metadata, topic_ids = kafka_metadata_dir
    images = log_images(metadata)
    final = images[max(images)]
    assert_has_kafkas_topics(final, topic_ids, running=False)
    # The first image with all three topics, before the shutdown: the node led them, unfenced.
    running = next(i for _, i in sorted(images.items()) if set(topic_ids.values()) <= set(i.topics_by_id))
    assert_has_kafkas_topics(running, topic_ids, running=True)
    # Every batch, rebuilt from what was decoded, is the bytes Kafka wrote.
    segment = (metadata / "00000000000000000000.log").read_bytes()
    assert rebuilt(segment) == segment


def test_kafkalike_reads_kafka_snapshots_as_the_image_of_the_log_at_their_offset(
    kafka_metadata_dir: tuple[Path, dict[str, uuid.UUID]],
) -> None:
    metadata, topic_ids = kafka_metadata_dir
    names = [p.name for p in metadata.iterdir() if re.fullmatch(r"\d{20}-\d{10}\.checkpoint", p.name)]
    assert len(names) > 1 and all(parse_snapshot_file_name(n) is not None for n in names)
    images = log_images(metadata)
    snapshots = list(snapshot_images(metadata))
    for snapshot_id, image in snapshots:
        assert image.provenance.last_offset == snapshot_id.end_offset - 1
        data = (metadata / snapshot_id.file_name).read_bytes()
        if snapshot_id.end_offset == 0:  # the bootstrap records, before the log
            assert BOOTSTRAP_IN_THE_FIRST_SNAPSHOT and image.metadata_version > 0, snapshot_id
            assert rebuilt(data) == data, snapshot_id
            continue
        from_log = images[snapshot_id.end_offset - 1]
        assert replace(image, provenance=from_log.provenance) == from_log, snapshot_id
        assert rebuilt(data) == data, snapshot_id
    latest_id, latest = snapshots[0]
    assert_has_kafkas_topics(latest, topic_ids, running=False)
    # What kafkalike writes of that image, Kafka's tool decodes with the same topics.
    written = build_snapshot(latest.records(), epoch=latest_id.epoch, last_contained_log_timestamp=0, now_ms=0)
    (metadata / "rewritten").mkdir()
    path = metadata / "rewritten" / latest_id.file_name
    path.write_bytes(written)
    decoded = payloads(dump(path))
    assert {d["data"]["name"] for d in decoded if d["type"] == "TOPIC_RECORD"} == set(topic_ids)


def test_the_comparison_catches_what_kafka_reads_differently(tmp_path: Path) -> None:
    # Negative control: a value Kafka decodes differently, and a frame Kafka cannot decode.
    written = metadata_record(T.TOPIC_RECORD, name="orders", topic_id=TOPIC_ID)
    claimed = metadata_record(T.TOPIC_RECORD, name="orderz", topic_id=TOPIC_ID)
    bad_frame = Record(value=b"\x00" + encode_metadata_record(written)[1:])
    segment = build_metadata_batch([written], base_offset=0, leader_epoch=1, append_time_ms=0)
    segment += build_batch([bad_frame], base_offset=1, partition_leader_epoch=1, base_timestamp=0)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(segment)
    lines = dump(path)
    with pytest.raises(AssertionError, match="orders"):
        assert_decoded_as_written(payloads(lines[:-1]), [claimed])
    with pytest.raises(AssertionError, match="Error at 1"):
        payloads(lines)


def rebuilt(data: bytes) -> bytes:
    """Each batch of ``data`` decoded and written again by kafkalike's builders."""
    out = b""
    for b in read_metadata_batches(data):
        common = {"base_offset": b.base_offset, "leader_epoch": b.leader_epoch, "append_time_ms": b.append_time_ms}
        if b.control:
            out += build_control_batch(list(b.control), **common)
        else:
            out += build_metadata_batch(list(b.records), **common)
    return out


def test_kafka_storage_format_files_are_read_and_rewritten_byte_for_byte(tmp_path: Path) -> None:
    """kafka-storage format --standalone writes the bootstrap snapshot (features) and the first
    metadata snapshot (kraft.version 1 and the voter set); kafkalike reads both and writes the
    same bytes again, control records and all."""
    port = 39093
    config = tmp_path / "server.properties"
    logs = tmp_path / "logs"
    config.write_text(
        "process.roles=broker,controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port - 1},CONTROLLER://127.0.0.1:{port}\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        f"controller.quorum.bootstrap.servers=127.0.0.1:{port}\nlog.dirs={logs}\n"
    )
    formatted = subprocess.run(
        [
            *(java_executable(), "-Xmx256m", "-cp", str(Path(AK_LIB) / "*"), "kafka.tools.StorageTool", "format"),
            *("-t", "q1Sh-9_ISia_zwGINzRvyQ", "-c", str(config), "--standalone"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    (first,) = SnapshotFiles(FileLogDirectory(logs / "__cluster_metadata-0")).ids()
    assert first == SnapshotId(0, 0)
    voters_snapshot = (logs / "__cluster_metadata-0" / first.file_name).read_bytes()
    assert (logs / "bootstrap.checkpoint").exists() != BOOTSTRAP_IN_THE_FIRST_SNAPSHOT
    bootstrap = voters_snapshot if BOOTSTRAP_IN_THE_FIRST_SNAPSHOT else (logs / "bootstrap.checkpoint").read_bytes()
    contents = read_snapshot(bootstrap)
    assert (contents.records[0].type, contents.records[0].name) == (T.FEATURE_LEVEL_RECORD, "metadata.version")
    assert MetadataLoader().load_snapshot(SnapshotId(0, 0), bootstrap).apply().metadata_version > 0
    assert rebuilt(bootstrap) == bootstrap

    contents = read_snapshot(voters_snapshot)
    assert contents.kraft_version == 1
    assert bool(contents.records) == BOOTSTRAP_IN_THE_FIRST_SNAPSHOT
    (voter,) = contents.voters.voters
    directory_id = re.search(r"^directory.id=(\S+)$", (logs / "meta.properties").read_text(), re.M)
    assert directory_id is not None
    assert kafka_json(voter.voter_directory_id) == directory_id.group(1)
    assert (voter.voter_id, voter.endpoints[0].name, voter.endpoints[0].port) == (1, "CONTROLLER", port)
    assert rebuilt(voters_snapshot) == voters_snapshot
