"""One partition's log (Kafka's UnifiedLog and LocalLog in one class).

On disk, ``<log.dir>/<topic>-<partition>/`` holds:

- segments ``%020d.log`` / ``.index`` / ``.timeindex`` named by base offset (see ``segment.py``), and
  ``.txnindex`` for a segment holding abort markers (see ``txn_index.py``);
- ``%020d.snapshot`` producer-state snapshots (see ``producer_state.py``), one per roll and one at close;
- ``leader-epoch-checkpoint`` (see ``epoch_cache.py``);
- ``partition.metadata``: ``version: 0`` and ``topic_id: <base64 uuid>``, so a directory left over
  from a deleted topic of the same name is never mistaken for the new one;
- transiently ``*.deleted`` segments waiting out ``file.delete.delay.ms``, and the
  ``*.log.cleaned`` / ``*.log.swap`` of a compaction being swapped in (``replace_segments``).

The log start offset, recovery point and high watermark live in the log dir's checkpoint files,
kept by ``LogManager``.
Nothing here is thread-safe: the broker calls one log from one task at a time. Time is always passed
in (``now_ms``), never read from a clock, so behaviour is reproducible.
"""

from __future__ import annotations

import logging
import os
import uuid
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import NamedTuple

from kafkalike.log.checkpoint import CheckpointError, format_partition_metadata, parse_partition_metadata
from kafkalike.log.config import LogConfig
from kafkalike.log.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from kafkalike.log.errors import (
    AppendLargerThanSegment,
    CorruptLogError,
    InconsistentTopicId,
    KafkaStorageError,
    LogClosed,
    OffsetOutOfRange,
    OffsetsOutOfOrder,
    RecordBatchTooLarge,
    UnexpectedAppendOffset,
)
from kafkalike.log.loader import CLEANED_SUFFIX, SWAP_SUFFIX, LoadedLog, load_log, load_producer_state, snapshot_offsets
from kafkalike.log.producer_state import (
    SNAPSHOT_SUFFIX,
    AppendOrigin,
    ControlMarker,
    PendingAppend,
    ProducerStateManager,
    parse_control_marker,
)
from kafkalike.log.retention import RetentionMixin
from kafkalike.log.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    LogSegment,
    PreparedRoll,
    keeps_index_files_open,
    parse_header,
    segment_name,
)
from kafkalike.log.storage import IMMEDIATE, DeferredSyncs, FileLogDirectory, LogDirectory, SegmentFile, Syncs
from kafkalike.log.storage_errors import describe, reporter
from kafkalike.log.txn_index import AbortedTxn, collect_aborted, retained_aborts
from kafkalike.protocol.errors import ProtocolError
from kafkalike.protocol.records import (
    BATCH_HEADER_SIZE,
    RecordBatchHeader,
    batch_crc_ok,
    decode_records,
    iter_batches,
    read_batch_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)

log = logging.getLogger("kafkalike.log")
PARTITION_METADATA = "partition.metadata"
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
_INT64_MIN = -(1 << 63)


class FlushTicket(NamedTuple):
    """What a prepared flush will have made durable once its syncs ran (``PartitionLog.prepare_flush``)."""

    target: int  # every offset below it
    dir_changes: int  # directory changes up to this count
    epoch_changes: int  # leader epoch checkpoint rewrites up to this count
    messages: int  # unflushed messages it covers (when ``whole``)
    whole: bool  # the target was the log end
    truncations: int  # the log's truncation count when prepared
    epoch_rewrite: int | None = None  # the epoch cache's modification count it writes the checkpoint of


class RollNeeded(Exception):
    """Raised by ``PartitionLog.append(defer_roll=True)`` (and ``append_as_follower``) before
    it changed anything: the append needs a new segment at ``base_offset`` first (the log end,
    or a follower's first offset past it: pass it to ``prepare_roll``)."""

    def __init__(self, base_offset: int) -> None:
        super().__init__(f"a new segment at offset {base_offset} is needed first")
        self.base_offset = base_offset


