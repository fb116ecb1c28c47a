"""The quorum's log on disk: :class:`~kafkalike.raft.log.RaftLog` over a kafkalike.log PartitionLog.

The directory is ``__cluster_metadata-0`` as Kafka lays it out: segments of v2 record batches, each
batch's ``partition_leader_epoch`` the epoch of the leader that wrote it (the leader-epoch
checkpoint beside them), ``partition.metadata`` with the metadata topic id, and snapshots as
``%020d-%010d.checkpoint`` (end offset, epoch), written aside and renamed into place.

Durability: appended bytes are *written*; they become durable when a flush's fsyncs have run.
The driver flushes off the event loop: ``prepare_flush`` (on the loop) collects the fsyncs,
``syncs.run()`` runs them on a worker thread, ``complete_flush`` (on the loop) then moves
``durable_end_offset``, unless the log was truncated meanwhile (the fsync may predate bytes written
after the cut). ``flush`` does all three at once, for tests and start-up.

Everything else runs on the calling thread: ``open`` (reads and fsyncs the directory), a segment
roll inside ``append`` (new files, rare: one per metadata.log.segment.bytes), a truncation (files cut
in place, as kafkalike.log does for a follower), and the snapshot calls the node makes
(``create_snapshot``, ``install_snapshot`` write and fsync the file; ``delete_before_snapshot``
unlinks segments). The trio driver (:mod:`kafkalike.server.quorum.driver`) therefore opens the log
on a worker thread and runs each step of the node, in which the node makes these calls, on one too.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from kafkalike.log.config import LogConfig
from kafkalike.log.errors import KafkaStorageError
from kafkalike.log.partition_log import FlushTicket, PartitionLog
from kafkalike.log.producer_state import AppendOrigin
from kafkalike.log.storage import IMMEDIATE, DeferredSyncs
from kafkalike.protocol.errors import ProtocolError
from kafkalike.protocol.records import batch_crc_ok, iter_batches, read_batch_header
from kafkalike.raft.log import LogBatch, OffsetAndEpoch, RaftLogError
from kafkalike.raft.messages import METADATA_TOPIC_ID

SNAPSHOT_SUFFIX = ".checkpoint"
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
# Kafka's metadata.log.segment.bytes and metadata.log.segment.ms defaults; the metadata log is
# never cut by retention (snapshots are its retention), and a batch may be as large as a fetch.
METADATA_LOG_CONFIG = LogConfig(
    segment_bytes=1024 * 1024 * 1024,
    segment_ms=7 * 24 * 60 * 60 * 1000,
    retention_ms=-1,
    retention_bytes=-1,
    max_message_bytes=8 * 1024 * 1024,
    # Reads here copy the bytes out (no file ranges handed to a socket), so a segment cut off the
    # log can go at once rather than after Kafka's 60 s.
    file_delete_delay_ms=0,
)


def snapshot_name(snapshot_id: OffsetAndEpoch) -> str:
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"


class PreparedFlush(NamedTuple):
    """A flush whose fsyncs (``syncs.run()``) are for a worker thread."""

    syncs: DeferredSyncs
    ticket: FlushTicket


class FileRaftLog:
    """A :class:`~kafkalike.raft.log.RaftLog` in a partition directory (see the module docstring)."""

    def __init__(self, log: PartitionLog, now_ms: int) -> None:
        self._log = log
        self._now_ms = now_ms
        self._serial = 0
        self._snapshots = self._snapshots_on_disk()

    @classmethod
    def open(
        cls, directory: str | os.PathLike[str], now_ms: int, config: LogConfig = METADATA_LOG_CONFIG
    ) -> FileRaftLog:
        """Open (creating) and recover the directory: a torn or corrupt tail is cut, and what is
        left is fsynced, so that all of it is durable. The log starts at the earliest snapshot
        when it reaches past the log's own start (the log before it was deleted, or a snapshot
        from the leader restarted it there)."""
        os.makedirs(directory, exist_ok=True)
        log = PartitionLog.open(directory, config, now_ms, METADATA_TOPIC_ID)
        raft_log = cls(log, now_ms)
        earliest, latest = raft_log.earliest_snapshot_id(), raft_log.latest_snapshot_id()
        if latest is not None and latest.offset > log.log_end_offset:
            log.truncate_fully_and_start_at(latest.offset, now_ms=now_ms)
        elif earliest is not None and earliest.offset > log.log_start_offset:
            raft_log._delete_before(earliest.offset)
        for segment in log.segments:
            segment.flush(IMMEDIATE)
        log.directory.sync()
        log.flush(now_ms)
        return raft_log

    @property
    def partition_log(self) -> PartitionLog:
        return self._log

    def advance_clock(self, now_ms: int) -> None:
        """The time the log's own bookkeeping (segment ages, delete delays) goes by."""
        self._now_ms = max(self._now_ms, now_ms)

    # -- offsets and epochs -------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def durable_end_offset(self) -> int:
        # What is below the log start was deleted (a snapshot covers it), so never counts as behind.
        return max(self.start_offset, min(self._log.recovery_point, self._log.log_end_offset))

    def _start_epoch(self) -> int:
        earliest = self.earliest_snapshot_id()
        return earliest.epoch if earliest is not None and earliest.offset == self.start_offset else 0

    def last_fetched_epoch(self) -> int:
        latest = self._log.epoch_cache.latest_epoch
        if latest is not None and self.end_offset > self.start_offset:
            return latest
        return self._start_epoch()

    def epoch_at(self, offset: int) -> int | None:
        if not self.start_offset <= offset < self.end_offset:
            return None
        epoch = self._log.epoch_for_offset(offset)
        return epoch if epoch >= 0 else None

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """As :meth:`MemoryRaftLog.end_offset_for_epoch`: the largest epoch at most ``epoch`` and
        where it ends; the snapshot at the log start when the log has no such epoch."""
        entries = [(e, o) for e, o in self._log.epoch_cache.entries() if o < self.end_offset]
        found = None
        for i, (entry_epoch, _) in enumerate(entries):
            if entry_epoch > epoch:
                break
            found = i
        if found is None:
            return OffsetAndEpoch(self.start_offset, self._start_epoch())
        next_start = entries[found + 1][1] if found + 1 < len(entries) else self.end_offset
        return OffsetAndEpoch(next_start, entries[found][0])

    def is_batch_end(self, offset: int) -> bool:
        if not self.start_offset < offset <= self.end_offset:
            return False
        data = self._log.read_bytes(offset - 1, 0)
        if not data:
            return False
        return read_batch_header(data, 0).last_offset == offset - 1

    # -- writing ----------------------------------------------------------------------------------

    def append(self, data: bytes) -> LogBatch:
        """Append the whole batches of ``data`` (a trailing partial one is left out), the first at
        the log end, each with its own leader epoch; returns the last. Checks every CRC first."""
        try:
            batches = list(iter_batches(data, partial_ok=True))
        except ProtocolError as exc:
            raise RaftLogError(f"records do not parse: {exc}") from exc
        if not batches:
            raise RaftLogError("append of no batches")
        expected, last_epoch = self.end_offset, self.last_fetched_epoch()
        for pos, header in batches:
            if not batch_crc_ok(data, pos, header):
                raise RaftLogError(f"batch at {header.base_offset} fails its CRC")
            if header.base_offset != expected:
                raise RaftLogError(f"batch at {header.base_offset} appended at log end {expected}")
            if header.partition_leader_epoch < last_epoch:
                raise RaftLogError(
                    f"batch epoch {header.partition_leader_epoch} below the log's last epoch {last_epoch}"
                )
            expected, last_epoch = header.last_offset + 1, header.partition_leader_epoch
        last: LogBatch | None = None
        for pos, header in batches:
            chunk = bytearray(data[pos : pos + header.size])
            # The base offset is already the log end and the epoch the batch's own: PartitionLog
            # writes both in place unchanged, so the CRC (which covers neither) still holds.
            self._log.append(
                chunk, leader_epoch=header.partition_leader_epoch, now_ms=self._now_ms, origin=AppendOrigin.REPLICATION
            )
            self._serial += 1
            last = LogBatch(
                header.base_offset, header.last_offset, header.partition_leader_epoch, bytes(chunk), self._serial
            )
        assert last is not None
        return last

    def truncate_to(self, offset: int) -> None:
        """Drop every batch from ``offset`` on (a batch boundary). The cut is made in the files at once."""
        if self._log.truncate_to(max(offset, self.start_offset), now_ms=self._now_ms):
            self._log.delete_due_files(self._now_ms)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset``, at least one, then up to ``max_bytes``."""
        if not self.start_offset <= offset < self.end_offset:
            return b""
        return self._log.read_bytes(offset, max_bytes)

    # -- flushing ---------------------------------------------------------------------------------

    def prepare_flush(self, offset: int | None = None) -> PreparedFlush:
        """Collect the fsyncs that make the log durable up to ``offset`` (default: its end)."""
        syncs = DeferredSyncs()
        return PreparedFlush(syncs, self._log.prepare_flush(syncs, offset))

    def complete_flush(self, prepared: PreparedFlush) -> None:
        """After ``prepared.syncs.run()`` returned: what it covered is durable (and if the log was
        cut since, nothing more than before)."""
        self._log.complete_flush(prepared.ticket, self._now_ms)

    def flush(self, offset: int) -> None:
        prepared = self.prepare_flush(offset)
        try:
            prepared.syncs.run()
        except OSError as exc:
            prepared.syncs.discard()
            raise self._log.storage_error("flush of", exc, self._now_ms) from exc
        self.complete_flush(prepared)

    # -- snapshots --------------------------------------------------------------------------------

    def _snapshots_on_disk(self) -> set[OffsetAndEpoch]:
        found = set()
        for name in self._log.directory.list_names():
            match = _SNAPSHOT_NAME.match(name)
            if match:
                found.add(OffsetAndEpoch(int(match[1]), int(match[2])))
        return found

    def snapshot_ids(self) -> list[OffsetAndEpoch]:
        return sorted(self._snapshots)

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return max(self._snapshots) if self._snapshots else None

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        return min(self._snapshots) if self._snapshots else None

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        if snapshot_id not in self._snapshots:
            return None
        return self._log.directory.read_document(snapshot_name(snapshot_id))

    def _write_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        try:
            self._log.directory.write_document(snapshot_name(snapshot_id), data, durable=True)
        except OSError as exc:
            raise KafkaStorageError(f"snapshot {snapshot_id} not written: {exc}") from exc
        self._snapshots.add(snapshot_id)

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Keep a snapshot the state machine wrote of the log before ``snapshot_id.offset``."""
        if not self.start_offset <= snapshot_id.offset <= self.durable_end_offset:
            raise RaftLogError(
                f"snapshot {snapshot_id} outside the durable log [{self.start_offset}, {self.durable_end_offset})"
            )
        self._write_snapshot(snapshot_id, data)

    def _delete_snapshots_before(self, snapshot_id: OffsetAndEpoch) -> None:
        for older in [s for s in self._snapshots if s < snapshot_id]:
            self._log.directory.delete(snapshot_name(older))
            self._snapshots.discard(older)

    def _delete_before(self, offset: int) -> None:
        self._log.high_watermark = self._log.log_end_offset  # the snapshot covers committed data
        self._log.delete_records_before(offset, now_ms=self._now_ms)
        self._log.delete_due_files(self._now_ms)

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Delete the log before a snapshot, and the older snapshots: it becomes the log start."""
        if snapshot_id not in self._snapshots or snapshot_id.offset <= self.start_offset:
            return
        self._delete_before(min(snapshot_id.offset, self.end_offset))
        self._delete_snapshots_before(snapshot_id)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> bool:
        """A snapshot downloaded from the leader; when it reaches past this log the log restarts
        at it, empty (Kafka's truncateToLatestSnapshot), and True is returned."""
        self._write_snapshot(snapshot_id, data)
        if snapshot_id.offset <= self.end_offset and snapshot_id.epoch <= self.last_fetched_epoch():
            return False
        self._log.truncate_fully_and_start_at(snapshot_id.offset, now_ms=self._now_ms)
        self._log.delete_due_files(self._now_ms)
        self._log.flush(self._now_ms)
        self._delete_snapshots_before(snapshot_id)
        return True

    def close(self) -> None:
        self._log.close()
