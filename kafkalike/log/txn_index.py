"""The transaction index of one segment: ``%020d.txnindex`` (Kafka's TransactionIndex).

One entry per transaction aborted by a marker in this segment, in the order the markers were
appended (so ``last_offset`` rises strictly), 34 bytes each, no header::

    int16 version (0)
    int64 producer_id
    int64 first_offset        the transaction's first offset in this partition
    int64 last_offset         the offset of its abort marker
    int64 last_stable_offset  the partition's LSO once the marker was written

A read_committed fetch asks which aborted transactions overlap the offsets it returns
(``collect``); the consumer drops those producers' batches up to each abort marker. The entry
lives in the segment holding the marker, so a search starts at the segment holding the fetch
offset and moves to later segments until an entry's ``last_stable_offset`` reaches the upper
bound: every transaction starting below it ended at or before that marker.

The file is created on the first entry (most segments never have one) and its entries are read
on first use. Appends write through to the file; ``flush`` makes them durable with the segment.
After an unclean shutdown the loader rebuilds the index of every recovered segment from the
producer state it replays, so a torn tail here costs a rebuild, never a wrong answer.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from kafkalike.log.storage import IMMEDIATE, LogDirectory, SegmentFile, Syncs

if TYPE_CHECKING:
    from kafkalike.log.segment import LogSegment

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")


class TxnIndexCorrupt(Exception):
    """A transaction index file whose size or entries cannot be right; the segment is recovered."""


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return _ENTRY.pack(ENTRY_VERSION, *self)


class TransactionIndex:
    ENTRY_SIZE = _ENTRY.size

    def __init__(self, directory: LogDirectory, base_offset: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.name = f"{base_offset:020d}{TXN_INDEX_SUFFIX}"
        self._entries: list[AbortedTxn] | None = None
        self._file: SegmentFile | None = None
        self._unflushed = False  # written since the last flush (the file may be closed since)
        self._created = False  # the file was created or removed: the directory needs a sync too

    # ---- reading ----------------------------------------------------------------------------

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        data = self.directory.read_document(self.name)
        if not data:
            return []
        usable = len(data) - len(data) % self.ENTRY_SIZE  # a torn last entry is ignored
        out: list[AbortedTxn] = []
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data[:usable]):
            if version != ENTRY_VERSION or last < self.base_offset or (out and last <= out[-1].last_offset):
                break  # what follows cannot be trusted
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    def sanity_check(self) -> None:
        """Kafka's sanityCheck, on the file size only (cheap at start-up): whole entries."""
        if not self.directory.exists(self.name):
            return
        size = self.directory.open_file(self.name, create=False).size if self._file is None else self._file.size
        if size % self.ENTRY_SIZE:
            raise TxnIndexCorrupt(f"{self.name}: size {size} is not a multiple of {self.ENTRY_SIZE}")

    def __len__(self) -> int:
        return len(self.entries)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``, and whether
        the search is complete (no later segment can hold another one that overlaps)."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    # ---- writing ----------------------------------------------------------------------------

    def _writer(self) -> SegmentFile:
        if self._file is None:
            self._created = self._created or not self.directory.exists(self.name)
            self._file = self.directory.open_file(self.name, create=True)
        self._unflushed = True
        return self._file

    def append(self, entry: AbortedTxn) -> None:
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset:
            raise ValueError(f"{self.name}: abort marker at {entry.last_offset} is not after {entries[-1].last_offset}")
        self._writer().append(entry.pack())
        entries.append(entry)

    def rewrite(self, entries: list[AbortedTxn]) -> None:
        """Replace every entry (a cleaned segment taking over its sources' entries)."""
        self.release()
        self.directory.delete(self.name)
        self._entries = []
        for entry in entries:
            self.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after ``offset`` (the log is cut there)."""
        entries = self.entries
        keep = 0
        while keep < len(entries) and entries[keep].last_offset < offset:
            keep += 1
        if keep == len(entries):
            return
        del entries[keep:]
        if keep == 0:
            self.reset()
        else:
            self._writer().truncate(keep * self.ENTRY_SIZE)

    def reset(self) -> None:
        """Forget every entry and remove the file (recovery rebuilds it)."""
        self.release()
        if self.directory.exists(self.name):
            self.directory.delete(self.name)
            self._unflushed = self._created = True  # the removal must reach the disk with the next flush
        self._entries = []

    def flush(self, syncs: Syncs = IMMEDIATE) -> None:
        """fsync what was written since the last flush, even if the file was released since."""
        if not self._unflushed:
            return
        if self.directory.exists(self.name):
            file = self._file or self.directory.open_file(self.name, create=True)
            try:
                syncs.file(file)
            finally:
                if file is not self._file:
                    file.close()  # a deferred sync holds a descriptor of its own
        if self._created:
            syncs.directory(self.directory)
        self._unflushed = self._created = False

    def release(self) -> None:
        """Close the file (entries stay cached); the next append reopens it."""
        if self._file is not None:
            self._file.close()
            self._file = None


def collect_aborted(segments: Sequence[LogSegment], start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping ``[start_offset, upper_bound_offset)`` from the indexes
    of ``segments`` (the one holding ``start_offset`` first), stopping once one is complete."""
    found: list[AbortedTxn] = []
    for segment in segments:
        entries, complete = segment.txn_index.collect(start_offset, upper_bound_offset)
        found += entries
        if complete:
            break
    return found


def retained_aborts(new: LogSegment, old: Sequence[LogSegment]) -> list[AbortedTxn]:
    """The entries of ``old`` whose abort marker survived cleaning into ``new`` (an entry without
    its marker would make a consumer drop that producer's later batches)."""
    entries = [e for segment in old for e in segment.txn_index.entries]
    if not entries:
        return []
    markers = {(h.producer_id, h.base_offset) for _, h in new.batches() if h.is_control}
    return [e for e in entries if (e.producer_id, e.last_offset) in markers]
