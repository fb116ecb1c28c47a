"""Disk errors on every write site of a partition log: KafkaStorageError, the log as it was, and
writes that succeed again once the cause is gone. Each case runs on the file-backed and the
in-memory storage, behind the fault-injecting directory of the test kit."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest
from logtest_batches import batch_values, make_batch
from test_cleaner_support import end_txn

from kafkalike.log import FileLogDirectory, LogConfig, LogDirectory, LogManager, MemoryLogDirectory, PartitionLog
from kafkalike.log.checkpoint import parse_offset_checkpoint
from kafkalike.log.errors import KafkaStorageError
from kafkalike.log.manager import run_flushes
from kafkalike.log.storage import DeferredSyncs, FileSegmentFile
from kafkalike.log.storage_errors import StorageErrorReporter
from kafkalike.protocol.errors import ErrorCode
from kafkalike.testing.faulty_storage import DiskFaults

ERRNOS = [errno.ENOSPC, errno.EIO, errno.EMFILE, errno.EROFS]
STORAGES = ["file", "memory"]


class Disk:
    """A partition directory behind injected faults, reopenable as after a crash."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.faults = DiskFaults()
        self.memory = MemoryLogDirectory()

    def directory(self) -> LogDirectory:
        inner: LogDirectory = FileLogDirectory(self.tmp_path / "p-0") if self.kind == "file" else self.memory
        return self.faults.wrap(inner)

    def open(self, config: LogConfig) -> PartitionLog:
        return PartitionLog.open(self.directory(), config, 0)


def append(log: PartitionLog, tag: str, n: int = 2, **kwargs: object) -> list[tuple[int, bytes]]:
    values = [f"{tag}-{i}".encode() for i in range(n)]
    result = log.append(make_batch(values, **kwargs), leader_epoch=0, now_ms=0)  # type: ignore[arg-type]
    log.high_watermark = log.log_end_offset
    return [(result.first_offset + i, v) for i, v in enumerate(values)]


def everything(log: PartitionLog) -> list[tuple[int, bytes]]:
    return batch_values(log.read_bytes(log.log_start_offset, 1 << 30))


# Each write site: the config that makes an append reach it, and the rule that breaks it there.
SITES: dict[str, tuple[LogConfig, str, str]] = {
    "segment append": (LogConfig(), "append", ".log"),
    "segment roll (open)": (LogConfig(segment_bytes=300), "open", ".log"),
    "segment roll (index file)": (LogConfig(segment_bytes=300), "open", ".timeindex"),
    "segment roll (producer snapshot)": (LogConfig(segment_bytes=300), "write_document", ".snapshot"),
    "index append at flush": (LogConfig(flush_interval_messages=1, index_interval_bytes=1), "append", ".index"),
    "flush (fsync)": (LogConfig(flush_interval_messages=1), "flush", ".log"),
    "directory sync at flush": (LogConfig(flush_interval_messages=1, segment_bytes=300), "sync", ""),
    "leader epoch checkpoint": (LogConfig(), "write_document", "leader-epoch-checkpoint"),
}


@pytest.mark.parametrize("kind", STORAGES)
@pytest.mark.parametrize("err", ERRNOS, ids=errno.errorcode.get)
@pytest.mark.parametrize("site", SITES)
def test_a_failed_write_leaves_the_log_as_it_was_and_writes_resume(
    kind: str, err: int, site: str, tmp_path: Path
) -> None:
    config, operation, name = SITES[site]
    disk = Disk(kind, tmp_path)
    log = disk.open(config)
    if site == "leader epoch checkpoint":
        acked: list[tuple[int, bytes]] = []  # the first append of an epoch writes the checkpoint
    else:
        acked = append(log, "before", 4) + append(log, "more", 4)
    end, size = log.log_end_offset, log.size_in_bytes
    rule = disk.faults.fail(operation, err, name=name)

    with pytest.raises(KafkaStorageError) as raised:
        append(log, "refused", 4)
    assert disk.faults.injected, "the fault never fired: the site was not reached"
    assert raised.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert errno.errorcode[err] in str(raised.value)
    assert (log.log_end_offset, log.size_in_bytes) == (end, size)
    assert everything(log) == acked

    disk.faults.remove(rule)
    acked += append(log, "after", 4)
    assert acked[-4][0] == end  # no offset was used up by the refused append
    assert everything(log) == acked
    assert log.epoch_cache.latest_epoch == 0

    # Nothing of the refused append survives a crash either (the file storage reopens from disk).
    reopened = PartitionLog.open(disk.directory(), config, 0)
    assert everything(reopened) == acked
    assert reopened.truncated_bytes == 0


