"""``SyncTracker``: coordinator appends that count only once a sync covering them succeeded, and a
failed sync that cuts the log back to what is durable, taking every append after it."""

from __future__ import annotations

import errno
from pathlib import Path

from kafkalike.log import FileLogDirectory, LogConfig, MemoryLogDirectory, PartitionLog
from kafkalike.log.coordinator_log import Appended, CoordinatorLogStore, SyncTracker, read_records
from kafkalike.protocol.records import Record, build_batch
from kafkalike.testing.faulty_storage import DiskFaults

NOW = 1_000_000


class Harness:
    """A file-backed coordinator partition behind injected faults, its tracker and store."""

    def __init__(self, tmp_path: Path, *, memory: bool = False) -> None:
        self.faults = DiskFaults()
        inner = MemoryLogDirectory("__c-0") if memory else FileLogDirectory(tmp_path / "__c-0")
        self.log = PartitionLog.open(self.faults.wrap(inner), LogConfig(), NOW)
        self.cut: list[int] = []
        self.durable: list[int] = []
        self.behind: list[int] = []
        self.tracker = SyncTracker(self.cut.append, self.durable.append, self.behind.append)
        self.store = CoordinatorLogStore(lambda p: (self.log, 0), tracker=self.tracker)

    def write(self, key: bytes) -> Appended:
        """The append, as a waiter sees it: the partition's log end right after it."""
        self.store.append(0, [(key, b"v")], NOW)
        return Appended(0, self.log.log_end_offset, self.tracker.partitions[0].cuts)

    def sync(self) -> None:
        syncs, ticket = self.tracker.prepare(0)
        error = None
        if not isinstance(ticket, OSError):
            try:
                syncs.run()
            except OSError as exc:
                error = exc
        self.tracker.complete(0, ticket, error, NOW)

    def keys(self) -> list[bytes]:
        return [key for _, (key, _) in read_records(self.log, skip_transactional=False)]


def test_an_append_is_durable_only_after_a_sync_that_covers_it(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    first = h.write(b"a")
    assert h.tracker.log_end(0) == first
    assert h.tracker.is_durable(first) is None and h.behind == [0] and h.durable == []
    syncs, ticket = h.tracker.prepare(0)
    second = h.write(b"b")  # made while the sync is on its thread: not covered by it
    syncs.run()
    h.tracker.complete(0, ticket, None, NOW)
    assert h.tracker.is_durable(first) is True
    assert h.tracker.is_durable(second) is None
    assert h.tracker.behind() == [0]
    h.sync()
    assert h.tracker.is_durable(second) is True and h.tracker.behind() == [] and h.tracker.log_end(0) is None
    assert h.log.recovery_point == h.log.log_end_offset == 2
    assert h.durable == [0, 0]


def test_a_failed_sync_cuts_back_to_the_durable_end_taking_every_append_after_it(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    kept = h.write(b"kept")
    h.sync()
    lost = h.write(b"lost")
    syncs, ticket = h.tracker.prepare(0)
    behind = h.write(b"behind")  # in the log after the failing one
    syncs.discard()  # as when ``syncs.run`` raised on its thread:
    h.tracker.complete(0, ticket, OSError(errno.EIO, "Input/output error"), NOW)
    assert h.cut == [0]
    assert h.tracker.is_durable(kept) is True
    assert h.tracker.is_durable(lost) is False and h.tracker.is_durable(behind) is False
    assert h.keys() == [b"kept"] and h.log.log_end_offset == 1
    after = h.write(b"next")  # the next append takes the cut offsets and holds
    h.sync()
    assert h.tracker.is_durable(after) is True and h.keys() == [b"kept", b"next"]
    assert h.tracker.is_durable(lost) is False  # an old append never counts again at the same offset


def test_an_abandoned_partition_fails_what_was_not_durable_yet_but_keeps_its_log(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    kept = h.write(b"kept")
    h.sync()
    waiting = h.write(b"waiting")
    h.tracker.abandon(0)  # its coordinator shard was unloaded
    assert h.tracker.is_durable(kept) is True
    assert h.tracker.is_durable(waiting) is False
    assert h.cut == [] and h.keys() == [b"kept", b"waiting"]  # nothing cut: the records stay in the log
    h.sync()  # its fsync still runs
    assert h.tracker.is_durable(waiting) is False and h.log.recovery_point == 2
    after = h.write(b"after")  # the next shard's appends count as usual
    h.sync()
    assert h.tracker.is_durable(after) is True


def test_a_sync_that_cannot_even_be_prepared_is_a_failure_too(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    appended = h.write(b"a")
    h.faults.fail("flush", errno.ENOSPC, name=".log")  # the test kit fails a deferred fsync at collection
    syncs, ticket = h.tracker.prepare(0)
    assert isinstance(ticket, OSError) and not syncs
    h.tracker.complete(0, ticket, None, NOW)
    assert h.tracker.is_durable(appended) is False and h.cut == [0] and h.keys() == []


def test_in_memory_appends_are_durable_at_once_with_nothing_to_sync(tmp_path: Path) -> None:
    h = Harness(tmp_path, memory=True)
    appended = h.write(b"a")
    assert h.tracker.is_durable(appended) is True and h.tracker.log_end(0) is None
    assert h.tracker.behind() == [] and h.behind == [] and h.durable == [0]


def test_what_a_log_held_when_first_seen_counts_as_durable(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.log.append_durably(bytearray(_batch(b"old")), leader_epoch=0, now_ms=NOW)
    h.log.recovery_point = 0  # as after a crash whose checkpoint lagged: the data was replayed all the same
    h.write(b"new")
    h.faults.fail("flush", errno.EIO, name=".log")
    h.sync()
    assert h.keys() == [b"old"]  # the cut stops at what the coordinator had loaded


def _batch(key: bytes) -> bytes:
    return build_batch([Record(key=key, value=b"v")], base_timestamp=NOW)
