"""Broker registration, unfencing and controlled shutdown against a real Apache Kafka node.

A combined node (from the jars in $KAFKALIKE_AK_LIB) starts, has topics created, and stops with a
controlled shutdown; its metadata log then holds what Kafka's controller wrote for its broker:
the RegisterBrokerRecord, (from metadata.version 4.3-IV0) the cordoned log directories its first
heartbeat after recovery reports, the unfencing, the controlled shutdown (leaderships moved away) and the
final fencing. The cluster control manager, walked through the same log (each batch's image
before it, the same requests the broker sent), writes every one of those batches record for
record, byte for byte."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.differential.conftest import AK_BEFORE_4_1, AK_LIB, create_topics_body, topic_spec
from kafkalike.controller.cluster_control import ClusterControlManager
from kafkalike.controller.loader import MetadataLoader
from kafkalike.protocol.codec import schema
from kafkalike.protocol.metadata_records import (
    ApiMessageAndVersion,
    MetadataBatch,
    MetadataRecordType,
    encode_metadata_record,
    read_metadata_batches,
)
from kafkalike.testing.apache_kafka import ApacheKafkaProcess, java_executable
from kafkalike.testing.wire_client import WireClient

pytestmark = pytest.mark.differential

T = MetadataRecordType
REGISTRATION_VERSION = 4  # what a 4.0.2 broker sends
CORDONED_LEVEL = 30  # metadata.version 4.3-IV0: heartbeats report cordoned log directories


def format_with_elr(level: int) -> Any:
    """Kafka's own storage format, with eligible leader replicas (KIP-966) at ``level``."""

    def command(config: Path, cluster_id: str) -> list[str]:
        java = [java_executable(), "-Xmx256m", "-cp", str(Path(AK_LIB) / "*"), "kafka.tools.StorageTool"]
        feature = f"eligible.leader.replicas.version={level}"
        return [*java, "format", "-t", cluster_id, "-c", str(config), "--feature", feature]

    return command


@pytest.fixture(scope="module", params=["elr-off", "elr-on"])
def kafka_log(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[MetadataBatch], str]]:
    """The batches of a stopped node's metadata log, and its cluster id (ELR off, as a new 4.0
    cluster has it, or on, as a new 4.1+ cluster has it)."""
    work = tmp_path_factory.mktemp("ak-cluster-control")
    elr_on = request.param == "elr-on"
    formatting = None if elr_on != AK_BEFORE_4_1 else format_with_elr(1 if elr_on else 0)
    kafka = ApacheKafkaProcess(Path(AK_LIB), work, format_command=formatting).start()
    try:
        with WireClient(kafka.host, kafka.port) as client:
            response = client.request(19, 7, create_topics_body([topic_spec("cc-one", 1), topic_spec("cc-three", 3)]))
        assert [t.error_code for t in response.topics] == [0, 0]
    finally:
        kafka.stop()
    logs = work / "logs"
    props = dict(
        line.split("=", 1)
        for line in (logs / "meta.properties").read_text().splitlines()
        if "=" in line and line[0] != "#"
    )
    segment = logs / "__cluster_metadata-0" / "00000000000000000000.log"
    copy = work / "segment.log"
    shutil.copy(segment, copy)
    yield list(read_metadata_batches(copy.read_bytes())), props["cluster.id"]


def registration_request(record: ApiMessageAndVersion, cluster_id: str) -> Any:
    """The BrokerRegistration the broker sent, as the record it led to shows it."""
    body = {
        "broker_id": record.broker_id,
        "cluster_id": cluster_id,
        "incarnation_id": record.incarnation_id,
        "listeners": [dict(e) for e in record.end_points],
        "features": [dict(f) for f in record.features],
        "rack": record.rack,
        "is_migrating_zk_broker": False,
        "log_dirs": list(record.log_dirs),
        "previous_broker_epoch": -1,
    }
    s = schema("BrokerRegistration", "request", REGISTRATION_VERSION)
    return s.decode(s.encode(body))


def heartbeat_request(
    broker_id: int, epoch: int, offset: int, *, want_shut_down: bool = False, cordoned: list[uuid.UUID] | None = None
) -> Any:
    """A heartbeat as the broker sent it; a 4.3+ broker past recovery names its cordoned
    directories (BrokerHeartbeat v2)."""
    body = {
        "broker_id": broker_id,
        "broker_epoch": epoch,
        "current_metadata_offset": offset,
        "want_fence": False,
        "want_shut_down": want_shut_down,
        "cordoned_log_dirs": cordoned,
    }
    s = schema("BrokerHeartbeat", "request", 1 if cordoned is None else 2)
    return s.decode(s.encode(body))


def operation(batch: MetadataBatch) -> tuple[int, list[ApiMessageAndVersion]]:
    """A batch's records without the NoOpRecords the controller's periodic task adds to whatever
    batch is being written, and the offset of the first of them."""
    kept = [(batch.base_offset + i, r) for i, r in enumerate(batch.records) if r.type != T.NO_OP_RECORD]
    return (kept[0][0] if kept else batch.base_offset), [r for _, r in kept]