@pytest.mark.parametrize(
    ("operation", "name"), [("write_document", ".snapshot"), ("append", ".timeindex"), ("open", ".index")]
)
def test_a_failed_roll_leaves_no_segment_files_for_appends_to_run_past(
    operation: str, name: str, tmp_path: Path
) -> None:
    # A roll nothing forced failed; appends go on into the active segment. An empty segment left
    # at the old log end would put the log end back there at the next start-up.
    disk = Disk("file", tmp_path)
    log = disk.open(LogConfig(index_interval_bytes=1))
    acked = append(log, "a")
    disk.faults.fail(operation, errno.ENOSPC, name=name, times=1)
    with pytest.raises(OSError):
        log.roll(0)
    acked += append(log, "b")
    assert "00000000000000000002.log" not in os.listdir(tmp_path / "p-0")
    log.release()  # as at a crash: nothing flushed
    log = disk.open(LogConfig())
    assert everything(log) == acked
    assert log.log_end_offset == 4
    assert append(log, "c")[0][0] == 4


@pytest.mark.parametrize("kind", STORAGES)
@pytest.mark.parametrize("err", ERRNOS, ids=errno.errorcode.get)
def test_a_failed_transaction_index_append_takes_the_abort_marker_out_again(
    kind: str, err: int, tmp_path: Path
) -> None:
    disk = Disk(kind, tmp_path)
    log = disk.open(LogConfig())
    txn_values = [b"t0", b"t1"]
    first = log.append(
        make_batch(txn_values, producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
        leader_epoch=0,
        now_ms=0,
    ).first_offset
    end = log.log_end_offset
    rule = disk.faults.fail("append", err, name=".txnindex")
    with pytest.raises(KafkaStorageError):
        end_txn(log, commit=False, producer_id=7, producer_epoch=0, now_ms=1)
    assert log.log_end_offset == end
    assert log.last_stable_offset == first  # the transaction is open again, not aborted without its entry
    assert [s.txn_index.entries for s in log.segments] == [[]]
    disk.faults.remove(rule)
    marker = end_txn(log, commit=False, producer_id=7, producer_epoch=0, now_ms=2)
    assert marker == end
    assert [(t.first_offset, t.last_offset) for t in log.collect_aborted_transactions(0, marker + 1)] == [
        (first, marker)
    ]


@pytest.mark.parametrize("kind", STORAGES)
def test_a_flush_failure_whose_undo_fails_too_refuses_writes_and_recovery_cuts_it(kind: str, tmp_path: Path) -> None:
    disk = Disk(kind, tmp_path)
    config = LogConfig(flush_interval_messages=1)
    log = disk.open(config)
    acked = append(log, "before", 3)
    disk.faults.fail("flush", errno.EIO, name=".log")
    disk.faults.fail("truncate", errno.EIO, name=".log")
    with pytest.raises(KafkaStorageError):
        append(log, "refused", 3)
    disk.faults.clear()
    with pytest.raises(KafkaStorageError, match="refuses writes"):
        append(log, "still refused", 1)
    assert everything(log)[: len(acked)] == acked  # reads keep working
    reopened = PartitionLog.open(disk.directory(), config, 0)
    assert everything(reopened)[: len(acked)] == acked
    reopened.truncate_to(acked[-1][0] + 1, now_ms=0)
    assert everything(reopened) == acked


def test_a_short_write_then_enospc_is_cut_from_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "00000000000000000000.log")
    file = FileSegmentFile(path, create=True)
    file.append(b"a" * 100)
    real_pwrite = os.pwrite
    calls = []

    def short_then_full(fd: int, data: bytes | memoryview, offset: int) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_pwrite(fd, bytes(data)[:10], offset)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", short_then_full)
    with pytest.raises(OSError):
        file.append(b"b" * 50)
    assert file.size == 100
    assert os.path.getsize(path) == 100  # the 10 bytes that made it are gone again
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    assert file.append(b"c" * 5) == 100
    assert Path(path).read_bytes() == b"a" * 100 + b"c" * 5
    file.close()


