"""The replicated log as the quorum sees it, and an in-memory version for tests and simulation.

The node appends and truncates through this interface; bytes are *written* at once and become
*durable* only when the driver flushes them (``flush``), which it does when the node asks
(:class:`~kafkalike.raft.node.FlushLog`) and reports back with ``RaftNode.durable``. A crash keeps
only durable bytes. A truncation is durable at once: Kafka truncates segment files in place, and a
crash must not resurrect a tail the node has already disowned (a node truncates only a tail that the
leader's log does not have, so nothing it acknowledged).

Offsets are dense from ``start_offset``; batches are Kafka record batches (magic 2) whose
``partition_leader_epoch`` is the epoch of the leader that wrote them. Snapshots (KIP-630) are
identified by (end offset, epoch of the last record they cover); once the state machine has written
one of committed data, the log before it is deleted and its start offset is the snapshot's end. A
snapshot is durable once created (Kafka writes it aside and renames it into place), and so is a
deletion before one.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple, Protocol

from kafkalike.protocol.errors import ProtocolError
from kafkalike.protocol.records import batch_crc_ok, iter_batches


class OffsetAndEpoch(NamedTuple):
    offset: int
    epoch: int


class LogBatch(NamedTuple):
    base_offset: int
    last_offset: int
    epoch: int
    data: bytes
    serial: int = 0  # order of writing, to tell which bytes a flush started before covers


class FlushToken(NamedTuple):
    end_offset: int
    serial: int


class RaftLogError(Exception):
    """An append that would break the log's order (wrong base offset, falling epoch)."""


class RaftLog(Protocol):
    @property
    def start_offset(self) -> int: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def durable_end_offset(self) -> int: ...
    def last_fetched_epoch(self) -> int: ...
    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch: ...
    def epoch_at(self, offset: int) -> int | None: ...
    def is_batch_end(self, offset: int) -> bool: ...
    def append(self, data: bytes) -> LogBatch: ...
    def truncate_to(self, offset: int) -> None: ...
    def read(self, offset: int, max_bytes: int) -> bytes: ...
    def flush(self, offset: int) -> None: ...
    def latest_snapshot_id(self) -> OffsetAndEpoch | None: ...
    def earliest_snapshot_id(self) -> OffsetAndEpoch | None: ...
    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None: ...
    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None: ...
    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None: ...
    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> bool: ...