def kinds(batch: MetadataBatch) -> list[str]:
    out = []
    for r in operation(batch)[1]:
        if r.type == T.BROKER_REGISTRATION_CHANGE_RECORD and r.cordoned_log_dirs is not None:
            out.append("cordon")
        elif r.type == T.BROKER_REGISTRATION_CHANGE_RECORD:
            out.append("unfence" if r.fenced == -1 else "fence" if r.fenced == 1 else "shutdown")
        else:
            out.append(r.type.name)
    return out


def walk(
    batches: list[MetadataBatch], cluster_id: str
) -> list[tuple[str, MetadataBatch, tuple[ApiMessageAndVersion, ...]]]:
    """(what, Kafka's batch, our records) for every broker batch of the log, each of ours made
    against the image before Kafka's batch."""
    manager = ClusterControlManager(cluster_id=cluster_id)
    loader = MetadataLoader()
    out = []
    activated = False
    epoch = -1
    cordoned: list[uuid.UUID] | None = None
    for batch in batches:
        image, now_ms = loader.image, batch.append_time_ms
        if not activated and image.metadata_version:
            manager.activate(image, now_ms)
            activated = True
        what = kinds(batch)
        first, records = operation(batch)
        ours: tuple[ApiMessageAndVersion, ...] | None = None
        if T.REGISTER_BROKER_RECORD.name in what:
            record = next(r for r in records if r.type == T.REGISTER_BROKER_RECORD)
            request = registration_request(record, cluster_id)
            result = manager.register_broker(
                image, request, api_version=REGISTRATION_VERSION, next_offset=first, now_ms=now_ms
            )
            ours, epoch = result.records, result.reply.broker_epoch
        elif what[:1] in (["cordon"], ["unfence"], ["shutdown"], ["fence"]):
            broker_id = records[0].broker_id
            # first reported alone while the broker catches up, or with its unfencing
            reports = [
                r for r in records if r.type == T.BROKER_REGISTRATION_CHANGE_RECORD and r.cordoned_log_dirs is not None
            ]
            if reports:
                cordoned = list(reports[0].cordoned_log_dirs)
            want_shut_down = what[0] in ("shutdown", "fence")
            reported = cordoned if image.metadata_version >= CORDONED_LEVEL else None
            # The first report comes while the broker still catches up (not yet at its registration).
            offset = epoch - 1 if what[0] == "cordon" else first - 1
            request = heartbeat_request(broker_id, epoch, offset, want_shut_down=want_shut_down, cordoned=reported)
            ours = manager.heartbeat(image, request, next_offset=first, now_ms=now_ms).records
        if ours is not None:
            out.append((what[0] if what[0] != T.REGISTER_BROKER_RECORD.name else "register", batch, ours))
        loader.apply_batch(batch)
        for i, r in enumerate(batch.records):
            manager.replay(r, batch.base_offset + i)
    return out


def test_our_broker_records_are_the_batches_kafka_wrote(kafka_log: tuple[list[MetadataBatch], str]) -> None:
    batches, cluster_id = kafka_log
    walked = walk(batches, cluster_id)
    shape = [(b.base_offset, kinds(b)) for b in batches if b.records]
    reports = sum(kinds(b).count("cordon") for _, b, _ in walked)
    assert (reports, [w for w, _, _ in walked if w != "cordon"]) == (
        1 if loader_version(batches) >= CORDONED_LEVEL else 0,
        ["register", "unfence", "shutdown", "fence"],
    ), shape
    for what, theirs, ours in walked:
        theirs_records = operation(theirs)[1]
        assert [encode_metadata_record(r) for r in ours] == [encode_metadata_record(r) for r in theirs_records], what
    shutdown = next(b for w, b, _ in walked if w == "shutdown")
    assert kinds(shutdown) == ["shutdown", *["PARTITION_CHANGE_RECORD"] * 4]  # every partition's leader moved
    moved = operation(shutdown)[1][1:]
    elr_on = any(
        r.type == T.FEATURE_LEVEL_RECORD and r.name == "eligible.leader.replicas.version"
        for b in batches
        for r in b.records
    )
    if elr_on:  # the ISR emptied into the ELR, and the last leader remembered
        assert all((r.isr, r.eligible_leader_replicas, r.last_known_elr) == ([], [1], [1]) for r in moved)
    else:  # the last ISR member stays
        assert all(r.isr is None and r.eligible_leader_replicas is None for r in moved)


def loader_version(batches: list[MetadataBatch]) -> int:
    loader = MetadataLoader()
    for b in batches:
        loader.apply_batch(b)
    return loader.image.metadata_version


def test_the_comparison_catches_a_different_record(kafka_log: tuple[list[MetadataBatch], str]) -> None:
    """Negative control: a registration with another rack is not Kafka's batch."""
    batches, cluster_id = kafka_log
    register = next(b for b in batches if T.REGISTER_BROKER_RECORD.name in kinds(b))
    record = operation(register)[1][0]
    request = registration_request(record, cluster_id)
    request.rack = "elsewhere"
    loader = MetadataLoader()
    for b in batches:
        if b is register:
            break
        loader.apply_batch(b)
    manager = ClusterControlManager(cluster_id=cluster_id)
    manager.activate(loader.image, 0)
    ours = manager.register_broker(loader.image, request, api_version=4, next_offset=register.base_offset, now_ms=0)
    assert [encode_metadata_record(r) for r in ours.records] != [
        encode_metadata_record(r) for r in operation(register)[1]
    ]
    assert uuid.UUID(str(record.incarnation_id)) == ours.records[0].incarnation_id