def test_a_torn_tail_that_could_not_be_cut_is_cut_before_the_next_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "00000000000000000000.log")
    file = FileSegmentFile(path, create=True)
    file.append(b"a" * 100)
    real_pwrite, real_ftruncate = os.pwrite, os.ftruncate
    enospc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def short_then_fail(fd: int, data: bytes | memoryview, offset: int) -> int:
        if offset == 100:
            return real_pwrite(fd, bytes(data)[:30], offset)
        raise enospc

    def failing_ftruncate(fd: int, size: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "pwrite", short_then_fail)
    monkeypatch.setattr(os, "ftruncate", failing_ftruncate)
    with pytest.raises(OSError):
        file.append(b"b" * 50)
    assert file.size == 100 and os.path.getsize(path) == 130  # torn, but no read goes past size
    assert file.read(0, 1000) == b"a" * 100
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    monkeypatch.setattr(os, "ftruncate", real_ftruncate)
    file.append(b"c")
    assert Path(path).read_bytes() == b"a" * 100 + b"c"
    file.close()


def test_a_failed_document_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    directory = FileLogDirectory(tmp_path)
    directory.write_document("doc", b"old")
    with pytest.MonkeyPatch.context() as patch:

        def failing_fsync(fd: int) -> None:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        patch.setattr(os, "fsync", failing_fsync)
        with pytest.raises(OSError):
            directory.write_document("doc", b"new")
    assert directory.read_document("doc") == b"old"
    assert sorted(os.listdir(tmp_path)) == ["doc"]


def test_repeated_failures_are_logged_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    reporter = StorageErrorReporter(interval_ms=60_000)
    enospc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    eio = OSError(errno.EIO, os.strerror(errno.EIO))

    def report(exc: OSError, now: int) -> bool:
        return reporter.report("append to", "/d/t-0", exc, now)

    with caplog.at_level(logging.ERROR, logger="kafkalike.log.storage"):
        assert report(enospc, 0)
        assert not any(report(enospc, t) for t in range(1, 1000))
        assert report(eio, 1000)  # another errno is news
        assert report(enospc, 60_000)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert "ENOSPC (No space left on device)" in lines[0]
    assert lines[2].endswith("(999 more since the last report)")


# -- the log manager's periodic work and shutdown -------------------------------------------------


def test_a_failed_checkpoint_write_is_reported_and_tried_again(tmp_path: Path) -> None:
    faults = DiskFaults()
    manager = LogManager([tmp_path], wrap_directory=faults.wrap, checkpoint_interval_ms=0)
    log = manager.get_or_create("c", 0, LogConfig(flush_interval_ms=10), 0)
    log.append(make_batch([b"x"]), leader_epoch=0, now_ms=0)
    rule = faults.fail("write_document", errno.ENOSPC, name="offset-checkpoint")
    manager.flush_due(100)  # does not raise
    assert ("write_document", "recovery-point-offset-checkpoint") in faults.injected
    assert not (tmp_path / "recovery-point-offset-checkpoint").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    faults.remove(rule)
    manager.flush_due(200)
    assert parse_offset_checkpoint((tmp_path / "recovery-point-offset-checkpoint").read_bytes()) == {("c", 0): 1}


@pytest.mark.parametrize("operation", ["rename", "delete", "sync", "write_document"])
def test_retention_and_flushes_survive_disk_errors(tmp_path: Path, operation: str) -> None:
    faults = DiskFaults()
    manager = LogManager([tmp_path], wrap_directory=faults.wrap, checkpoint_interval_ms=0)
    config = LogConfig(segment_bytes=300, retention_bytes=300, flush_interval_ms=10, file_delete_delay_ms=0)
    log = manager.get_or_create("r", 0, config, 0)
    acked = [record for i in range(20) for record in append(log, f"r{i}", 2)]
    faults.fail(operation, errno.EIO)
    manager.flush_due(100)  # neither raises
    manager.run_retention(100)
    assert faults.injected
    faults.clear()
    manager.run_retention(200)
    acked += append(log, "after", 1)
    assert log.log_start_offset > 0
    assert everything(log) == [(o, v) for o, v in acked if o >= log.log_start_offset]
    manager.close_all()
    reopened = LogManager([tmp_path]).get_or_create("r", 0, config, 0)
    assert everything(reopened) == [(o, v) for o, v in acked if o >= reopened.log_start_offset]


