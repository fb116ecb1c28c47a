"""KRaft snapshot files in a log directory, named and replaced as Kafka's ``Snapshots`` does.

A snapshot of the ``__cluster_metadata-0`` log lives beside its segments, named by its id: the
offset it ends at (exclusive: the first offset not in it) and the epoch of the last record it
contains, ``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint``, e.g.
``00000000000000000042-0000000003.checkpoint``. Its bytes are record batches
(:func:`kafkalike.protocol.metadata_records.build_snapshot`); this module does not look inside.

A snapshot is written whole to a temporary file, fsynced and renamed into place, so a crash leaves
either the complete file or none. Kafka renames a snapshot it retires to ``.checkpoint.deleted``
before unlinking it; such files, Kafka's ``.checkpoint.part`` partial files and our own temporary
files are never listed as snapshots, and ``remove_leftovers`` clears them at start-up.

The calls do disk work: call them from a worker thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kafkalike.log.storage import LogDirectory

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
DELETED_SUFFIX = ".checkpoint.deleted"
_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")
_LEFTOVER = re.compile(r"\d{20}-\d{10}.*\.checkpoint\.(part|deleted)|\d{20}-\d{10}\.checkpoint\.\d+\.tmp")
_MAX_OFFSET = 2**63 - 1
_MAX_EPOCH = 2**31 - 1


@dataclass(frozen=True, order=True, slots=True)
class SnapshotId:
    """A snapshot's end offset (the first offset after it) and the epoch of its last record."""

    end_offset: int
    epoch: int

    def __post_init__(self) -> None:
        if not 0 <= self.end_offset <= _MAX_OFFSET or not 0 <= self.epoch <= _MAX_EPOCH:
            raise ValueError(f"snapshot id out of range: offset {self.end_offset}, epoch {self.epoch}")

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SUFFIX}"


def parse_snapshot_file_name(name: str) -> SnapshotId | None:
    """The id of a complete snapshot file's name; None for any other name."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    return SnapshotId(int(m.group(1)), int(m.group(2)))


class SnapshotFiles:
    """The snapshots of one metadata log directory."""

    def __init__(self, directory: LogDirectory) -> None:
        self.directory = directory

    def ids(self) -> list[SnapshotId]:
        """Every complete snapshot, oldest first."""
        ids = (parse_snapshot_file_name(n) for n in self.directory.list_names())
        return sorted(i for i in ids if i is not None)

    def latest(self) -> SnapshotId | None:
        ids = self.ids()
        return ids[-1] if ids else None

    def write(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Put a complete snapshot in place durably (an existing one of that id is replaced)."""
        self.directory.write_document(snapshot_id.file_name, data, durable=True)

    def read(self, snapshot_id: SnapshotId) -> bytes:
        data = self.directory.read_document(snapshot_id.file_name)
        if data is None:
            raise FileNotFoundError(f"no snapshot {snapshot_id.file_name} in {self.directory.path}")
        return data

    def delete_before(self, snapshot_id: SnapshotId) -> list[SnapshotId]:
        """Delete every snapshot older than ``snapshot_id``; the ids deleted."""
        old = [i for i in self.ids() if i < snapshot_id]
        for i in old:
            self.directory.delete(i.file_name)
        if old:
            self.directory.sync()
        return old

    def remove_leftovers(self) -> list[str]:
        """Delete partial, retired and temporary snapshot files (a crash's leftovers); their names."""
        names = [n for n in self.directory.list_names() if _LEFTOVER.fullmatch(n)]
        for n in names:
            self.directory.delete(n)
        return names
