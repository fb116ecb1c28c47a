"""Committed batches and snapshots into images: transactions, provenance, snapshot files."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkalike.controller.delta import replay_records
from kafkalike.controller.image import EMPTY_IMAGE, MetadataImage, MetadataProvenance
from kafkalike.controller.loader import (
    MetadataLoader,
    build_image_snapshot,
    load_latest_snapshot,
    write_image_snapshot,
)
from kafkalike.log.snapshot_files import SnapshotFiles, SnapshotId
from kafkalike.log.storage import FileLogDirectory, MemoryLogDirectory
from kafkalike.protocol.metadata_records import (
    ApiMessageAndVersion,
    MetadataBatch,
    MetadataRecordError,
    MetadataRecordType,
    build_metadata_batch,
    leader_change_batch,
    metadata_record,
    read_metadata_batches,
    read_snapshot,
)

T = MetadataRecordType
TOPIC = uuid.UUID(int=7)


def rec(record_type: MetadataRecordType, **fields: Any) -> ApiMessageAndVersion:
    return metadata_record(record_type, **fields)


def topic(name: str = "orders", topic_id: uuid.UUID = TOPIC) -> list[ApiMessageAndVersion]:
    return [
        rec(T.TOPIC_RECORD, name=name, topic_id=topic_id),
        rec(T.PARTITION_RECORD, partition_id=0, topic_id=topic_id, replicas=[1], isr=[1], leader=1),
    ]


def batch(records: list[ApiMessageAndVersion], base_offset: int, epoch: int = 1, time_ms: int = 100) -> MetadataBatch:
    data = build_metadata_batch(records, base_offset=base_offset, leader_epoch=epoch, append_time_ms=time_ms)
    (decoded,) = read_metadata_batches(data)
    return decoded


def test_batches_replay_in_order_and_the_image_records_where_it_is() -> None:
    loader = MetadataLoader()
    leader_change = next(
        read_metadata_batches(
            leader_change_batch(leader_id=1, voters=[1], granting_voters=[1], base_offset=0, epoch=1, now_ms=50)
        )
    )
    loader.apply_batch(leader_change)
    assert loader.image.provenance == MetadataProvenance(0, 1, 50) and loader.image.topics_by_id == {}
    delta = loader.apply_batch(batch(topic(), base_offset=1, epoch=1, time_ms=60))
    assert delta.created_topic_ids == {TOPIC}
    assert loader.image.provenance == MetadataProvenance(2, 1, 60)
    expected = replay_records(EMPTY_IMAGE, topic())
    assert loader.image.topics_by_id == expected.topics_by_id


def test_a_transaction_applies_at_its_end_even_across_batches() -> None:
    loader = MetadataLoader()
    loader.apply_batch(batch([rec(T.BEGIN_TRANSACTION_RECORD, name="bootstrap"), topic()[0]], base_offset=0))
    assert loader.in_transaction and loader.image.topics_by_id == {}
    loader.apply_batch(batch([topic()[1], rec(T.END_TRANSACTION_RECORD)], base_offset=2))
    assert not loader.in_transaction
    created = loader.image.topic("orders")
    assert created is not None and list(created.partitions) == [0]
    assert loader.image.provenance.last_offset == 3


def test_an_aborted_transaction_leaves_nothing() -> None:
    loader = MetadataLoader()
    records = [rec(T.BEGIN_TRANSACTION_RECORD), *topic(), rec(T.ABORT_TRANSACTION_RECORD, reason="no")]
    loader.apply_batch(batch([*records, rec(T.PRODUCER_IDS_RECORD, broker_id=1, next_producer_id=1000)], 0))
    assert loader.image.topics_by_id == {} and loader.image.next_producer_id == 1000


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([rec(T.END_TRANSACTION_RECORD)], "without a transaction"),
        ([rec(T.ABORT_TRANSACTION_RECORD)], "without a transaction"),
        ([rec(T.BEGIN_TRANSACTION_RECORD), rec(T.BEGIN_TRANSACTION_RECORD)], "inside a transaction"),
    ],
)
def test_transaction_records_out_of_order_are_errors(records: list[ApiMessageAndVersion], message: str) -> None:
    with pytest.raises(MetadataRecordError, match=message):
        MetadataLoader().apply_batch(batch(records, 0))


def _busy_image() -> MetadataImage:
    loader = MetadataLoader()
    loader.apply_batch(
        batch(
            [
                rec(T.FEATURE_LEVEL_RECORD, name="metadata.version", feature_level=25),
                rec(
                    T.REGISTER_BROKER_RECORD,
                    broker_id=1,
                    broker_epoch=5,
                    incarnation_id=uuid.UUID(int=1),
                    end_points=[{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092, "security_protocol": 0}],
                ),
                rec(T.UNFENCE_BROKER_RECORD, id=1, epoch=5),
                *topic(),
                *topic("payments", uuid.UUID(int=8)),
                rec(T.CONFIG_RECORD, resource_type=2, resource_name="orders", name="retention.ms", value="60000"),
                rec(T.PRODUCER_IDS_RECORD, broker_id=1, broker_epoch=5, next_producer_id=3000),
            ],
            base_offset=0,
            epoch=4,
            time_ms=1_700_000_000_000,
        )
    )
    return loader.image


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_an_image_written_to_a_snapshot_file_reads_back_equal(tmp_path: Path, kind: str) -> None:
    image = _busy_image()
    directory = FileLogDirectory(tmp_path / "meta") if kind == "file" else MemoryLogDirectory()
    files = SnapshotFiles(directory)
    snapshot_id = write_image_snapshot(files, image, now_ms=1_700_000_000_500)
    assert snapshot_id == SnapshotId(image.provenance.last_offset + 1, 4)
    assert directory.list_names() == [f"{snapshot_id.end_offset:020d}-0000000004.checkpoint"]
    assert read_snapshot(files.read(snapshot_id)).last_contained_log_timestamp == 1_700_000_000_000
    assert load_latest_snapshot(files) == image


def test_no_snapshot_means_no_image() -> None:
    assert load_latest_snapshot(SnapshotFiles(MemoryLogDirectory())) is None


def test_loading_a_snapshot_over_an_image_removes_what_the_snapshot_lacks() -> None:
    image = _busy_image()
    snapshot_id, data = build_image_snapshot(image, now_ms=0)
    loader = MetadataLoader()
    loader.apply_batch(batch([*topic("stale", uuid.UUID(int=99))], base_offset=0))
    loader.apply_batch(
        batch([rec(T.CONFIG_RECORD, resource_type=2, resource_name="orders", name="stale.cfg", value="1")], 2)
    )
    loader.apply_batch(batch([rec(T.FEATURE_LEVEL_RECORD, name="stale.version", feature_level=1)], 3))
    delta = loader.load_snapshot(snapshot_id, data)
    assert loader.image == image
    assert set(delta.deleted_topics) == {uuid.UUID(int=99)}
    assert delta.apply(image.provenance) == image


def test_a_torn_snapshot_is_refused() -> None:
    snapshot_id, data = build_image_snapshot(_busy_image(), now_ms=0)
    with pytest.raises(MetadataRecordError):
        MetadataLoader().load_snapshot(snapshot_id, data[: len(data) - 10])