def test_shutdown_with_a_failing_disk_leaves_the_dir_marked_for_recovery(tmp_path: Path) -> None:
    faults = DiskFaults()
    manager = LogManager([tmp_path], wrap_directory=faults.wrap)
    good = manager.get_or_create("good", 0, LogConfig(), 0)
    bad = manager.get_or_create("bad", 0, LogConfig(), 0)
    acked = append(good, "g", 2)
    acked_bad = append(bad, "b", 2)
    faults.fail("flush", errno.EIO, name=".log")
    manager.close_all()  # logs one line per failure, raises nothing
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    faults.clear()
    again = LogManager([tmp_path])
    assert everything(again.get_or_create("good", 0, LogConfig(), 0)) == acked
    reopened = again.get_or_create("bad", 0, LogConfig(), 0)
    assert reopened.recovered_segments == 1
    assert everything(reopened) == acked_bad


# -- flushes prepared on the event loop, synced on a worker thread --------------------------------


def test_a_deferred_flush_moves_the_recovery_point_only_to_what_it_synced(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "d-0", LogConfig(), 0)
    append(log, "a", 3)
    syncs = DeferredSyncs()
    ticket = log.prepare_flush(syncs)
    assert syncs.descriptors  # the segment's data file, at least
    append(log, "appended while the sync runs", 2)
    syncs.run()
    log.complete_flush(ticket, 0)
    assert log.recovery_point == 3 < log.log_end_offset
    log.flush()
    assert log.recovery_point == log.log_end_offset


def test_a_truncation_while_a_flush_runs_keeps_the_recovery_point(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "d-0", LogConfig(), 0)
    append(log, "a", 3)
    syncs = DeferredSyncs()
    ticket = log.prepare_flush(syncs)
    log.truncate_to(1, now_ms=0)
    append(log, "rewritten", 2)  # offsets 1-2 again, written after the sync was prepared
    syncs.run()
    log.complete_flush(ticket, 0)
    assert log.recovery_point == 0


def test_a_deferred_sync_keeps_its_files_alive_when_the_log_deletes_them(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "d-0", LogConfig(), 0)
    append(log, "a", 3)
    syncs = DeferredSyncs()
    log.prepare_flush(syncs)
    log.delete()  # closes every descriptor the log had, removes the directory
    syncs.run()  # its own descriptors: no EBADF, no fsync of some other file reusing the number
    assert not syncs.descriptors


def test_the_memory_storage_has_nothing_to_defer() -> None:
    log = PartitionLog.open(MemoryLogDirectory(), LogConfig(segment_bytes=300), 0)
    for i in range(10):
        append(log, f"m{i}", 2)
    syncs = DeferredSyncs()
    ticket = log.prepare_flush(syncs)
    assert not syncs
    log.complete_flush(ticket, 0)
    assert log.recovery_point == log.log_end_offset


@pytest.mark.parametrize("err", ERRNOS, ids=errno.errorcode.get)
def test_a_failed_deferred_flush_leaves_the_recovery_point_and_is_tried_again(tmp_path: Path, err: int) -> None:
    faults = DiskFaults()
    manager = LogManager([tmp_path], wrap_directory=faults.wrap)
    log = manager.get_or_create("f", 0, LogConfig(flush_interval_ms=10), 0)
    append(log, "a", 2)
    rule = faults.fail("flush", err, name=".log")
    prepared = manager.prepare_due_flushes(100)  # the fault fires at collection: nothing prepared
    assert prepared == [] and faults.injected
    faults.remove(rule)
    prepared = manager.prepare_due_flushes(100)
    errors = run_flushes(prepared)
    manager.complete_flushes(prepared, errors, 100)
    assert log.recovery_point == 2
