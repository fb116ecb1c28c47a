"""One log segment: a data file of whole v2 batches plus its offset and time indexes.

Files, all named by the segment's base offset (the first offset it may hold) as ``%020d``:

- ``.log``: record batches exactly as produced, base offsets and leader epochs filled in, back to
  back with no framing of our own (Kafka's format, so ``kafka-dump-log`` reads it);
- ``.index``: see ``OffsetIndex``; ``.timeindex``: see ``TimeIndex``;
- ``.txnindex``: the transactions aborted in this segment, see ``TransactionIndex`` (only once
  there is one).

Only batch headers are ever parsed here; records stay opaque bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from kafkalike.log.config import INT_MAX, LONG_MAX, LogConfig
from kafkalike.log.index import IndexCorrupt, OffsetIndex, TimeIndex
from kafkalike.log.producer_state import SNAPSHOT_SUFFIX
from kafkalike.log.storage import IMMEDIATE, LogDirectory, SegmentFile, Syncs
from kafkalike.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex, TxnIndexCorrupt
from kafkalike.protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, RecordBatchHeader, batch_crc_ok

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_WINDOW = 8 * 1024
VERIFY_WINDOW = 4 * 1024 * 1024

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
DELETED_SUFFIX = ".deleted"


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_header(buf: bytes | bytearray | memoryview, pos: int) -> RecordBatchHeader | None:
    """The header at ``pos`` if it looks like a v2 batch header, else None (a torn or foreign tail)."""
    if len(buf) - pos < BATCH_HEADER_SIZE or buf[pos + 16] != 2:
        return None
    header = RecordBatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or header.last_offset_delta < 0:
        return None
    return header


def iter_batches(
    file: SegmentFile, start: int, end: int, *, verify: bool = False, window: int = HEADER_WINDOW
) -> Iterator[tuple[int, RecordBatchHeader]]:
    """(position, header) of each whole batch in ``[start, end)``, stopping at the first bad one.

    Reads go through a window so small batches cost one read per many headers and large ones one
    short read each. With ``verify`` the whole batch is read and its CRC checked (recovery only).
    """
    buf = b""
    buf_start = start
    pos = start
    while pos + BATCH_HEADER_SIZE <= end:
        rel = pos - buf_start
        if rel + BATCH_HEADER_SIZE > len(buf):
            buf, buf_start, rel = file.read(pos, min(window, end - pos)), pos, 0
        header = parse_header(buf, rel)
        if header is None or pos + header.size > end:
            return
        if verify:
            if rel + header.size > len(buf):
                buf, buf_start, rel = file.read(pos, min(max(window, header.size), end - pos)), pos, 0
                if len(buf) < header.size:
                    return
            if not batch_crc_ok(buf, rel, header):
                return
        yield pos, header
        pos += header.size


class Truncation(NamedTuple):
    position: int  # the byte the segment was cut at
    offset: int  # the first offset no longer in the log
    bytes_dropped: int
    records_dropped: int  # as far as the dropped batch headers tell
    reason: str


def describe_bad_batch(file: SegmentFile, position: int, end: int, expected_offset: int) -> str:
    """Why the bytes at ``position`` (up to ``end``) are not the valid batch recovery expected
    there, the next one holding ``expected_offset`` or later: for its WARN line and for
    ``kafkalike storage verify``."""
    remaining = end - position
    head = file.read(position, min(remaining, BATCH_HEADER_SIZE))
    if remaining < BATCH_HEADER_SIZE:
        return f"torn batch header ({remaining} of {BATCH_HEADER_SIZE} bytes)"
    if head[16] != 2:
        return f"not a v2 batch (magic byte {head[16]})"
    header = parse_header(head, 0)
    if header is None:
        return "malformed batch header (length or offset delta out of range)"
    if position + header.size > end:
        return f"torn batch ({remaining} of its {header.size} bytes)"
    if not batch_crc_ok(file.read(position, header.size), 0, header):
        return f"CRC mismatch in the batch at offset {header.base_offset}"
    if header.base_offset < expected_offset:
        return f"offset {header.base_offset} does not follow {expected_offset - 1}"
    return f"batch at offset {header.base_offset} is outside the segment's offset range"


def records_in_headers(file: SegmentFile, start: int, end: int) -> int:
    """Records counted in the batch headers readable from ``start`` (CRC not checked; one read
    per batch, only ever for bytes being dropped): what a WARN about them can say."""
    records = 0
    position = start
    while position + BATCH_HEADER_SIZE <= end:
        header = parse_header(file.read(position, BATCH_HEADER_SIZE), 0)
        if header is None:
            break
        records += header.records_count  # a torn last batch's records count too: they are lost
        position += header.size
    return records


class SegmentFiles(NamedTuple):
    """A new segment's open files: its data file, and its index files when kept open."""

    log: SegmentFile
    offset_index: SegmentFile | None = None
    time_index: SegmentFile | None = None

    def close(self) -> None:
        for file in self:
            if file is not None:
                file.close()


