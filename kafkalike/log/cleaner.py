"""The log cleaner: compaction of logs with cleanup.policy=compact (Kafka's LogCleaner,
LogCleanerManager and Cleaner), done in bounded steps.

Driving it
    One ``LogCleaner`` per broker. A background task calls ``LogManager.run_cleaner(cleaner,
    now_ms)`` (or ``cleaner.work(logs, now_ms, max_bytes=...)``) in a loop: each call reads about
    ``max_bytes`` (1 MiB by default) and returns True while there is more to do, so the task
    yields to others and calls again; on False it waits ``log.cleaner.backoff.ms`` (Kafka: 15 s).
    Nothing here locks: call it from the task that appends to the logs, between appends. Where
    a step needs the disk (a cleaned file made, synced, swapped in) the pass stops and
    ``take_syncs`` hands that work to the caller for a worker thread.

Choosing a log (LogCleanerManager.grabFilthiestCompactedLog)
    For each compacted log: the first dirty offset is its ``cleaner_checkpoint`` (reset to the log
    start when outside the log); the dirty range ends at the first uncleanable segment: the active
    one, the one holding the last stable offset (high watermark or oldest open transaction), or the
    first whose newest record is younger than min.compaction.lag.ms. Dirty ratio = dirty bytes /
    (clean + dirty bytes). The log with the highest ratio above min.cleanable.dirty.ratio goes first;
    a log with a dirty segment whose first batch is older than max.compaction.lag.ms goes whatever
    its ratio. Failing those, a log whose earliest kept tombstone has passed its delete horizon gets
    a pass that drops it (Kafka waits for new dirty data).

One pass (Cleaner.doClean)
    1. Map: key -> latest offset over the dirty range into the bounded ``OffsetMap``; when it
       fills, the pass stops at the last whole batch mapped and the rest stays dirty.
    2. Clean: every segment from the log start up to where the map stopped, in groups of adjacent
       segments that fit one segment (segment.bytes, segment.index.bytes, int32 relative offsets),
       through ``compaction.clean_batch``. A lone segment that loses nothing is left alone.
    3. Swap: each group's output, written as ``%020d.log.cleaned`` and flushed, replaces the group
       through ``PartitionLog.replace_segments`` (.cleaned -> .swap -> old to .deleted -> .log), so
       a crash at any step leaves a log the loader completes or rolls back.
    4. The checkpoint moves to where the map stopped.
    Between steps the pass re-checks that the log is open, still compacted and that the segments it
    reads are still there at the same size (truncation, retention or DeleteRecords did not touch
    them); if not, the pass is dropped (its ``.cleaned`` file deleted) and a later call starts anew.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from bisect import bisect_right
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from kafkalike.log.compaction import (
    BatchFilter,
    CleanedTransactions,
    CleanerStats,
    ControlKind,
    TxnResolver,
    clean_batch,
    control_kind,
)
from kafkalike.log.config import INT_MAX, LogConfig
from kafkalike.log.errors import CorruptLogError
from kafkalike.log.loader import CLEANED_SUFFIX
from kafkalike.log.offset_map import OffsetMap, entries_for_buffer
from kafkalike.log.partition_log import PartitionLog, SegmentSwap
from kafkalike.log.segment import LOG_SUFFIX, LogSegment, parse_header, segment_name
from kafkalike.log.storage import DeferredSyncs, LogDirectory, SegmentFile
from kafkalike.log.storage_errors import reporter
from kafkalike.protocol.records import (
    BATCH_HEADER_SIZE,
    Buffer,
    RecordBatchHeader,
    batch_crc_ok,
    decode_records,
    read_batch_header,
)

logger = logging.getLogger("kafkalike.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DEFAULT_DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024  # Kafka's log.cleaner.dedupe.buffer.size
DEFAULT_STEP_BYTES = 1024 * 1024
IO_WINDOW_BYTES = 256 * 1024  # reads of source segments
WRITE_CHUNK_BYTES = 1024 * 1024  # cleaned output is appended in chunks this big
READ_AHEAD_BYTES = 256 * 1024  # what the transaction resolver reads per look ahead

Fault = Callable[[str], None]


def read_batches(
    file: SegmentFile, start: int, end: int, window: int = IO_WINDOW_BYTES
) -> Iterator[tuple[int, RecordBatchHeader, memoryview]]:
    """(position, header, bytes) of each batch in ``[start, end)``, CRC checked.

    Non-active segments were validated by recovery, so anything but whole sound batches is damage,
    and the cleaner stops (CorruptLogError) rather than copy or drop it.
    """
    pos, buf, buf_start = start, b"", start
    while pos < end:
        rel = pos - buf_start
        if rel + BATCH_HEADER_SIZE > len(buf):
            buf, buf_start, rel = file.read(pos, min(window, end - pos)), pos, 0
        header = parse_header(buf, rel)
        if header is None or pos + header.size > end:
            raise CorruptLogError(f"no whole batch at position {pos} of {file.path or 'a memory segment'}")
        if rel + header.size > len(buf):
            buf, buf_start, rel = file.read(pos, min(max(window, header.size), end - pos)), pos, 0
        view = memoryview(buf)[rel : rel + header.size]
        if len(view) < header.size or not batch_crc_ok(view, 0, header):
            raise CorruptLogError(f"batch at offset {header.base_offset} fails its CRC")
        yield pos, header, view
        pos += header.size


def _floor_index(segments: list[LogSegment], offset: int) -> int:
    return max(bisect_right(segments, offset, key=lambda s: s.base_offset) - 1, 0)


@dataclass(frozen=True)
class CleanableLog:
    """Kafka's LogToClean: a log's dirty range and how dirty it is."""

    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment's base offset: cleaning stops before that segment
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool  # max.compaction.lag.ms has passed for some dirty segment

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def cleanable(log: PartitionLog, now_ms: int) -> CleanableLog:
    """The log's cleanable range (LogCleanerManager.cleanableOffsets and calculateCleanableBytes)."""
    config, segments = log.config, log.segments
    start, checkpoint = log.log_start_offset, log.cleaner_checkpoint
    if checkpoint is None or not start <= checkpoint <= log.log_end_offset:
        first_dirty = start
        if checkpoint is not None:
            log.cleaner_checkpoint = start  # truncated or corrupt: assume everything is dirty
    else:
        first_dirty = checkpoint
    dirty_from = _floor_index(segments, first_dirty)
    dirty_non_active = segments[dirty_from:-1]
    bound = min(log.last_stable_offset, log.active_segment.base_offset)
    lag_ms = config.min_compaction_lag_ms
    if lag_ms > 0:
        young = [s.base_offset for s in dirty_non_active if s.largest_timestamp > now_ms - lag_ms]
        bound = min([bound, *young[:1]])
    uncleanable_index = min(_floor_index(segments, max(first_dirty, bound)), len(segments) - 1)
    first_uncleanable = segments[uncleanable_index].base_offset
    clean_bytes = sum(s.size for s in segments if s.base_offset < first_dirty)
    from_index = _floor_index(segments, min(first_dirty, first_uncleanable))
    cleanable_bytes = sum(s.size for s in segments[from_index:uncleanable_index])
    firsts = [t for s in dirty_non_active if (t := s.first_batch_timestamp) is not None and t > 0]
    need_now = bool(firsts) and min(firsts) < now_ms - config.max_compaction_lag_ms
    return CleanableLog(log, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, need_now)


