"""Committed metadata batches and snapshots in, images out: the one replay path of every node.

``MetadataLoader`` keeps the current image. A node hands it each committed batch of the
``__cluster_metadata`` log in offset order (``apply_batch``) or a snapshot (``load_snapshot``); it
replays the records through a ``MetadataDelta`` and returns that delta, whose ``apply`` is now the
loader's image, so that the caller (the replica manager) can react to what changed.

Metadata transactions (KIP-868): records between a BeginTransactionRecord and its
EndTransactionRecord are held back and replayed together at the end; an AbortTransactionRecord
drops them. A transaction may span batches. Control batches (LeaderChange, snapshot header and
footer, KRaft version and voters) carry no metadata and only move the provenance.

Snapshots are written from an image (``write_image_snapshot``): the snapshot id is the image's
last offset + 1 and its epoch, the header's last contained log timestamp its last append time.
"""

from __future__ import annotations

from kafkalike.controller.delta import MetadataDelta
from kafkalike.controller.image import EMPTY_IMAGE, MetadataImage, MetadataProvenance
from kafkalike.log.snapshot_files import SnapshotFiles, SnapshotId
from kafkalike.protocol.codec import Message
from kafkalike.protocol.metadata_records import (
    ApiMessageAndVersion,
    MetadataBatch,
    MetadataRecordError,
    MetadataRecordType,
    build_snapshot,
    metadata_record,
    read_snapshot,
)

T = MetadataRecordType


class MetadataLoader:
    """The image of a node, moved forward by committed batches and snapshots."""

    def __init__(self, image: MetadataImage = EMPTY_IMAGE) -> None:
        self.image = image
        self._transaction: list[ApiMessageAndVersion] | None = None

    @property
    def in_transaction(self) -> bool:
        return self._transaction is not None

    def apply_batch(self, batch: MetadataBatch) -> MetadataDelta:
        """Replay one committed batch; the delta it made (possibly empty)."""
        delta = MetadataDelta(self.image)
        for record in batch.records:
            if record.type == T.BEGIN_TRANSACTION_RECORD:
                if self._transaction is not None:
                    raise MetadataRecordError(
                        f"BeginTransactionRecord at offset {batch.base_offset} inside a transaction"
                    )
                self._transaction = []
            elif record.type == T.END_TRANSACTION_RECORD:
                delta.replay_all(self._end_transaction(batch, "EndTransactionRecord"))
            elif record.type == T.ABORT_TRANSACTION_RECORD:
                self._end_transaction(batch, "AbortTransactionRecord")
            elif self._transaction is not None:
                self._transaction.append(record)
            else:
                delta.replay(record)
        self.image = delta.apply(MetadataProvenance(batch.last_offset, batch.leader_epoch, batch.append_time_ms))
        return delta

    def _end_transaction(self, batch: MetadataBatch, what: str) -> list[ApiMessageAndVersion]:
        if self._transaction is None:
            raise MetadataRecordError(f"{what} at offset {batch.base_offset} without a transaction")
        records, self._transaction = self._transaction, None
        return records

    def load_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> MetadataDelta:
        """Replace the image by a snapshot's; the delta from the old image to it.

        Entities of the old image that the snapshot lacks are gone, as in Kafka's finishSnapshot.
        """
        contents = read_snapshot(data)
        fresh = MetadataDelta(EMPTY_IMAGE).replay_all(contents.records)
        provenance = MetadataProvenance(
            snapshot_id.end_offset - 1, snapshot_id.epoch, contents.last_contained_log_timestamp
        )
        image = fresh.apply(provenance)
        if self.image == EMPTY_IMAGE:
            delta = fresh  # at start-up: the snapshot is all there is
        else:
            # The delta the caller sees runs from the old image to the snapshot's.
            delta = MetadataDelta(self.image).replay_all(_removals(self.image, image))
            delta.replay_all(contents.records)
        self.image = image
        self._transaction = None
        return delta


def _removals(old: MetadataImage, new: MetadataImage) -> list[ApiMessageAndVersion]:
    """Records removing what ``old`` has and ``new`` lacks (what a snapshot's records cannot say)."""
    out = [metadata_record(T.REMOVE_TOPIC_RECORD, topic_id=i) for i in old.topics_by_id if i not in new.topics_by_id]
    out += [
        metadata_record(T.UNREGISTER_BROKER_RECORD, broker_id=b.broker_id, broker_epoch=b.epoch)
        for b in old.brokers.values()
        if b.broker_id not in new.brokers
    ]
    out += [
        metadata_record(T.FEATURE_LEVEL_RECORD, name=n, feature_level=0) for n in old.features if n not in new.features
    ]
    for resource, values in old.configs.items():
        kept = new.configs.get(resource, {})
        out += [
            metadata_record(
                T.CONFIG_RECORD, resource_type=resource.type, resource_name=resource.name, name=k, value=None
            )
            for k in values
            if k not in kept
        ]
    return out


def image_snapshot_id(image: MetadataImage) -> SnapshotId:
    """The id of a snapshot of ``image``: the offset after its last record, and that record's epoch."""
    return SnapshotId(image.provenance.last_offset + 1, max(image.provenance.last_epoch, 0))


def build_image_snapshot(
    image: MetadataImage, *, now_ms: int, kraft_version: int = 0, voters: Message = None
) -> tuple[SnapshotId, bytes]:
    """A snapshot of ``image``: its id and the bytes of its ``.checkpoint`` file."""
    snapshot_id = image_snapshot_id(image)
    data = build_snapshot(
        image.records(),
        epoch=snapshot_id.epoch,
        last_contained_log_timestamp=max(image.provenance.last_append_time_ms, 0),
        now_ms=now_ms,
        kraft_version=kraft_version,
        voters=voters,
    )
    return snapshot_id, data


def write_image_snapshot(
    files: SnapshotFiles, image: MetadataImage, *, now_ms: int, kraft_version: int = 0, voters: Message = None
) -> SnapshotId:
    """Write a snapshot of ``image`` into the metadata log directory (disk work: a worker thread)."""
    snapshot_id, data = build_image_snapshot(image, now_ms=now_ms, kraft_version=kraft_version, voters=voters)
    files.write(snapshot_id, data)
    return snapshot_id


def load_latest_snapshot(files: SnapshotFiles) -> MetadataImage | None:
    """The image of the newest complete snapshot in the directory, or None without one."""
    snapshot_id = files.latest()
    if snapshot_id is None:
        return None
    loader = MetadataLoader()
    loader.load_snapshot(snapshot_id, files.read(snapshot_id))
    return loader.image