class AppendResult(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the batches were stamped with LogAppendTime
    log_start_offset: int
    duplicate: bool = False  # a retried idempotent batch: nothing was written, offsets are the original's
    flush: FlushTicket | None = None  # a flush whose syncs were deferred: see ``PartitionLog.complete_append``


class FileRange(NamedTuple):
    """``length`` bytes of whole batches at ``position`` in ``file`` (``os.sendfile`` when it has a fileno)."""

    file: SegmentFile
    position: int
    length: int

    @property
    def path(self) -> str | None:
        return self.file.path

    def read(self) -> bytes:
        return self.file.read(self.position, self.length)


class ReadResult(NamedTuple):
    ranges: list[FileRange]
    size: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    log_end_offset: int

    def read_all(self) -> bytes:
        return b"".join(r.read() for r in self.ranges)


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int


class SegmentSwap:
    """The disk steps of a compaction swap (``PartitionLog.replace_segments``), run between
    ``prepare_swap`` and ``complete_swap``, on a worker thread when there is a disk. It touches
    the new segment (no one else sees it yet) and the names of the old ones; their files stay
    open for reads meanwhile, and retention leaves the log alone until ``complete_swap``."""

    def __init__(
        self, log: PartitionLog, new: LogSegment, old: list[LogSegment], on_step: Callable[[str], None] | None
    ) -> None:
        self.log = log
        self.directory = log.directory
        self.new = new
        self.old = list(old)
        self._step = on_step or (lambda _name: None)
        self.ran = False

    def __bool__(self) -> bool:
        """Whether there is disk work (for a worker thread) in it."""
        return self.directory.on_disk

    def run(self) -> None:
        directory, new, step = self.directory, self.new, self._step
        base = new.base_offset
        retained = retained_aborts(new, self.old)  # before the old index files are renamed away
        swap = segment_name(base, LOG_SUFFIX + SWAP_SUFFIX)
        directory.rename(segment_name(base, LOG_SUFFIX + CLEANED_SUFFIX), swap, new.file)
        directory.sync()
        step("swap")
        for n, segment in enumerate(self.old):
            for suffix in SEGMENT_SUFFIXES:
                name = segment_name(segment.base_offset, suffix)
                if directory.exists(name):
                    # Only the name moves: the data file's descriptor serves reads meanwhile.
                    directory.rename(name, name + DELETED_SUFFIX, segment.file if suffix == LOG_SUFFIX else None)
            step(f"deleted-{n}")
        directory.sync()  # the old names must be gone for good before the swap loses its suffix
        directory.rename(swap, segment_name(base, LOG_SUFFIX), new.file)
        step("renamed")
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # fresh files: the old ones went with old[0]
            directory.delete(segment_name(base, suffix))
            directory.open_file(segment_name(base, suffix), create=True).close()
        new.txn_index.rewrite(retained)
        new.time_index.maybe_append(new.max_timestamp, new.offset_of_max_timestamp)
        new.flush()
        new.on_become_inactive()
        directory.sync()
        self.ran = True
        step("done")

    def discard(self) -> None:
        """Not run after all: retention may touch the log again."""
        self.log.swapping = False


class PartitionLog(RetentionMixin):
    """See the module docstring for the directory layout."""

    def __init__(
        self, directory: LogDirectory, config: LogConfig, loaded: LoadedLog, topic_id: uuid.UUID | None, now_ms: int
    ) -> None:
        self.directory = directory
        self.config = config
        self.topic_id = topic_id
        self.segments: list[LogSegment] = loaded.segments
        self._bases = [s.base_offset for s in self.segments]
        self.epoch_cache: LeaderEpochCache = loaded.epoch_cache
        self.producer_state: ProducerStateManager = loaded.producer_state
        self.recovered_segments = loaded.recovered_segments
        self.truncated_bytes = loaded.truncated_bytes
        self._log_start_offset = loaded.log_start_offset
        self._log_end_offset = self.segments[-1].next_offset
        # ``open`` sets it from the log dir's replication-offset-checkpoint; without one (the
        # metadata log, whose quorum keeps its own) it starts at the end.
        self._high_watermark = self._log_end_offset
        self.recovery_point = loaded.recovery_point
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        # Directory changes (new segment files) made / made durable: the next flush syncs the
        # directory while the first is ahead. Counters, so a sync on a worker thread that ran
        # while another file appeared does not count for that one.
        self._dir_changes = 0
        self._dir_changes_synced = 0
        self._truncations = 0  # a flush prepared before a truncation must not move the recovery point
        self._stop_cache: tuple[int, int, int] | None = None  # (offset, segment index, position)
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.roll_for_retention = False  # see ``apply_retention``
        self.swapping = False  # a compaction swap's disk steps are under way (``prepare_swap``)
        self._closed = False
        # Why writes are refused (an append that could not be undone), or None.
        self._offline: str | None = None
        # The log cleaner's first dirty offset (Kafka's cleaner-offset-checkpoint entry, which
        # LogManager loads and saves); None: never cleaned, everything from the log start is dirty.
        self.cleaner_checkpoint: int | None = None
        if keeps_index_files_open(config) and directory.on_disk:
            # Opened here (at start-up, or on the thread making the partition), not by a flush.
            self.active_segment.offset_index.open_file()
            self.active_segment.time_index.open_file()

    # ---- opening ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str] | LogDirectory,
        config: LogConfig,
        now_ms: int,
        topic_id: uuid.UUID | None = None,
        *,
        clean_shutdown: bool = False,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
        producer_state: ProducerStateManager | None = None,
        high_watermark: int | None = None,
    ) -> PartitionLog:
        """Open (creating if needed) and recover the partition directory.

        ``clean_shutdown``, ``recovery_point`` and ``log_start_offset`` come from the log dir's
        marker and checkpoints (``LogManager``); without them every segment is revalidated, which
        is always safe, just slower. ``high_watermark`` (the replication-offset-checkpoint's, or
        0 when it has none, as Kafka's Partition.createLog) is clamped to the recovered log;
        None starts it at the log end.
        """
        dir_ = directory if isinstance(directory, LogDirectory) else FileLogDirectory(directory)
        topic_id = _check_topic_id(dir_, topic_id)
        loaded = load_log(
            dir_,
            config,
            now_ms,
            clean_shutdown=clean_shutdown,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            producer_state=producer_state or ProducerStateManager(),
        )
        log = cls(dir_, config, loaded, topic_id, now_ms)
        if high_watermark is not None:
            log.high_watermark = high_watermark
        return log

    # ---- offsets ------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Clamped to [log start, log end], as Kafka's updateHighWatermark."""
        self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        """High watermark, held back to the first offset of the oldest open transaction."""
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is None:
            return self._high_watermark
        return min(first_unstable, self._high_watermark)

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # ---- appending ----------------------------------------------------------------------------

    def append(
        self,
        batches: bytearray | memoryview,
        *,
        leader_epoch: int,
        now_ms: int,
        log_append_time: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        syncs: Syncs = IMMEDIATE,
        defer_roll: bool = False,
        known_header: RecordBatchHeader | None = None,
    ) -> AppendResult:
        """Append validated v2 batches, assigning offsets in place; header work only, one write.

        ``known_header``: ``batches`` is that one batch alone, its header already read (by produce
        validation, from these bytes), so it is not parsed again; the log's own checks still run.

        Raises RecordBatchTooLarge (AppendLargerThanSegment past segment.bytes), CorruptLogError or a ProducerStateError subclass and then
        writes nothing. A retried idempotent batch comes back ``duplicate=True`` with its offsets.

        A disk error (any OSError: ENOSPC, EIO, EMFILE, EROFS...) raises KafkaStorageError and
        leaves the log as it was: a failed write of the data leaves nothing readable (see
        ``SegmentFile.append``), and an append whose flush (flush.messages / flush.ms) or
        transaction index entry failed is cut off again, as it was never acknowledged. So the
        next append succeeds once the cause is gone. Kafka instead takes the whole log dir
        offline on any IOException until a restart, and halts once no log dir is left
        (LogDirFailureChannel, LocalLog.maybeHandleIOException); with one log dir that would stop
        reads too, and a restart, for a full disk that often frees itself (retention, an
        operator). Only when the cut itself fails does this log refuse writes until a restart,
        whose recovery cuts it.

        A flush due by flush.messages / flush.ms runs at once, unless ``syncs`` is a
        ``DeferredSyncs``: then its fsyncs are left there and the result's ``flush`` is set; the
        caller runs them (off the event loop) and calls ``complete_append`` before it
        acknowledges the append.

        With ``defer_roll`` an append that needs a new segment raises RollNeeded instead,
        having changed nothing: the caller rolls (``prepare_roll``, the files made off the event
        loop, ``complete_roll``) and appends again.
        """
        self._ensure_open()
        if self._offline is not None:
            raise KafkaStorageError(f"{self.directory.path} refuses writes after a storage error: {self._offline}")
        buf = memoryview(batches)
        if buf.readonly:
            raise TypeError("append needs a writable buffer: offsets are assigned in place")
        buf = buf.cast("B")
        headers = self._walk(buf) if known_header is None else self._check_one(buf, known_header)
        use_log_append_time = log_append_time or self.config.log_append_time
        assigned: list[tuple[int, RecordBatchHeader]] = []
        next_offset = self._log_end_offset
        max_timestamp = _INT64_MIN  # below every batch's, so the first sets it
        messages = 0
        with_producer = False
        for pos, header in headers:
            set_base_offset(buf, pos, next_offset)
            set_partition_leader_epoch(buf, pos, leader_epoch)
            if use_log_append_time:
                set_log_append_time(buf, pos, header, now_ms)
                stamped = read_batch_header(buf, pos)
            else:
                # Only the two fields just written changed (neither is under the CRC).
                stamped = RecordBatchHeader(next_offset, header[1], leader_epoch, *header[3:])
            assigned.append((pos, stamped))
            next_offset = stamped.base_offset + stamped.last_offset_delta + 1
            if stamped.max_timestamp > max_timestamp:
                max_timestamp = stamped.max_timestamp
            messages += stamped.records_count
            with_producer = with_producer or stamped.producer_id >= 0
        # Batches without a producer id neither change nor meet producer state: nothing to prepare.
        pending: PendingAppend | None = None
        if with_producer:
            markers: list[tuple[RecordBatchHeader, ControlMarker | None]] = [
                (h, parse_control_marker(buf, pos, h) if h.is_control and h.producer_id >= 0 else None)
                for pos, h in assigned
            ]
            pending = self.producer_state.prepare(markers, origin)
            if pending.duplicate is not None:
                dup = pending.duplicate
                return AppendResult(dup.first_offset, dup.last_offset, -1, self._log_start_offset, duplicate=True)
        latest = self.epoch_cache.latest_epoch
        new_epoch = leader_epoch >= 0 and (latest is None or leader_epoch > latest)
        return self._write(
            buf,
            assigned,
            pending,
            max_timestamp,
            messages,
            ((leader_epoch, assigned[0][1].base_offset),) if new_epoch else (),
            now_ms if use_log_append_time else -1,
            now_ms,
            syncs,
            defer_roll,
        )

    def append_as_follower(
        self,
        batches: bytes | bytearray | memoryview,
        *,
        now_ms: int,
        syncs: Syncs = IMMEDIATE,
        defer_roll: bool = False,
    ) -> AppendResult:
        """Append batches as a leader's Fetch response carried them (Kafka's appendAsFollower):
        their offsets and partition leader epochs are the leader's and stay as they are.

        A batch cut off at the end (the fetch reached its size limit) is left out, and an empty
        buffer, or one holding only such a piece, appends nothing: the result then has
        ``last_offset + 1 == first_offset ==`` the log end. Otherwise each batch is checked as
        Kafka checks a follower's (per batch: the header, magic 2, the CRC; no record is
        decoded and max.message.bytes does not apply, the leader took them): offsets must rise
        from batch to batch (OffsetsOutOfOrder; gaps are fine, a compacted leader has them) and
        the first must be at or past the log end (UnexpectedAppendOffset); the whole append
        must fit segment.bytes (AppendLargerThanSegment). Then nothing was written.

        Each batch whose leader epoch differs from the epoch cache's latest starts that epoch
        at its base offset (Kafka's maybeAssignEpochStartOffset); producer state is updated as
        REPLICATION (epochs and transactions, no sequence checks), markers completing
        transactions and aborts entering the transaction index as on the leader. Rolls,
        flushes, ``syncs``, ``defer_roll`` (RollNeeded) and disk errors are as in ``append``.
        The high watermark does not move: the leader's, sent with the fetch, is the caller's
        to set.
        """
        self._ensure_open()
        if self._offline is not None:
            raise KafkaStorageError(f"{self.directory.path} refuses writes after a storage error: {self._offline}")
        buf = memoryview(batches).cast("B")
        headers, valid_bytes = self._walk_fetched(buf)
        if not headers:
            end = self._log_end_offset
            return AppendResult(end, end - 1, -1, self._log_start_offset)
        buf = buf[:valid_bytes]
        first_offset = headers[0][1].base_offset
        if first_offset < self._log_end_offset:
            raise UnexpectedAppendOffset(
                f"append to {self.directory.path} at offset {first_offset}, below the log end "
                f"{self._log_end_offset} (log start {self._log_start_offset})",
                first_offset,
                headers[-1][1].last_offset,
            )
        if valid_bytes > self.config.segment_bytes:
            raise AppendLargerThanSegment(
                f"append of {valid_bytes} bytes exceeds segment.bytes {self.config.segment_bytes}"
            )
        max_timestamp = _INT64_MIN
        messages = 0
        with_producer = False
        epoch_starts: list[tuple[int, int]] = []
        latest = self.epoch_cache.latest_epoch
        for _, header in headers:
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
            messages += header.records_count
            with_producer = with_producer or header.producer_id >= 0
            epoch = header.partition_leader_epoch
            if epoch >= 0 and epoch != latest:  # a same-epoch batch never starts an entry
                epoch_starts.append((epoch, header.base_offset))
                latest = epoch
        pending: PendingAppend | None = None
        if with_producer:
            markers: list[tuple[RecordBatchHeader, ControlMarker | None]] = [
                (h, parse_control_marker(buf, pos, h) if h.is_control and h.producer_id >= 0 else None)
                for pos, h in headers
            ]
            pending = self.producer_state.prepare(markers, AppendOrigin.REPLICATION)
        return self._write(buf, headers, pending, max_timestamp, messages, epoch_starts, -1, now_ms, syncs, defer_roll)

    def _walk_fetched(self, buf: memoryview) -> tuple[list[tuple[int, RecordBatchHeader]], int]:
        """The whole batches of a fetched buffer and the bytes they take (a cut-off last batch
        is not one), each batch checked as ``append_as_follower`` says."""
        headers: list[tuple[int, RecordBatchHeader]] = []
        previous_last = -1
        try:
            for pos, header in iter_batches(buf, partial_ok=True):
                if header.last_offset_delta < 0:
                    raise CorruptLogError(f"batch at byte {pos} has a negative last offset delta")
                if not batch_crc_ok(buf, pos, header):
                    raise CorruptLogError(
                        f"batch at offset {header.base_offset} is corrupt (stored crc {header.crc:#010x} does not match)"
                    )
                if header.base_offset <= previous_last:
                    raise OffsetsOutOfOrder(
                        f"batch at offset {header.base_offset} follows one ending at offset {previous_last}"
                    )
                previous_last = header.base_offset + header.last_offset_delta
                headers.append((pos, header))
        except ProtocolError as exc:
            raise CorruptLogError(f"fetched batches after {len(headers)} whole ones: {exc}") from exc
        if not headers:
            return headers, 0
        pos, last = headers[-1]
        return headers, pos + last.size

    def _write(
        self,
        buf: memoryview,
        batches: list[tuple[int, RecordBatchHeader]],
        pending: PendingAppend | None,
        max_timestamp: int,
        messages: int,
        epoch_starts: Sequence[tuple[int, int]],
        log_append_time_ms: int,
        now_ms: int,
        syncs: Syncs,
        defer_roll: bool,
    ) -> AppendResult:
        """The part of an append after its batches were checked and their offsets set (the
        leader's, assigned here; a follower's, as fetched): the roll, the epoch cache
        (``epoch_starts``: the (epoch, start offset) entries the append begins), the write, the
        producer state and transaction index, the flush due."""
        first_offset = batches[0][1].base_offset
        next_offset = batches[-1][1].last_offset + 1
        last_offset = next_offset - 1
        try:
            # Everything that may fail before a byte of the batches is in the log: a failure
            # here leaves the log as it was (a roll that failed half-way is tried again).
            segment = self.active_segment
            if segment.should_roll(len(buf), max_timestamp, last_offset, self.config, now_ms):
                if defer_roll:
                    raise RollNeeded(first_offset)
                segment = self.roll(now_ms, first_offset)
            try:
                for epoch, start_offset in epoch_starts:
                    # Before the data, as Kafka's append; with deferred syncs written by the next
                    # flush (off the loop), which comes before any of the data counts as flushed.
                    self.epoch_cache.assign(epoch, start_offset, defer=self._defers(syncs))
                segment.append(buf, batches, now_ms)
            except OSError:
                # Entries no data follows: what comes next may be another leader's, of an older
                # epoch, which Kafka's assign would let wipe out the entries before them.
                if epoch_starts:
                    self.epoch_cache.truncate_from_end(self._log_end_offset)
                raise
        except OSError as exc:
            raise self._storage_error("append to", exc, now_ms) from exc
        self._log_end_offset = next_offset
        self._unflushed_messages += messages
        result = AppendResult(first_offset, last_offset, log_append_time_ms, self._log_start_offset)
        if pending is not None:
            self.producer_state.commit(pending)
            try:
                self._index_aborted(pending, segment)
            except OSError as exc:
                # A marker without its index entry would show aborted records as committed.
                self._undo_append(result, now_ms, exc)
                raise self._storage_error("transaction index append in", exc, now_ms) from exc
        interval = self.config.flush_interval_ms
        if self._unflushed_messages >= self.config.flush_interval_messages or (
            interval is not None and now_ms - self._last_flush_ms >= interval
        ):
            try:
                ticket = self.prepare_flush(syncs)
            except OSError as exc:
                # Not known to be on disk, so not acknowledged: take the batches out again.
                if isinstance(syncs, DeferredSyncs):
                    syncs.discard()
                self._undo_append(result, now_ms, exc)
                raise self._storage_error("flush of", exc, now_ms) from exc
            if not isinstance(syncs, DeferredSyncs):
                self.complete_flush(ticket, now_ms)
            else:
                result = result._replace(flush=ticket)
        return result

    def append_durably(
        self, batches: bytearray, *, leader_epoch: int, now_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> AppendResult:
        """``append``, then flush, here and now (coordinator and metadata records, which are
        answered only once durable); a failed flush cuts the append off again and raises
        KafkaStorageError, so the log never holds what its writer was told failed."""
        syncs = DeferredSyncs()
        result = self.append(batches, leader_epoch=leader_epoch, now_ms=now_ms, origin=origin, syncs=syncs)
        error: OSError | None = None
        try:
            result = result._replace(flush=result.flush or self.prepare_flush(syncs))
            syncs.run()
        except OSError as exc:
            syncs.discard()
            error = exc
        self.complete_append(result, error, now_ms)
        return result

    def complete_append(self, result: AppendResult, error: OSError | None, now_ms: int) -> None:
        """After the syncs an append left to ``DeferredSyncs`` (its ``flush``) ran: the flush
        completed, or, when they (or a flush of its own the caller made) failed, the append cut
        off again and KafkaStorageError raised (it must not be acknowledged). The caller lets no other append in meanwhile, else the
        cut would take that one too: then the log refuses writes instead."""
        if self._closed:
            return
        if error is None:
            if result.flush is not None:
                self.complete_flush(result.flush, now_ms)
            return
        if self._log_end_offset == result.last_offset + 1:
            self._undo_append(result, now_ms, error)
        else:
            self._go_offline(result.first_offset, f"{describe(error)}, with later appends in the way of undoing it")
        raise self._storage_error("flush of", error, now_ms) from error

    def _defers(self, syncs: Syncs) -> bool:
        """Whether ``syncs`` takes this log's file work to a worker thread."""
        return isinstance(syncs, DeferredSyncs) and self.directory.on_disk

    def storage_error(self, operation: str, exc: OSError, now_ms: int) -> KafkaStorageError:
        """The error a caller raises for a disk failure of this log's (reported once a minute)."""
        return self._storage_error(operation, exc, now_ms)

    def _storage_error(self, operation: str, exc: OSError, now_ms: int) -> KafkaStorageError:
        reporter.report(operation, self.directory.path, exc, now_ms)
        return KafkaStorageError(f"{operation} {self.directory.path} failed: {describe(exc)}")

    def _undo_append(self, result: AppendResult, now_ms: int, cause: OSError) -> None:
        """Cut an append that reached the segment but could not be completed; if even that fails
        the log refuses writes until the broker restarts and recovery cuts it (Kafka's log-dir
        failure, for this one partition)."""
        try:
            self.truncate_to(result.first_offset, now_ms=now_ms)
        except OSError as exc:
            self._go_offline(result.first_offset, f"{describe(cause)}, then {describe(exc)} while undoing it")

    def _go_offline(self, offset: int, reason: str) -> None:
        self._offline = reason
        log.error(
            "storage error: %s refuses writes until the broker restarts: an append at offset %d could not be "
            "undone (%s)",
            self.directory.path,
            offset,
            reason,
        )

    def _index_aborted(self, pending: PendingAppend, segment: LogSegment) -> None:
        """A transaction index entry for each transaction this append aborted (Kafka's
        updateTxnIndex), with the last stable offset once its marker is in."""
        for txn in pending.completed:
            if txn.is_aborted:
                first_unstable = self.producer_state.first_unstable_offset()
                lso = txn.last_offset + 1 if first_unstable is None else first_unstable
                segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))

    def _check_one(self, buf: memoryview, header: RecordBatchHeader) -> list[tuple[int, RecordBatchHeader]]:
        """``_walk``'s checks for a buffer holding the one batch ``header`` describes."""
        if header.size != len(buf):
            raise CorruptLogError(f"append of {len(buf)} bytes given the header of a batch of {header.size}")
        if header.size > self.config.max_message_bytes:
            raise RecordBatchTooLarge(
                f"batch of {header.size} bytes exceeds max.message.bytes {self.config.max_message_bytes}"
            )
        if header.last_offset_delta < 0:
            raise CorruptLogError("batch at byte 0 has a negative last offset delta")
        if len(buf) > self.config.segment_bytes:
            raise AppendLargerThanSegment(
                f"append of {len(buf)} bytes exceeds segment.bytes {self.config.segment_bytes}"
            )
        return [(0, header)]

    def _walk(self, buf: memoryview) -> list[tuple[int, RecordBatchHeader]]:
        headers: list[tuple[int, RecordBatchHeader]] = []
        pos = 0
        while pos < len(buf):
            try:
                header = read_batch_header(buf, pos)
            except ProtocolError as exc:
                raise CorruptLogError(f"batch at byte {pos}: {exc}") from exc
            if header.size > self.config.max_message_bytes:
                raise RecordBatchTooLarge(
                    f"batch of {header.size} bytes exceeds max.message.bytes {self.config.max_message_bytes}"
                )
            if header.last_offset_delta < 0:
                raise CorruptLogError(f"batch at byte {pos} has a negative last offset delta")
            headers.append((pos, header))
            pos += header.size
        if not headers:
            raise CorruptLogError("append with no record batches")
        # After the per-batch checks, as Kafka's UnifiedLog.append orders them.
        if len(buf) > self.config.segment_bytes:
            raise AppendLargerThanSegment(
                f"append of {len(buf)} bytes exceeds segment.bytes {self.config.segment_bytes}"
            )
        return headers

    def roll(self, now_ms: int, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset, or at ``base_offset`` past it (a
        no-op on an empty active segment there)."""
        prepared = self.prepare_roll(base_offset)
        if prepared is None:
            return self.active_segment
        prepared.create()
        segment = self.complete_roll(prepared, now_ms)
        assert segment is not None  # nothing ran in between
        return segment

    def prepare_roll(self, base_offset: int | None = None) -> PreparedRoll | None:
        """The first third of ``roll``: what its disk work needs (``PreparedRoll.create``, which
        may run on a worker thread), or None when the active segment is empty where the new
        one would start.

        ``base_offset`` past the log end (a follower's append beyond a gap, ``RollNeeded``'s
        offset) starts the new segment there, as Kafka's maybeRoll rolls at the append's first
        offset: a gap of more than 2^31 offsets cannot fit one segment's relative offsets.

        The snapshot is the producer state at the roll offset; at a roll not durable, so the
        append waits for no fsync (Kafka flushes that snapshot in the background too): a torn
        one fails its CRC at load and is dropped."""
        self._ensure_open()
        active = self.active_segment
        base = self._log_end_offset if base_offset is None else max(base_offset, self._log_end_offset)
        if active.size == 0 and active.base_offset == base:
            return None
        old_indexes = [
            "" if index.file_open else segment_name(active.base_offset, suffix)
            for index, suffix in ((active.offset_index, INDEX_SUFFIX), (active.time_index, TIME_INDEX_SUFFIX))
        ]
        return PreparedRoll(
            self.directory,
            base,  # no batch between the log end and it: the producer state is the same there
            self.producer_state.snapshot_bytes(),
            old_indexes,
            keeps_index_files_open(self.config),
            log_end_offset=self._log_end_offset,
        )

    def complete_roll(self, prepared: PreparedRoll, now_ms: int) -> LogSegment | None:
        """The last third of ``roll``, once ``prepared.create`` succeeded: the new segment
        becomes the active one. None when the log moved on meanwhile (closed, an append or a
        roll of its own at the log end): then ``prepared.discard()`` is the caller's to run."""
        base = prepared.base_offset
        moved_on = self._log_end_offset != prepared.log_end_offset
        if self._closed or moved_on or prepared.files is None or self._bases[-1] == base:
            prepared.remove_on_discard = not self._closed and base not in self._bases
            return None
        active = self.active_segment
        offset_file, time_file = prepared.old_index_files
        prepared.old_index_files = []
        if offset_file is not None:
            active.offset_index.adopt_file(offset_file)
        if time_file is not None:
            active.time_index.adopt_file(time_file)
        try:
            active.on_become_inactive()  # its last index entries go into the files opened for it
        except OSError:
            # The roll is tried again from scratch (its files made anew). Its files go too: an
            # append may go on into the active segment meanwhile, and an empty segment left at
            # ``base`` would put the log end back there at the next start-up.
            prepared.remove_on_discard = base not in self._bases
            prepared.discard()
            raise
        segment = LogSegment.from_files(self.directory, base, self.config, prepared.files, now_ms)
        prepared.files = None
        self.segments.append(segment)
        self._bases.append(base)
        self._dir_changes += 1  # the next flush syncs the directory, making the new names durable
        return segment

    def replace_segments(
        self, new: LogSegment, old: list[LogSegment], now_ms: int, on_step: Callable[[str], None] | None = None
    ) -> None:
        """Swap a compacted segment in for the consecutive segments ``old`` it was cleaned from.

        ``new`` has ``old[0]``'s base offset and was written and flushed as ``%020d.log.cleaned``.
        The steps are Kafka's replaceSegments, so a crash at any point leaves either the old
        segments or the new one once the loader has run: ``.cleaned`` -> ``.swap`` ("swap"; from
        here the loader finishes the swap), each old segment -> ``.deleted`` ("deleted-<n>"),
        ``.swap`` -> ``.log`` ("renamed"), and the index files last ("done"; a missing one is
        rebuilt). ``on_step(name)`` runs after each step, for fault-injection tests.

        In three parts, so the broker can run the disk steps on a worker thread: ``prepare_swap``
        (here), ``SegmentSwap.run`` (anywhere), ``complete_swap`` (here: the segment list).
        """
        swap = self.prepare_swap(new, old, on_step)
        swap.run()
        self.complete_swap(swap, now_ms)

    def prepare_swap(
        self, new: LogSegment, old: list[LogSegment], on_step: Callable[[str], None] | None = None
    ) -> SegmentSwap:
        """Check the swap and hold retention off ``old`` until ``complete_swap``."""
        self._ensure_open()
        first = self.segments.index(old[0])
        if self.segments[first : first + len(old)] != old or new.base_offset != old[0].base_offset:
            raise ValueError("replace_segments needs consecutive live segments starting at the new one's base")
        self.swapping = True
        return SegmentSwap(self, new, old, on_step)

    def complete_swap(self, swap: SegmentSwap, now_ms: int) -> None:
        """After ``swap.run()`` (or its failure: then the log stays as it is, and the loader sorts
        out the files at the next start): the new segment replaces the old ones in the list."""
        self.swapping = False
        if self._closed or not swap.ran:
            return
        old, new = swap.old, swap.new
        first = self.segments.index(old[0]) if old[0] in self.segments else -1
        if first < 0 or self.segments[first : first + len(old)] != old:
            log.warning("%s: the segments a compaction swapped out changed meanwhile", self.directory.path)
            return
        for segment in old:
            segment.mark_deleted(renamed=True)
            self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, segment))
        self.segments[first : first + len(old)] = [new]
        self._bases[first : first + len(old)] = [new.base_offset]
        self._stop_cache = None

    def _take_snapshot(self, offset: int) -> None:
        """Durably (at close; a roll's is written by ``PreparedRoll.create``)."""
        name = segment_name(offset, SNAPSHOT_SUFFIX)
        self.directory.write_document(name, self.producer_state.snapshot_bytes())

    # ---- flushing -----------------------------------------------------------------------------

    def flush(self, now_ms: int | None = None, up_to_offset: int | None = None) -> None:
        """fsync every segment holding data below ``up_to_offset`` (default: the log end)."""
        self.complete_flush(self.prepare_flush(IMMEDIATE, up_to_offset), now_ms)

    def prepare_flush(self, syncs: Syncs, up_to_offset: int | None = None) -> FlushTicket:
        """The first half of ``flush``: hand every fsync it needs to ``syncs`` (pending index
        entries are written here, on the caller's thread). Once they ran, ``complete_flush``
        moves the recovery point; if they failed, nothing is to be done (the data stays
        unflushed and a later flush tries again)."""
        self._ensure_open()
        target = self._log_end_offset if up_to_offset is None else min(up_to_offset, self._log_end_offset)
        epochs = self.epoch_cache
        epoch_rewrite: int | None = None
        if epochs.unwritten and self._defers(syncs):
            # Written whole and durably on the worker thread; ``complete_flush`` records it.
            syncs.write_document(self.directory, LEADER_EPOCH_CHECKPOINT, epochs.checkpoint_bytes())
            epoch_rewrite = epochs.modifications
        else:
            epochs.write_if_behind()
        epochs_behind = epochs.changes > epochs.synced_changes
        directory_behind = epochs_behind or self._dir_changes > self._dir_changes_synced
        if target > self.recovery_point or directory_behind:
            for segment in self.segments[self._segment_index(self.recovery_point) :]:
                if segment.base_offset >= target:
                    break
                segment.flush(syncs)
            if epochs_behind:
                syncs.document(self.directory, LEADER_EPOCH_CHECKPOINT)
            if directory_behind:
                syncs.directory(self.directory)
        whole = target == self._log_end_offset
        return FlushTicket(
            target,
            self._dir_changes,
            epochs.changes,
            self._unflushed_messages if whole else 0,
            whole,
            self._truncations,
            epoch_rewrite,
        )

    def complete_flush(self, ticket: FlushTicket, now_ms: int | None) -> None:
        """The second half of ``flush``, after its syncs ran: appends made meanwhile stay unflushed."""
        if self._closed:
            return
        self._dir_changes_synced = max(self._dir_changes_synced, ticket.dir_changes)
        self.epoch_cache.synced_changes = max(self.epoch_cache.synced_changes, ticket.epoch_changes)
        if ticket.epoch_rewrite is not None:
            self.epoch_cache.written_durably(ticket.epoch_rewrite)
        if ticket.truncations != self._truncations:
            return  # the log was cut since: offsets below the target may hold bytes written after the sync
        self.recovery_point = max(self.recovery_point, min(ticket.target, self._log_end_offset))
        if ticket.whole:
            self._unflushed_messages = max(self._unflushed_messages - ticket.messages, 0)
            if now_ms is not None:
                self._last_flush_ms = now_ms

    def due_flush(self, now_ms: int) -> int | None:
        """The periodic part of flushing: the offset to flush up to now (flush.ms, or the
        segments left behind by a roll), or None.

        Kafka flushes rolled segments in the background too; here the broker's periodic task
        asks this (through ``LogManager.prepare_due_flushes``), so an append never waits for a
        whole segment to reach the disk.
        """
        interval = self.config.flush_interval_ms
        if interval is not None and self._unflushed_messages and now_ms - self._last_flush_ms >= interval:
            return self._log_end_offset
        if self.recovery_point < self.active_segment.base_offset:
            return self.active_segment.base_offset
        return None

    def maybe_flush(self, now_ms: int) -> None:
        """``due_flush``, done at once."""
        target = self.due_flush(now_ms)
        if target is not None:
            self.flush(now_ms, up_to_offset=target)

    # ---- reading ------------------------------------------------------------------------------

    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """File ranges of whole batches from the one holding ``offset``, at most ``max_bytes``
        (the first batch whole regardless when ``min_one_batch``), never reaching ``max_offset``'s
        batch (pass the high watermark or last stable offset for consumers)."""
        self._ensure_open()
        if offset < self._log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRange(offset, self._log_start_offset, self._log_end_offset)
        limit = self._log_end_offset if max_offset is None else max(min(max_offset, self._log_end_offset), 0)
        ranges: list[FileRange] = []
        total = 0
        if offset < limit and (max_bytes > 0 or min_one_batch):
            stop_index, stop_position = self._stop_position(limit)
            budget, min_one = max(max_bytes, 0), min_one_batch
            for i in range(self._segment_index(offset), stop_index + 1):
                segment = self.segments[i]
                segment_limit = stop_position if i == stop_index else segment.size
                found = segment.read(max(offset, segment.base_offset), budget, segment_limit, min_one)
                if found is None:
                    continue
                position, length = found
                if length == 0:
                    break
                ranges.append(FileRange(segment.file, position, length))
                total += length
                budget -= length
                min_one = False
                if position + length < segment_limit or budget <= 0:
                    break
        return ReadResult(
            ranges, total, self._log_start_offset, self._high_watermark, self.last_stable_offset, self._log_end_offset
        )

    def read_bytes(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> bytes:
        return self.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch).read_all()

    def _stop_position(self, limit_offset: int) -> tuple[int, int]:
        """(segment index, byte position) a read must stop before so no batch reaches ``limit_offset``.

        Cached per offset: consumers read up to the high watermark over and over.
        """
        if limit_offset >= self._log_end_offset:
            return len(self.segments) - 1, self.active_segment.size
        cached = self._stop_cache
        if cached is not None and cached[0] == limit_offset:
            return cached[1], cached[2]
        index = self._segment_index(limit_offset)
        found = self.segments[index].translate_offset(limit_offset)
        position = found[0] if found is not None else self.segments[index].size
        self._stop_cache = (limit_offset, index, position)
        return index, position

    # ---- lookups ------------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """ListOffsets: the first record with timestamp >= ``timestamp`` (exact: that one batch is
        decoded), or the special targets -2 earliest, -1 latest, -3 max timestamp."""
        self._ensure_open()
        if timestamp == EARLIEST_TIMESTAMP:
            return OffsetAndTimestamp(self._log_start_offset, -1)
        if timestamp == LATEST_TIMESTAMP:
            return OffsetAndTimestamp(self._log_end_offset, -1)
        if timestamp == MAX_TIMESTAMP:
            found = self.max_timestamp()
            return None if found is None else OffsetAndTimestamp(found.offset, found.timestamp)
        for segment in self.segments:
            if segment.max_timestamp < timestamp or segment.next_offset <= self._log_start_offset:
                continue
            hit = segment.find_by_timestamp(timestamp, self._log_start_offset)
            while hit is not None and hit[1].records_count == 0:  # emptied by compaction: look further
                hit = segment.find_by_timestamp(timestamp, hit[1].last_offset + 1)
            if hit is not None:
                return self._exact_record(segment, hit[0], hit[1], lambda ts: ts >= timestamp)
        return None

    def max_timestamp(self) -> TimestampAndOffset | None:
        """(largest timestamp, offset of the first record carrying it), or None without timestamps."""
        self._ensure_open()
        best = max(self.segments, key=lambda s: s.max_timestamp)
        if best.max_timestamp < 0:
            return None
        hit = best.translate_offset(best.offset_of_max_timestamp)
        if hit is None:
            return TimestampAndOffset(best.max_timestamp, best.offset_of_max_timestamp)
        target = best.max_timestamp
        found = self._exact_record(best, hit[0], hit[1], lambda ts: ts >= target)
        return TimestampAndOffset(found.timestamp, found.offset)

    def _exact_record(
        self, segment: LogSegment, position: int, header: RecordBatchHeader, match: Callable[[int], bool]
    ) -> OffsetAndTimestamp:
        """Decode one batch to find the first matching record at/after the log start offset; if the
        batch does not decode, answer with the batch itself (its first live offset, max timestamp)."""
        data = segment.file.read(position, header.size)
        try:
            for record in decode_records(data, 0, header):
                offset, ts = record.offset(header), record.timestamp(header)
                if offset >= self._log_start_offset and match(ts):
                    return OffsetAndTimestamp(offset, ts)
        except ProtocolError:
            pass
        return OffsetAndTimestamp(max(header.base_offset, self._log_start_offset), header.max_timestamp)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start_offset, upper_bound_offset)``, from the
        transaction indexes of the segment holding ``start_offset`` and the ones after it,
        until an entry shows nothing later can overlap (Kafka's collectAbortedTransactions)."""
        self._ensure_open()
        return collect_aborted(self.segments[self._segment_index(start_offset) :], start_offset, upper_bound_offset)

    def aborted_transactions(self, fetch_offset: int, result: ReadResult) -> list[AbortedTxn]:
        """What a read_committed fetch of ``result`` (read from ``fetch_offset``) must report:
        the aborted transactions overlapping the batches it returns."""
        if not result.ranges:
            return []
        return self.collect_aborted_transactions(fetch_offset, self._offset_after(result.ranges[-1]))

    def _offset_after(self, last: FileRange) -> int:
        """The first offset after the batches a range ends with: the next batch's base offset,
        else the next segment's base, else the log end (Kafka's fetchUpperBoundOffset)."""
        end = last.position + last.length
        for i in range(len(self.segments) - 1, -1, -1):
            segment = self.segments[i]
            if segment.file is not last.file:
                continue
            if end < segment.size:
                header = parse_header(segment.file.read(end, BATCH_HEADER_SIZE), 0)
                if header is not None:
                    return header.base_offset
            return self.segments[i + 1].base_offset if i + 1 < len(self.segments) else self._log_end_offset
        return self._log_end_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch the record at ``offset`` was written in (ListOffsets' leader_epoch)."""
        return self.epoch_cache.epoch_for_offset(offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= ``epoch``, its end offset), or (-1, -1)."""
        self._ensure_open()
        return self.epoch_cache.end_offset_for(epoch, self._log_end_offset)

    # ---- truncation -----------------------------------------------------------------------------

    def truncate_to(self, offset: int, *, now_ms: int) -> bool:
        """Remove everything at or after ``offset`` (the whole batch holding it); False if nothing to do.

        As Kafka's truncateTo: the epoch cache loses the epochs starting at or after the new log
        end, producer state is rebuilt from the latest snapshot at or below it, the high
        watermark is clamped to it. An ``offset`` inside a batch takes that whole batch, as
        Kafka's LocalLog.truncateTo cuts the same bytes; Kafka then puts the log end at
        ``offset`` itself, past the last batch (a restart puts it back at the batch's end),
        while here the log end is the end of the last batch left, the cut batch's base offset,
        so a follower fetching from the log end gets that batch again and appends it. Replication
        truncates at batch boundaries (epoch end offsets, high watermarks), where the two agree.
        """
        self._ensure_open()
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._log_end_offset:
            return False
        if offset <= self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, now_ms=now_ms)
            return True
        index = self._segment_index(offset)
        doomed = self.segments[index + 1 :]
        del self.segments[index + 1 :]
        del self._bases[index + 1 :]
        for segment in doomed:
            self._schedule_delete(segment, now_ms)
        self.segments[index].truncate_to(offset, now_ms)
        self._after_truncation(now_ms)
        return True

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int) -> None:
        """Drop every segment and restart the log, empty, at ``offset``, the high watermark there
        too (Kafka's truncateFullyAndStartAt: a follower restarting at its leader's log start)."""
        self._ensure_open()
        for segment in self.segments:
            self._schedule_delete(segment, now_ms)
        segment = LogSegment.create(self.directory, offset, self.config, now_ms)
        self.segments, self._bases = [segment], [offset]
        self._dir_changes += 1
        self._log_start_offset = offset
        self.epoch_cache.clear()
        for snapshot in snapshot_offsets(self.directory):
            self.directory.delete(segment_name(snapshot, SNAPSHOT_SUFFIX))  # they describe the old log
        self._after_truncation(now_ms)
        self._high_watermark = self._log_end_offset

    def _after_truncation(self, now_ms: int) -> None:
        self._truncations += 1
        self._log_end_offset = self.active_segment.next_offset
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self._high_watermark = min(self._high_watermark, self._log_end_offset)
        self.recovery_point = min(self.recovery_point, self._log_end_offset)
        if self.cleaner_checkpoint is not None:  # Kafka's maybeTruncateCheckpoint
            self.cleaner_checkpoint = min(self.cleaner_checkpoint, self._log_end_offset)
        self._stop_cache = None
        self.epoch_cache.truncate_from_end(self._log_end_offset)
        for offset in snapshot_offsets(self.directory):
            if offset > self._log_end_offset:
                self.directory.delete(segment_name(offset, SNAPSHOT_SUFFIX))
        self._reload_producer_state(now_ms)

    def _reload_producer_state(self, now_ms: int) -> None:
        loaded = LoadedLog(
            self.segments, self._log_start_offset, self.recovery_point, self.epoch_cache, self.producer_state
        )
        load_producer_state(loaded, self.directory, self.config, now_ms)

    # ---- lifecycle ------------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise LogClosed(f"log {self.directory.path} is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def offline(self) -> str | None:
        """Why the log refuses writes (an append that could not be undone), or None."""
        return self._offline

    def close(self) -> None:
        """Flush everything, snapshot producer state at the log end, release every file."""
        if self._closed:
            return
        self.flush()
        self._take_snapshot(self._log_end_offset)
        for segment in self.segments:
            segment.close()
        for _, segment in self._pending_deletes:
            segment.delete_files()
        self._pending_deletes.clear()
        self._closed = True

    def release(self) -> None:
        """Close every file without flushing: the directory is about to be deleted."""
        if not self._closed:
            for segment in self.segments:
                segment.offset_index.abandon()
                segment.time_index.abandon()
                segment.txn_index.release()
                segment.file.close()
            for _, segment in self._pending_deletes:
                segment.file.close()
            self._closed = True

    def delete(self) -> None:
        """Release the files and remove the whole partition directory."""
        self.release()
        self.directory.remove_all()


def _check_topic_id(directory: LogDirectory, topic_id: uuid.UUID | None) -> uuid.UUID | None:
    data = directory.read_document(PARTITION_METADATA)
    if data is not None:
        try:
            stored = parse_partition_metadata(data)
        except CheckpointError:
            stored = None
        if stored is not None:
            if topic_id is not None and stored != topic_id:
                raise InconsistentTopicId(f"{directory.path} belongs to topic id {stored}, not {topic_id}")
            return stored
    if topic_id is not None:
        directory.write_document(PARTITION_METADATA, format_partition_metadata(topic_id))
    return topic_id