def group_segments(
    segments: list[LogSegment], next_bases: list[int], max_bytes: int, max_index_bytes: int
) -> list[list[LogSegment]]:
    """Kafka's groupSegmentsBySize: runs of adjacent segments whose data and index sizes fit one
    segment and whose offsets fit its int32 relative offsets (``next_bases[i]`` bounds segment i)."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        group = [first]
        size, index, time_index = first.size, len(first.offset_index) * 8, len(first.time_index) * 12
        i += 1
        while i < len(segments):
            s = segments[i]
            if (
                size + s.size > max_bytes
                or index + len(s.offset_index) * 8 > max_index_bytes
                or time_index + len(s.time_index) * 12 > max_index_bytes
                or (s.size and next_bases[i] - 1 - first.base_offset > INT_MAX)
            ):
                break
            group.append(s)
            size, index, time_index = (
                size + s.size,
                index + len(s.offset_index) * 8,
                time_index + len(s.time_index) * 12,
            )
            i += 1
        groups.append(group)
    return groups


class DiskJob(Protocol):
    """Disk work a cleaning pass stops for, for its caller to ``run`` on a worker thread (when
    true: there is a disk behind it) before the pass goes on; ``discard`` if it never runs."""

    def __bool__(self) -> bool: ...

    def run(self) -> None: ...

    def discard(self) -> None: ...


class _CreateCleaned:
    """The creation of a group's ``.cleaned`` file (a leftover of the same name removed first)."""

    def __init__(self, directory: LogDirectory, name: str) -> None:
        self.directory = directory
        self.name = name
        self.file: SegmentFile | None = None

    def __bool__(self) -> bool:
        return self.directory.on_disk

    def run(self) -> None:
        self.directory.delete(self.name)
        self.file = self.directory.open_file(self.name, create=True)

    def discard(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class _GroupWriter:
    """The ``%020d.log.cleaned`` file a group is cleaned into, with its indexes kept in memory
    until the swap (the index files' plain names still belong to the old segment)."""

    def __init__(
        self, directory: LogDirectory, name: str, file: SegmentFile, base_offset: int, config: LogConfig, mtime_ms: int
    ) -> None:
        self.directory = directory
        self.name = name
        # The cleaned segment keeps its sources' age (Kafka copies the last one's mtime).
        self.segment = LogSegment(directory, base_offset, config, file, mtime_ms)
        self.mtime_ms = mtime_ms
        self.bytes_written = 0
        self._buf = bytearray()
        self._batches: list[tuple[int, RecordBatchHeader]] = []

    def add(self, data: Buffer, header: RecordBatchHeader) -> None:
        self._batches.append((len(self._buf), header))
        self._buf += data
        if len(self._buf) >= WRITE_CHUNK_BYTES:
            self._write()

    def copy(self, source: LogSegment, end: int) -> Iterator[int]:
        """Copy ``source``'s batches before position ``end`` unchanged."""
        for _pos, header, batch in read_batches(source.file, 0, end):
            self.add(batch, header)
            yield header.size

    def _write(self) -> None:
        if self._batches:
            self.segment.append(self._buf, self._batches, self.mtime_ms)
            self.bytes_written += len(self._buf)
            self._buf, self._batches = bytearray(), []

    def finish(self) -> DeferredSyncs:
        """Write what is buffered; the fsync of the file, to run before the swap, is returned."""
        self._write()
        syncs = DeferredSyncs()
        syncs.file(self.segment.file)
        return syncs

    def discard(self) -> None:
        self.segment.file.close()
        with contextlib.suppress(OSError):  # a disk error: the loader clears .cleaned files at start-up
            self.directory.delete(self.name)


class _CleaningPass:
    """One pass over one log, run as a generator so it can stop after any batch."""

    def __init__(self, target: CleanableLog, offset_map: OffsetMap, now_ms: int, fault: Fault | None) -> None:
        self.log = target.log
        self.config = self.log.config
        self.now_ms = now_ms
        self.first_dirty = target.first_dirty_offset
        self.upper = target.first_uncleanable_offset
        self.map = offset_map
        self.fault = fault
        self.stats = CleanerStats(
            log=self.log.directory.path, first_dirty_offset=self.first_dirty, end_offset=self.first_dirty
        )
        self._watched = {id(s): (s, s.size) for s in self.log.segments if s.base_offset < self.upper}
        self._writer: _GroupWriter | None = None
        self._steps = self._run()
        # Disk work due before the pass goes on (a cleaned file's creation or fsync, a swap):
        # ``LogCleaner.take_syncs`` hands it to the caller (for a worker thread); the next step
        # runs it here if nobody took it.
        self.pending_syncs: DiskJob | None = None
        self._swap: SegmentSwap | None = None  # handed out, not yet completed

    def still_valid(self) -> bool:
        log = self.log
        if log.closed or not log.config.compacts:
            return False
        live = {id(s) for s in log.segments}
        return all(id(s) in live and s.size == size for s, size in self._watched.values())

    def run(self, max_bytes: int | None) -> bool:
        """Advance by about ``max_bytes`` read (None: to the end); True when the pass is complete.

        Stops early, with ``pending_syncs`` set, where a cleaned file must be synced before its
        swap (unless running to the end: then the sync runs here)."""
        if self.pending_syncs is not None:
            syncs, self.pending_syncs = self.pending_syncs, None
            syncs.run()
        done = 0
        for step in self._steps:
            if not isinstance(step, int):
                if max_bytes is None or not step:
                    step.run()
                    continue
                self.pending_syncs = step
                return False
            done += step
            if max_bytes is not None and done >= max_bytes:
                return False
        return True

    def abort(self) -> None:
        if self.pending_syncs is not None:
            self.pending_syncs.discard()
            self.pending_syncs = None
        swap, self._swap = self._swap, None
        if swap is not None:
            if swap.ran:  # the files are swapped: so must the segments be
                self.log.complete_swap(swap, self.now_ms)
            else:
                swap.discard()
        self._steps.close()
        if self._writer is not None:
            self._writer.discard()
            self._writer = None
        self.stats.aborted = True

    def _run(self) -> Generator[int | DiskJob, None, None]:
        yield from self._build_offset_map()
        end = self.map.latest_offset + 1
        self.stats.end_offset = end
        self.stats.map_entries = len(self.map)
        segments = self.log.segments
        round_ = [s for s in segments if s.base_offset < min(end, self.upper)]
        next_bases = [segments[i + 1].base_offset for i in range(len(round_))]
        groups = group_segments(round_, next_bases, self.config.segment_bytes, self.config.segment_index_bytes)
        txns = CleanedTransactions(TxnResolver(self._read_ahead))
        batch_filter = BatchFilter(self.map, self.now_ms, self.config.delete_retention_ms, txns, self.stats)
        for group in groups:
            yield from self._clean_group(group, batch_filter)

    # ---- 1. the offset map --------------------------------------------------------------------

    def _build_offset_map(self) -> Iterator[int]:
        """Kafka's buildOffsetMap over the segments holding [first dirty, upper)."""
        start, segments = self.first_dirty, self.log.segments
        self.map.clear()
        self.map.update_latest_offset(start - 1)
        resolver = TxnResolver(self._read_ahead)
        for i, segment in enumerate(segments):
            if segment.base_offset >= self.upper:
                break
            next_base = segments[i + 1].base_offset
            if next_base <= start:
                continue
            position = segment.offset_index.lookup(start) if start > segment.base_offset else 0
            for _pos, header, batch in read_batches(segment.file, position, segment.size):
                self.stats.map_bytes_read += header.size
                if header.last_offset >= start and not self._map_batch(header, batch, resolver):
                    self.stats.map_full = True
                    return
                yield header.size
            self.map.update_latest_offset(next_base - 1)

    def _map_batch(self, header: RecordBatchHeader, batch: memoryview, resolver: TxnResolver) -> bool:
        """Map one batch's keys; False, mapping nothing, when the map cannot take them all (unless
        nothing was mapped yet: one batch always goes in, so every pass makes progress)."""
        aborted = (
            header.is_transactional
            and header.producer_id >= 0
            and resolver.is_aborted(header.producer_id, header.base_offset)
        )
        if not header.is_control and not aborted:
            if not self.map.can_take(header.records_count) and self.map.latest_offset >= self.first_dirty:
                return False
            for record in decode_records(batch, 0, header):
                offset = header.base_offset + record.offset_delta
                if record.key is not None and offset >= self.first_dirty:
                    self.map.put(record.key, offset)
            self.stats.map_messages_read += header.records_count
        self.map.update_latest_offset(header.last_offset)
        return True

    def _read_ahead(self, offset: int) -> list[tuple[RecordBatchHeader, ControlKind | None]]:
        """Some batches from the one holding ``offset`` on, for ``TxnResolver``; located afresh
        each time, so it never reads a segment a swap has retired."""
        segments = self.log.segments
        for segment in segments[_floor_index(segments, offset) :]:
            found = segment.translate_offset(offset)
            if found is None:
                continue
            out: list[tuple[RecordBatchHeader, ControlKind | None]] = []
            read = 0
            for _pos, header, batch in read_batches(segment.file, found[0], segment.size):
                kind = control_kind(batch, header) if header.is_control and header.producer_id >= 0 else None
                out.append((header, kind))
                read += header.size
                if read >= READ_AHEAD_BYTES:
                    break
            self.stats.bytes_read += read
            return out
        return []

    # ---- 2. and 3. cleaning and swapping a group ----------------------------------------------

    def _clean_group(self, group: list[LogSegment], batch_filter: BatchFilter) -> Iterator[int | DiskJob]:
        batch_filter.last_records = {
            pid: (e.batches[-1].last_offset if e.batches else None, e.epoch)
            for pid, e in self.log.producer_state.producers.items()
        }
        last_nonempty = max((i for i, s in enumerate(group) if s.size), default=-1)
        if len(group) > 1:
            self._writer = yield from self._open_writer(group)
        for i, segment in enumerate(group):
            unchanged_end = 0
            for pos, header, batch in read_batches(segment.file, 0, segment.size):
                last = i == last_nonempty and pos + header.size == segment.size
                out = clean_batch(batch, header, batch_filter, last=last)
                self.stats.bytes_read += header.size
                if out is batch and self._writer is None:
                    unchanged_end = pos + header.size
                else:
                    if self._writer is None:  # a lone segment's first change: copy what came before
                        self._writer = yield from self._open_writer(group)
                        yield from self._writer.copy(segment, unchanged_end)
                    if out is not None:
                        self._writer.add(out, header if out is batch else read_batch_header(out, 0))
                yield header.size
        if self._writer is not None:
            yield self._writer.finish()  # the cleaned file's fsync, maybe on a worker thread
            writer, self._writer = self._writer, None
            yield from self._swap_in(writer, group)

    def _open_writer(self, group: list[LogSegment]) -> Generator[DiskJob, None, _GroupWriter]:
        base = group[0].base_offset
        create = _CreateCleaned(self.log.directory, segment_name(base, LOG_SUFFIX + CLEANED_SUFFIX))
        try:
            yield create  # made on a worker thread
        except GeneratorExit:  # the pass was dropped: the file is the loader's to remove
            create.discard()
            raise
        if create.file is None:
            create.run()  # nobody ran it (the pass is being run to its end)
        assert create.file is not None
        file, create.file = create.file, None
        return _GroupWriter(self.log.directory, create.name, file, base, self.config, group[-1].last_modified_ms)

    def _swap_in(self, writer: _GroupWriter, group: list[LogSegment]) -> Iterator[DiskJob]:
        self.stats.bytes_written += writer.bytes_written
        if self.fault is not None:
            self.fault("cleaned")
        swap = self._swap = self.log.prepare_swap(writer.segment, group, on_step=self.fault)
        yield swap  # its renames and syncs on a worker thread
        if not swap.ran:
            swap.run()
        self._swap = None
        self.log.complete_swap(swap, self.now_ms)
        for old in group:
            del self._watched[id(old)]
        self._watched[id(writer.segment)] = (writer.segment, writer.segment.size)
        self.stats.segments_cleaned += len(group)
        self.stats.groups_swapped += 1


class LogCleaner:
    """Compacts the logs it is given, one log at a time, in bounded steps (see the module docstring).

    ``fault`` is called with the name of each step of a swap ("cleaned", then ``replace_segments``'
    "swap", "deleted-<n>", "renamed", "done"); crash tests raise from it to stop the cleaner there.
    """

    def __init__(
        self,
        *,
        dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES,
        load_factor: float = 0.9,
        max_map_entries: int | None = None,
        fault: Fault | None = None,
    ) -> None:
        self.offset_map = OffsetMap(max_map_entries or entries_for_buffer(dedupe_buffer_bytes, load_factor))
        self.fault = fault
        self.last_stats: CleanerStats | None = None
        self.max_dirty_ratio = 0.0  # of the compacted logs last looked at (Kafka's max-dirty-percent)
        self._pass: _CleaningPass | None = None
        self._uncleanable: weakref.WeakSet[PartitionLog] = weakref.WeakSet()
        self._horizons: weakref.WeakKeyDictionary[PartitionLog, int] = weakref.WeakKeyDictionary()

    @property
    def cleaning(self) -> PartitionLog | None:
        """The log whose pass is in progress, if any."""
        return self._pass.log if self._pass is not None else None

    def is_uncleanable(self, log: PartitionLog) -> bool:
        """True after a pass over ``log`` failed (corrupt data); it is skipped from then on."""
        return log in self._uncleanable

    def grab_filthiest(self, logs: Iterable[PartitionLog], now_ms: int) -> CleanableLog | None:
        """The log to clean next, or None when no compacted log needs cleaning."""
        candidates = [
            c
            for log in logs
            if not log.closed and log.config.compacts and log not in self._uncleanable
            if (c := cleanable(log, now_ms)).total_bytes > 0
        ]
        self.max_dirty_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
        ready = [
            c
            for c in candidates
            if (c.need_compaction_now and c.cleanable_bytes > 0)
            or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
        ]
        if ready:
            return max(ready, key=lambda c: c.cleanable_ratio)
        due = [c for c in candidates if c.clean_bytes > 0 and self._horizons.get(c.log, now_ms + 1) <= now_ms]
        return min(due, key=lambda c: self._horizons[c.log]) if due else None

    def work(self, logs: Iterable[PartitionLog], now_ms: int, *, max_bytes: int = DEFAULT_STEP_BYTES) -> bool:
        """Start or continue a pass, reading about ``max_bytes``; True while there may be more to do."""
        if self._pass is None:
            target = self.grab_filthiest(logs, now_ms)
            if target is None:
                return False
            self._pass = _CleaningPass(target, self.offset_map, now_ms, self.fault)
        self._step(max_bytes)
        return True

    def clean_once(self, logs: Iterable[PartitionLog], now_ms: int) -> CleanerStats | None:
        """Finish the pass in progress, or clean the filthiest log, in one go; None if none needs it."""
        if self._pass is None:
            target = self.grab_filthiest(logs, now_ms)
            if target is None:
                return None
            self._pass = _CleaningPass(target, self.offset_map, now_ms, self.fault)
        return self._step(None)

    def clean_log(self, log: PartitionLog, now_ms: int) -> CleanerStats:
        """Clean ``log`` in one go whatever its dirty ratio (tools and tests); drops any other pass."""
        self.abort()
        self._pass = _CleaningPass(cleanable(log, now_ms), self.offset_map, now_ms, self.fault)
        stats = self._step(None)
        assert stats is not None
        return stats

    def take_syncs(self) -> DiskJob | None:
        """The disk work the pass in progress needs before it continues (``work`` stopped for
        it: a cleaned file's creation or fsync, or a swap's renames and syncs): the caller runs
        it, on a worker thread, then calls ``work`` again; on failure ``abort``."""
        current = self._pass
        if current is None or current.pending_syncs is None:
            return None
        syncs, current.pending_syncs = current.pending_syncs, None
        return syncs

    def abort(self, log: PartitionLog | None = None) -> None:
        """Drop the pass in progress (over ``log`` only, if given), deleting its ``.cleaned`` file."""
        if self._pass is not None and (log is None or self._pass.log is log):
            self._pass.abort()
            self.last_stats = self._pass.stats
            self._pass = None
            self.offset_map.clear()

    def _step(self, max_bytes: int | None) -> CleanerStats | None:
        """Run the pass in progress; its stats once it ended (finished, dropped or failed)."""
        current = self._pass
        assert current is not None
        if not current.still_valid():
            self.abort()
            return current.stats
        try:
            if not current.run(max_bytes):
                return None
        except OSError as exc:
            # The disk, not the log: drop the pass and start it again later, once the disk lets it.
            reporter.report("cleaning of", current.log.directory.path, exc, current.now_ms)
            current.stats.errors.append(repr(exc))
            self.abort()
            return current.stats
        except Exception as exc:
            # Kafka marks the partition uncleanable and carries on with the others.
            logger.exception("cleaning %s failed; it will not be cleaned again", current.log.directory.path)
            current.stats.errors.append(repr(exc))
            self._uncleanable.add(current.log)
            self.abort()
            return current.stats
        self._pass = None
        self.offset_map.clear()  # the map can be large: hold it only while a pass runs
        log, stats = current.log, current.stats
        log.cleaner_checkpoint = stats.end_offset
        if stats.next_delete_horizon_ms is None:
            self._horizons.pop(log, None)
        else:
            self._horizons[log] = stats.next_delete_horizon_ms
        self.last_stats = stats
        return stats