def keeps_index_files_open(config: LogConfig) -> bool:
    """Whether a new segment keeps its index files open: when its log flushes by message count
    or time, so those flushes, on the event loop, never have to open one (at a roll, a worker
    thread writes and closes them); otherwise they stay closed, one descriptor per segment."""
    return config.flush_interval_messages != LONG_MAX or config.flush_interval_ms is not None


def create_segment_files(directory: LogDirectory, base_offset: int, *, keep_index_files: bool) -> SegmentFiles:
    """A new segment's files, empty. Touches only files named by ``base_offset``, so it may run
    on a worker thread while the log is used on the event loop."""
    for suffix in SEGMENT_SUFFIXES:
        directory.delete(segment_name(base_offset, suffix))  # stale files from a crashed roll
    file = directory.open_file(segment_name(base_offset, LOG_SUFFIX), create=True)
    indexes: list[SegmentFile] = []
    try:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            # Present from the start, as Kafka's are, so the directory always looks complete.
            indexes.append(directory.open_file(segment_name(base_offset, suffix), create=True))
    except OSError:
        # EMFILE or ENOSPC: the roll is tried again from scratch, without a leaked descriptor.
        SegmentFiles(file, *indexes).close()
        raise
    if not keep_index_files:
        SegmentFiles(indexes[0], indexes[1]).close()
        return SegmentFiles(file)
    return SegmentFiles(file, indexes[0], indexes[1])