class MemoryRaftLog:
    """A :class:`RaftLog` in memory; ``crash`` drops what was written but not flushed."""

    def __init__(self) -> None:
        self._batches: list[LogBatch] = []
        self._bases: list[int] = []
        # (epoch, start offset) for each epoch in the log, rising: Kafka's leader epoch cache.
        self._epochs: list[OffsetAndEpoch] = []
        self._durable_end = 0
        self._serial = 0
        self._start = 0
        self._snapshots: dict[OffsetAndEpoch, bytes] = {}
        self.installed_snapshots = 0  # snapshots downloaded from a leader (never by a leader)

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._batches[-1].last_offset + 1 if self._batches else self._start

    @property
    def durable_end_offset(self) -> int:
        return self._durable_end

    @property
    def batches(self) -> list[LogBatch]:
        return self._batches

    def batch_index(self, offset: int) -> int:
        """The index in ``batches`` of the first batch at or after ``offset``."""
        return bisect.bisect_left(self._bases, offset)

    def last_fetched_epoch(self) -> int:
        if self._batches:
            return self._batches[-1].epoch
        return self._start_epoch()

    def _start_epoch(self) -> int:
        """The epoch of the last record before the log start: the snapshot's there (0 for none)."""
        earliest = self.earliest_snapshot_id()
        return earliest.epoch if earliest is not None and earliest.offset == self._start else 0

    def is_batch_end(self, offset: int) -> bool:
        """Whether a batch of the log ends just before ``offset``."""
        i = bisect.bisect_right(self._bases, offset - 1) - 1
        return 0 <= i < len(self._batches) and self._batches[i].last_offset == offset - 1

    def epoch_at(self, offset: int) -> int | None:
        """The epoch of the record at ``offset``, if the log holds it."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if 0 <= i < len(self._batches) and self._batches[i].last_offset >= offset:
            return self._batches[i].epoch
        return None

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch at most ``epoch`` in the log and where it ends (where the next epoch
        starts, or the log end); the snapshot at the log start when the log has no such epoch."""
        found = None
        for i, entry in enumerate(self._epochs):
            if entry.epoch > epoch:
                break
            found = i
        if found is None:
            # Before the log's first epoch: the snapshot at the log start ends there.
            return OffsetAndEpoch(self._start, self._start_epoch())
        next_start = self._epochs[found + 1].offset if found + 1 < len(self._epochs) else self.end_offset
        return OffsetAndEpoch(next_start, self._epochs[found].epoch)

    def append(self, data: bytes) -> LogBatch:
        """Append the whole batches of ``data`` (a fetch response may end with part of one, which is
        left out), the first at the log end; returns the last. Checks each batch's CRC first."""
        last = None
        try:
            batches = list(iter_batches(data, partial_ok=True))
        except ProtocolError as exc:
            raise RaftLogError(f"records do not parse: {exc}") from exc
        for pos, header in batches:
            if not batch_crc_ok(data, pos, header):
                raise RaftLogError(f"batch at {header.base_offset} fails its CRC")
        for pos, header in batches:
            if header.base_offset != self.end_offset:
                raise RaftLogError(f"batch at {header.base_offset} appended at log end {self.end_offset}")
            epoch = header.partition_leader_epoch
            if epoch < self.last_fetched_epoch():
                raise RaftLogError(f"batch epoch {epoch} below the log's last epoch {self.last_fetched_epoch()}")
            if not self._epochs or self._epochs[-1].epoch != epoch:
                self._epochs.append(OffsetAndEpoch(header.base_offset, epoch))
            self._serial += 1
            last = LogBatch(
                header.base_offset, header.last_offset, epoch, bytes(data[pos : pos + header.size]), self._serial
            )
            self._batches.append(last)
            self._bases.append(header.base_offset)
        if last is None:
            raise RaftLogError("append of no batches")
        return last

    def truncate_to(self, offset: int) -> None:
        """Drop every batch from the one holding ``offset`` on (batches are whole: the cut is at a
        batch boundary, as the leader's diverging offsets always are)."""
        offset = max(offset, self._start)
        keep = bisect.bisect_left(self._bases, offset)
        if keep < len(self._batches) and self._batches[keep].base_offset < offset:
            keep += 1
        del self._batches[keep:]
        del self._bases[keep:]
        end = self.end_offset
        while self._epochs and self._epochs[-1].offset >= end:
            self._epochs.pop()
        self._durable_end = min(self._durable_end, end)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset``, at least one, then up to ``max_bytes``."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if offset < self._start or i < 0 or i >= len(self._batches) or self._batches[i].last_offset < offset:
            return b""
        out = [self._batches[i].data]
        size = len(out[0])
        for batch in self._batches[i + 1 :]:
            if size + len(batch.data) > max_bytes:
                break
            out.append(batch.data)
            size += len(batch.data)
        return b"".join(out)

    def flush(self, offset: int) -> None:
        self._durable_end = max(self._durable_end, min(offset, self.end_offset))

    def flush_token(self) -> FlushToken:
        """What a flush started now would cover, for a flush that completes later."""
        return FlushToken(self.end_offset, self._serial)

    def complete_flush(self, token: FlushToken) -> None:
        """Make durable what ``token`` covered and the log still holds: batches written before it
        that no truncation has since replaced."""
        i = bisect.bisect_left(self._bases, self._durable_end)
        while i < len(self._batches):
            batch = self._batches[i]
            if batch.serial > token.serial or batch.last_offset >= token.end_offset:
                break
            self._durable_end = batch.last_offset + 1
            i += 1

    def crash(self) -> None:
        """Lose everything not flushed."""
        self.truncate_to(self._durable_end)

    # -- snapshots --------------------------------------------------------------------------------

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return max(self._snapshots) if self._snapshots else None

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        return min(self._snapshots) if self._snapshots else None

    def snapshot_ids(self) -> list[OffsetAndEpoch]:
        return sorted(self._snapshots)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        return self._snapshots.get(snapshot_id)

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Keep a snapshot the state machine wrote of the log before ``snapshot_id.offset``."""
        if not self._start <= snapshot_id.offset <= self._durable_end:
            raise RaftLogError(f"snapshot {snapshot_id} outside the durable log [{self._start}, {self._durable_end})")
        self._snapshots[snapshot_id] = data

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Delete the log before a snapshot, and the older snapshots: it becomes the log start."""
        offset = snapshot_id.offset
        if snapshot_id not in self._snapshots or offset <= self._start:
            return
        drop = bisect.bisect_left(self._bases, offset)
        del self._batches[:drop]
        del self._bases[:drop]
        self._start = offset
        kept = [e for e in self._epochs if e.offset >= offset]
        older = [e for e in self._epochs if e.offset < offset]
        if older and (not kept or kept[0].offset > offset) and self._batches:
            kept.insert(0, OffsetAndEpoch(offset, older[-1].epoch))  # the epoch that runs on past the cut
        self._epochs = kept
        self._snapshots = {i: d for i, d in self._snapshots.items() if i >= snapshot_id}
        self._durable_end = max(self._durable_end, offset)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> bool:
        """A snapshot downloaded from the leader. When it reaches past this log (a later end, or a
        later epoch than the log's last), the log restarts at it, empty (Kafka's
        truncateToLatestSnapshot) and True is returned; otherwise it is only kept."""
        self._snapshots[snapshot_id] = data
        self.installed_snapshots += 1
        if snapshot_id.offset <= self.end_offset and snapshot_id.epoch <= self.last_fetched_epoch():
            return False
        self._batches.clear()
        self._bases.clear()
        self._epochs.clear()
        self._start = snapshot_id.offset
        self._durable_end = snapshot_id.offset
        self._snapshots = {i: d for i, d in self._snapshots.items() if i >= snapshot_id}
        return True
