"""Sparse per-segment indexes, kept in memory and mirrored to Kafka-format files.

Lookups run on in-memory arrays (binary search), so the files are only written, never read on the
hot path. New entries are buffered and written at flush, roll and close; after an unclean shutdown
the recovery scan rebuilds the indexes of every segment it revisits, exactly as Kafka does, so a
lost tail of an index file costs nothing but a rebuild.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from collections.abc import Callable

from kafkalike.log.storage import IMMEDIATE, SegmentFile, Syncs

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class IndexCorrupt(Exception):
    """An index file whose entries cannot be trusted; the segment rebuilds it from the log."""


class _IndexFile:
    """The file behind an index: opened on first write, released when its segment goes cold."""

    def __init__(self, opener: Callable[[], SegmentFile]) -> None:
        self._opener = opener
        self._file: SegmentFile | None = None
        self.pending = bytearray()

    def file(self) -> SegmentFile:
        if self._file is None:
            self._file = self._opener()
        return self._file

    @property
    def is_open(self) -> bool:
        return self._file is not None

    def adopt(self, file: SegmentFile) -> None:
        """Use ``file``, opened elsewhere (a worker thread) on this index's file, unless one is
        open already: then ``file`` is closed."""
        if self._file is None:
            self._file = file
        else:
            file.close()

    def write_pending(self) -> None:
        if self.pending:
            self.file().append(self.pending)
            self.pending.clear()

    def flush(self, syncs: Syncs = IMMEDIATE) -> None:
        self.write_pending()
        if self._file is not None:
            syncs.file(self._file)

    def rewrite(self, data: bytes) -> None:
        self.pending.clear()
        f = self.file()
        f.truncate(0)
        f.append(data)

    def truncate(self, size: int, total: int) -> None:
        """Keep the first ``size`` of the ``total`` bytes of entries, written or pending. The
        file always holds exactly the entries not pending, so entries never written are dropped
        without touching the disk: undoing an append needs nothing from a failing one."""
        written = total - len(self.pending)
        if size >= written:
            del self.pending[size - written :]
        else:
            self.pending.clear()
            self.file().truncate(size)

    def release(self) -> None:
        self.write_pending()
        self.abandon()

    def abandon(self) -> None:
        """Close the file without writing what is pending (the log is being deleted, or dies)."""
        if self._file is not None:
            self._file.close()
            self._file = None


class _IndexFileOwner:
    """What both indexes do with their file: ``_io`` writes, flushes and releases it."""

    _io: _IndexFile

    def write_pending(self) -> None:
        self._io.write_pending()

    def flush(self, syncs: Syncs = IMMEDIATE) -> None:
        self._io.flush(syncs)

    def release(self) -> None:
        self._io.release()

    def abandon(self) -> None:
        self._io.abandon()

    @property
    def file_open(self) -> bool:
        return self._io.is_open

    def adopt_file(self, file: SegmentFile) -> None:
        self._io.adopt(file)

    def open_file(self) -> None:
        """Open the file now (it is otherwise opened at the first write)."""
        self._io.file()


class OffsetIndex(_IndexFileOwner):
    """``%020d.index``: 8-byte entries, ``int32 offset - base_offset`` then ``int32 file position``.

    An entry maps the last offset of a batch to the position where that batch starts; entries rise
    strictly in both fields. A lookup for offset T takes the last entry with offset <= T and scans
    batch headers forward from its position, at most ``index.interval.bytes`` plus one batch.
    """

    ENTRY_SIZE = 8

    def __init__(self, base_offset: int, max_entries: int, opener: Callable[[], SegmentFile]) -> None:
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self._io = _IndexFile(opener)
        self._offsets = array("i")
        self._positions = array("i")

    def load(self, data: bytes, log_size: int) -> None:
        """Adopt a file's entries, raising IndexCorrupt unless every one is plausible."""
        if len(data) % self.ENTRY_SIZE:
            raise IndexCorrupt(f"offset index size {len(data)} is not a multiple of {self.ENTRY_SIZE}")
        both = array("i")
        both.frombytes(data)
        if sys.byteorder == "little":
            both.byteswap()
        offsets, positions = both[0::2], both[1::2]
        for i in range(len(offsets)):
            if offsets[i] < 0 or positions[i] < 0 or positions[i] >= log_size:
                raise IndexCorrupt(f"offset index entry {i} points outside the segment")
            if i and (offsets[i] <= offsets[i - 1] or positions[i] <= positions[i - 1]):
                raise IndexCorrupt(f"offset index entry {i} does not increase")
        self._offsets, self._positions = offsets, positions

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """(absolute offset, position) of the last entry, or (base_offset, 0) when empty."""
        if not self._offsets:
            return self.base_offset, 0
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._offsets and (relative <= self._offsets[-1] or position <= self._positions[-1]):
            return  # Already covered (re-appending after a rebuild); entries must stay strictly rising.
        self._offsets.append(relative)
        self._positions.append(position)
        self._io.pending += _OFFSET_ENTRY.pack(relative, position)

    def lookup(self, offset: int) -> int:
        """Start position of the scan for ``offset``: the last entry at or below it, else 0."""
        i = bisect_right(self._offsets, offset - self.base_offset) - 1
        return self._positions[i] if i >= 0 else 0

    def floor_position(self, position: int) -> int:
        """The largest indexed batch start at or below ``position`` (0 when none)."""
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Drop entries for batches whose last offset is >= ``offset``."""
        keep = bisect_right(self._offsets, offset - self.base_offset - 1)
        if keep < len(self._offsets):
            total = len(self._offsets) * self.ENTRY_SIZE
            del self._offsets[keep:]
            del self._positions[keep:]
            self._io.truncate(keep * self.ENTRY_SIZE, total)

    def reset(self) -> None:
        self._offsets = array("i")
        self._positions = array("i")
        self._io.rewrite(b"")

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + o, p) for o, p in zip(self._offsets, self._positions, strict=True)]


class TimeIndex(_IndexFileOwner):
    """``%020d.timeindex``: 12-byte entries, ``int64 timestamp`` then ``int32 offset - base_offset``.

    An entry says "the largest timestamp up to this offset is T"; one is added beside an offset
    index entry whenever the segment's max timestamp has grown, and once more when the segment is
    rolled or closed so the last entry always holds the segment's max timestamp.
    """

    ENTRY_SIZE = 12

    def __init__(self, base_offset: int, max_entries: int, opener: Callable[[], SegmentFile]) -> None:
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self._io = _IndexFile(opener)
        self._timestamps = array("q")
        self._offsets = array("i")

    def load(self, data: bytes, next_offset: int) -> None:
        if len(data) % self.ENTRY_SIZE:
            raise IndexCorrupt(f"time index size {len(data)} is not a multiple of {self.ENTRY_SIZE}")
        limit = next_offset - self.base_offset
        timestamps, offsets = array("q"), array("i")
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            if rel < 0 or rel >= max(limit, 1):
                raise IndexCorrupt("time index entry points outside the segment")
            if timestamps and (ts <= timestamps[-1] or rel < offsets[-1]):
                raise IndexCorrupt("time index entries do not increase")
            timestamps.append(ts)
            offsets.append(rel)
        self._timestamps, self._offsets = timestamps, offsets

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, absolute offset) of the last entry, or (-1, base_offset) when empty."""
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        relative = offset - self.base_offset
        if self._offsets and relative < self._offsets[-1]:
            return
        self._timestamps.append(timestamp)
        self._offsets.append(relative)
        self._io.pending += _TIME_ENTRY.pack(timestamp, relative)

    def lookup(self, timestamp: int) -> int:
        """Offset to start searching from: that of the last entry with timestamp <= target, else base."""
        i = bisect_right(self._timestamps, timestamp) - 1
        return self.base_offset + self._offsets[i] if i >= 0 else self.base_offset

    def truncate_to(self, offset: int) -> None:
        """Drop entries at or above ``offset``."""
        keep = len(self._offsets)
        while keep and self.base_offset + self._offsets[keep - 1] >= offset:
            keep -= 1
        if keep < len(self._offsets):
            total = len(self._offsets) * self.ENTRY_SIZE
            del self._timestamps[keep:]
            del self._offsets[keep:]
            self._io.truncate(keep * self.ENTRY_SIZE, total)

    def reset(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")
        self._io.rewrite(b"")

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + o) for t, o in zip(self._timestamps, self._offsets, strict=True)]