class PreparedRoll:
    """The disk work of a roll, to run on a worker thread between ``PartitionLog.prepare_roll``
    and ``complete_roll`` (both on the event loop, which alone changes the log).

    ``create`` makes the new segment's files, opens the index files of the segment becoming
    inactive (its last index entries are written into them at the roll), and writes the
    producer-state snapshot taken at the roll offset. Nothing it touches is in use by the log.
    """

    def __init__(
        self,
        directory: LogDirectory,
        base_offset: int,
        snapshot: bytes,
        old_indexes: list[str],
        keep_index_files: bool,
        *,
        log_end_offset: int | None = None,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        # The log end when prepared (``base_offset`` unless the roll skips a gap): an append
        # made meanwhile leaves the roll to be discarded.
        self.log_end_offset = base_offset if log_end_offset is None else log_end_offset
        self.snapshot = snapshot
        self.old_index_names = old_indexes
        self.keep_index_files = keep_index_files
        self.files: SegmentFiles | None = None
        self.old_index_files: list[SegmentFile | None] = []
        self.remove_on_discard = False  # set by ``complete_roll`` when no live segment owns the names

    def create(self) -> None:
        """Thread-safe; on OSError everything it opened is closed again."""
        try:
            self.files = create_segment_files(self.directory, self.base_offset, keep_index_files=self.keep_index_files)
            for name in self.old_index_names:
                self.old_index_files.append(self.directory.open_file(name, create=True) if name else None)
            self.directory.write_document(segment_name(self.base_offset, SNAPSHOT_SUFFIX), self.snapshot, durable=False)
        except OSError:
            # Its files go too: the log end is past ``base_offset`` by the time a roll is tried
            # again, if an append went into the active segment meanwhile.
            self.remove_on_discard = True
            self.discard()
            raise

    def discard(self) -> None:
        """Close what ``create`` opened (a roll not installed), removing the new segment's files
        when ``remove_on_discard``. Thread-safe."""
        if self.files is not None:
            self.files.close()
        for file in self.old_index_files:
            if file is not None:
                file.close()
        self.files, self.old_index_files = None, []
        if self.remove_on_discard:
            for suffix in SEGMENT_SUFFIXES:
                self.directory.delete(segment_name(self.base_offset, suffix))


class LogSegment:
    """A segment's files and the summary state appends and lookups need (see module docstring)."""

    def __init__(
        self,
        directory: LogDirectory,
        base_offset: int,
        config: LogConfig,
        file: SegmentFile,
        now_ms: int,
        index_files: tuple[SegmentFile | None, SegmentFile | None] = (None, None),
    ):
        """``index_files``: the index files, already open (``create_segment_files``)."""
        self.directory = directory
        self.base_offset = base_offset
        self.file = file
        self.index_interval_bytes = config.index_interval_bytes
        self.offset_index = OffsetIndex(
            base_offset, config.segment_index_bytes // OffsetIndex.ENTRY_SIZE, self._opener(INDEX_SUFFIX)
        )
        self.time_index = TimeIndex(
            base_offset, config.segment_index_bytes // TimeIndex.ENTRY_SIZE, self._opener(TIME_INDEX_SUFFIX)
        )
        offset_file, time_file = index_files
        if offset_file is not None:
            self.offset_index.adopt_file(offset_file)
        if time_file is not None:
            self.time_index.adopt_file(time_file)
        self.txn_index = TransactionIndex(directory, base_offset)
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp: int | None = None
        self.created_ms = now_ms
        self.last_modified_ms = now_ms
        self.bytes_since_last_index_entry = 0
        self.marked_deleted = False
        self.truncation: Truncation | None = None  # what the last ``recover`` cut off

    def _opener(self, suffix: str) -> Callable[[], SegmentFile]:
        def open_index() -> SegmentFile:
            return self.directory.open_file(segment_name(self.base_offset, suffix), create=True)

        return open_index

    @classmethod
    def create(cls, directory: LogDirectory, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        return cls.from_files(
            directory,
            base_offset,
            config,
            create_segment_files(directory, base_offset, keep_index_files=keeps_index_files_open(config)),
            now_ms,
        )

    @classmethod
    def from_files(
        cls, directory: LogDirectory, base_offset: int, config: LogConfig, files: SegmentFiles, now_ms: int
    ) -> LogSegment:
        return cls(directory, base_offset, config, files.log, now_ms, (files.offset_index, files.time_index))

    @classmethod
    def open_existing(cls, directory: LogDirectory, base_offset: int, config: LogConfig) -> LogSegment:
        """Open a segment found on disk; the caller then runs ``load`` or ``recover``."""
        file = directory.open_file(segment_name(base_offset, LOG_SUFFIX), create=False)
        mtime = file.last_modified_ms()
        return cls(directory, base_offset, config, file, mtime)

    @property
    def size(self) -> int:
        return self.file.size

    @property
    def largest_timestamp(self) -> int:
        """What retention ages the segment by: its max batch timestamp, or its mtime without one."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    # ---- loading and recovery -------------------------------------------------------------

    def load(self) -> bool:
        """Trust the index files and scan only the tail after the last offset-index entry.

        Returns False when an index is missing or insane or the tail is torn, so the caller runs
        ``recover`` instead; that is the clean-shutdown path, which must cost O(index interval).
        """
        index_data = self.directory.read_document(segment_name(self.base_offset, INDEX_SUFFIX))
        time_data = self.directory.read_document(segment_name(self.base_offset, TIME_INDEX_SUFFIX))
        if index_data is None or time_data is None:
            return False
        try:
            self.txn_index.sanity_check()
        except TxnIndexCorrupt:
            return False
        try:
            self.offset_index.load(index_data, self.size)
        except IndexCorrupt:
            return False
        if not self._load_tail():
            return False
        try:
            self.time_index.load(time_data, self.next_offset)
        except IndexCorrupt:
            return False
        ts, offset = self.time_index.last_entry
        if ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = ts, offset
        return True

    def _load_tail(self) -> bool:
        last_offset, position = self.offset_index.last_entry
        end = position
        for pos, header in iter_batches(self.file, position, self.size):
            self._track_max_timestamp(header)
            self.next_offset = header.last_offset + 1
            end = pos + header.size
        if end != self.size or (self.size and self.next_offset <= last_offset):
            return False
        self.bytes_since_last_index_entry = self.size - position
        self._load_first_batch_timestamp()
        return True

    def _load_first_batch_timestamp(self) -> None:
        header = parse_header(self.file.read(0, BATCH_HEADER_SIZE), 0) if self.size else None
        self.first_batch_timestamp = header.max_timestamp if header else None

    def recover(self, on_batch: Callable[[int, RecordBatchHeader], None] | None = None) -> int:
        """Validate every batch (framing, CRC, rising offsets), rebuild both indexes, cut a bad tail.

        Returns the number of bytes truncated; ``truncation`` then says where and why, for the
        WARN the loader logs. ``on_batch`` sees each valid batch so the caller can rebuild its
        epoch cache and producer state in the same pass.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()  # the loader rebuilds it from the producer state it replays
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.bytes_since_last_index_entry = 0
        valid_end = 0
        for pos, header in iter_batches(self.file, 0, self.size, verify=True, window=VERIFY_WINDOW):
            if header.base_offset < self.next_offset or header.last_offset - self.base_offset > INT_MAX:
                break
            self._account_batch(pos, header)
            if on_batch is not None:
                on_batch(pos, header)
            valid_end = pos + header.size
            self.next_offset = header.last_offset + 1
        truncated = self.size - valid_end
        if truncated:
            self.truncation = Truncation(
                valid_end,
                self.next_offset,
                truncated,
                records_in_headers(self.file, valid_end, self.size),
                describe_bad_batch(self.file, valid_end, self.size, self.next_offset),
            )
            self.file.truncate(valid_end)
        self._load_first_batch_timestamp()
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        return truncated

    # ---- appending ------------------------------------------------------------------------

    def _track_max_timestamp(self, header: RecordBatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset

    def _account_batch(self, position: int, header: RecordBatchHeader) -> None:
        """Index bookkeeping for one batch at ``position``, Kafka's rule: an entry once more than
        ``index.interval.bytes`` were appended since the previous one."""
        if header.max_timestamp > self.max_timestamp:  # ``_track_max_timestamp``, inline: once per batch
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.base_offset + header.last_offset_delta
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += header.size

    def append(
        self, data: bytes | bytearray | memoryview, batches: list[tuple[int, RecordBatchHeader]], now_ms: int
    ) -> int:
        """Write ``data`` (whole batches; ``batches`` gives each one's position inside ``data``).

        One write for the whole buffer; per-batch work is header bookkeeping only. Returns the
        file position the data starts at.
        """
        start = self.file.append(data)
        if self.first_batch_timestamp is None and batches:
            self.first_batch_timestamp = batches[0][1].max_timestamp
        for rel, header in batches:
            self._account_batch(start + rel, header)
        self.next_offset = batches[-1][1].last_offset + 1
        self.last_modified_ms = now_ms
        return start

    def should_roll(
        self, append_size: int, max_timestamp: int, last_offset: int, config: LogConfig, now_ms: int
    ) -> bool:
        """Kafka's ``LogSegment.shouldRoll``: full by bytes or index, too old (segment.ms, or
        max.compaction.lag.ms when compacted), or offsets overflow."""
        if self.size > config.segment_bytes - append_size:
            return True
        if self.size > 0:
            first = self.first_batch_timestamp
            waited = max_timestamp - first if first is not None and first >= 0 else now_ms - self.created_ms
            if waited > config.max_segment_ms:
                return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return last_offset - self.base_offset > INT_MAX

    def on_become_inactive(self) -> None:
        """Called at roll: pin the max timestamp in the time index and let the index files go."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.release()
        self.time_index.release()
        self.txn_index.release()

    # ---- lookups --------------------------------------------------------------------------

    def batches(self, start_position: int = 0) -> Iterator[tuple[int, RecordBatchHeader]]:
        return iter_batches(self.file, start_position, self.size)

    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, RecordBatchHeader] | None:
        """The first batch whose last offset is >= ``offset`` (the batch holding it, if any)."""
        position = max(self.offset_index.lookup(offset), start_position)
        for pos, header in iter_batches(self.file, position, self.size):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(self, offset: int, max_size: int, max_position: int, min_one_batch: bool) -> tuple[int, int] | None:
        """(position, length) of whole batches from the one holding ``offset``; None when past the end.

        The first batch counts even beyond ``max_size`` if ``min_one_batch`` (KIP-74); nothing is
        returned at or beyond ``max_position`` (the high watermark's batch boundary).
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        position, header = found
        limit = min(max_position, self.size)
        if position + header.size > limit:
            return position, 0
        if header.size > max_size:
            return position, (header.size if min_one_batch else 0)
        end = self._last_batch_end(min(limit, position + max_size), position + header.size)
        return position, end - position

    def _last_batch_end(self, limit: int, at_least: int) -> int:
        """The furthest batch boundary <= ``limit``, scanning forward from the nearest index entry."""
        if limit >= self.size:
            return self.size
        end = max(at_least, self.offset_index.floor_position(limit))
        for pos, header in iter_batches(self.file, end, limit):
            end = pos + header.size
        return end

    def find_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, RecordBatchHeader] | None:
        """The first batch at/after ``starting_offset`` whose max timestamp is >= ``timestamp``."""
        start_offset = max(self.time_index.lookup(timestamp), starting_offset)
        for pos, header in iter_batches(self.file, self.offset_index.lookup(start_offset), self.size):
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                return pos, header
        return None

    # ---- truncation, flushing, deletion -----------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Drop the batch holding ``offset`` and everything after it; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found[0]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(found[1].base_offset)  # markers in the dropped batches go too
        removed = self.size - position
        self.file.truncate(position)
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        if self.max_timestamp < 0:
            self.offset_of_max_timestamp = self.base_offset
        self._load_tail()
        if self.size == 0:
            self.created_ms = now_ms
        return removed

    def flush(self, syncs: Syncs = IMMEDIATE) -> None:
        syncs.file(self.file)
        self.offset_index.flush(syncs)
        self.time_index.flush(syncs)
        self.txn_index.flush(syncs)

    def close(self) -> None:
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.release()
        self.time_index.release()
        self.txn_index.release()
        self.file.close()

    def mark_deleted(self, syncs: Syncs = IMMEDIATE, *, renamed: bool = False) -> None:
        """Rename to ``*.deleted`` so a restart knows the files are garbage, as Kafka does;
        ``syncs`` may defer the renames to a worker thread.

        The data file stays open: a fetch that already holds a range can still sendfile from it
        until the delayed delete closes it. The index files are closed without their pending
        entries: a ``.deleted`` file is never read again.
        """
        self.offset_index.abandon()
        self.time_index.abandon()
        self.txn_index.release()
        self.marked_deleted = True
        if renamed:  # already, by a compaction swap on a worker thread
            return
        for suffix in SEGMENT_SUFFIXES:
            name = segment_name(self.base_offset, suffix)
            if self.directory.exists(name):
                file = self.file if suffix == LOG_SUFFIX else None
                syncs.rename(self.directory, name, name + DELETED_SUFFIX, file)

    def delete_files(self, syncs: Syncs = IMMEDIATE) -> None:
        """Remove the files, under their ``.deleted`` names once renamed: by then a new segment
        may already own the plain names (truncation restarting the log at the same offset).
        ``syncs`` may defer the unlinks (of a large file: slow) to a worker thread."""
        self.file.close()
        self.offset_index.release()
        self.time_index.release()
        self.txn_index.release()
        for suffix in SEGMENT_SUFFIXES:
            name = segment_name(self.base_offset, suffix)
            if self.marked_deleted:
                syncs.unlink(self.directory, name + DELETED_SUFFIX)
            else:
                self.directory.delete(name)
