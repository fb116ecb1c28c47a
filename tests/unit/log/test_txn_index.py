"""Transaction indexes: Kafka's ``.txnindex`` format, what a read_committed fetch gets from them,
and how they follow their segment through recovery, truncation, retention and compaction."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from test_cleaner_support import STORAGES, Storage, end_txn, produce

from kafkalike.log import LogCleaner, LogConfig, MemoryLogDirectory, PartitionLog
from kafkalike.log.txn_index import AbortedTxn, TransactionIndex, TxnIndexCorrupt

SMALL = LogConfig(segment_bytes=400, index_interval_bytes=64, file_delete_delay_ms=0, retention_ms=1000)


def txn(log: PartitionLog, pid: int, n: int, now_ms: int = 0, key: bytes = b"k") -> int:
    """One transactional batch of ``n`` records from producer ``pid``; its first offset."""
    return produce(
        log, [(key, b"v")] * n, now_ms, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True
    )


def entries(log: PartitionLog) -> list[list[AbortedTxn]]:
    return [list(s.txn_index.entries) for s in log.segments]


# -- the index on its own -----------------------------------------------------------------------


def test_file_format_is_kafkas() -> None:
    directory = MemoryLogDirectory()
    index = TransactionIndex(directory, 100)
    index.append(AbortedTxn(7, 100, 105, 106))
    index.append(AbortedTxn(8, 101, 110, 111))
    data = directory.read_document("00000000000000000100.txnindex")
    assert data == struct.pack(">hqqqq", 0, 7, 100, 105, 106) + struct.pack(">hqqqq", 0, 8, 101, 110, 111)
    assert TransactionIndex(directory, 100).entries == index.entries


def test_collect_stops_at_an_entry_whose_lso_reaches_the_upper_bound() -> None:
    index = TransactionIndex(MemoryLogDirectory(), 0)
    index.append(AbortedTxn(1, 0, 5, 3))  # another transaction still open below 3
    index.append(AbortedTxn(2, 3, 8, 9))
    index.append(AbortedTxn(3, 9, 12, 13))
    assert index.collect(6, 9) == ([AbortedTxn(2, 3, 8, 9)], True)
    assert index.collect(0, 4) == ([AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 8, 9)], True)
    assert index.collect(13, 20) == ([], False)


def test_appends_must_follow_the_last_marker() -> None:
    index = TransactionIndex(MemoryLogDirectory(), 0)
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 1, 5, 6))


def test_truncate_reset_and_a_torn_tail() -> None:
    directory = MemoryLogDirectory()
    index = TransactionIndex(directory, 0)
    for i in range(3):
        index.append(AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6))
    index.truncate_to(16)  # the marker at 25 goes
    assert [e.producer_id for e in index.entries] == [0, 1]
    assert [e.producer_id for e in TransactionIndex(directory, 0).entries] == [0, 1]
    torn = directory.read_document(index.name)
    assert torn is not None
    directory.write_document(index.name, torn + b"\x00\x00\x01")
    with pytest.raises(TxnIndexCorrupt):
        TransactionIndex(directory, 0).sanity_check()
    assert len(TransactionIndex(directory, 0).entries) == 2  # the torn entry is ignored
    index.reset()
    assert not directory.exists(index.name) and index.entries == []


# -- written by the log -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", STORAGES)
def test_an_abort_marker_adds_an_entry_a_commit_does_not(kind: str, tmp_path: Path) -> None:
    log = Storage(kind, tmp_path).open(LogConfig())
    first = txn(log, 1, 3)
    produce(log, [(b"x", b"plain")], 0)
    txn(log, 2, 2)
    assert log.last_stable_offset == first
    abort = end_txn(log, commit=False, producer_id=1, producer_epoch=0, now_ms=1)
    # Producer 2's transaction is still open from offset 4: that is the LSO in the entry.
    assert entries(log) == [[AbortedTxn(1, first, abort, 4)]]
    commit = end_txn(log, commit=True, producer_id=2, producer_epoch=0, now_ms=2)
    assert entries(log) == [[AbortedTxn(1, first, abort, 4)]]
    assert log.last_stable_offset == commit + 1 == log.log_end_offset
    late = txn(log, 3, 1)
    late_abort = end_txn(log, commit=False, producer_id=3, producer_epoch=0, now_ms=3)
    assert entries(log)[0][-1] == AbortedTxn(3, late, late_abort, late_abort + 1)


def test_aborted_transactions_of_a_read_cover_the_returned_batches_across_segments() -> None:
    log = Storage("memory", Path()).open(SMALL)
    starts = {}
    for pid in range(1, 9):
        starts[pid] = txn(log, pid, 4, key=b"k%d" % pid)
        end_txn(log, commit=pid % 2 == 0, producer_id=pid, producer_epoch=0, now_ms=pid)
    assert len(log.segments) > 2
    assert sum(len(e) for e in entries(log)) == 4
    everything = log.read(0, 1 << 20, max_offset=log.last_stable_offset)
    assert [(a.producer_id, a.first_offset) for a in log.aborted_transactions(0, everything)] == [
        (pid, starts[pid]) for pid in (1, 3, 5, 7)
    ]
    # A small read from the middle reports only what overlaps it.
    offset = starts[5]
    part = log.read(offset, 1, max_offset=log.last_stable_offset)
    assert [a.producer_id for a in log.aborted_transactions(offset, part)] == [5]
    assert log.aborted_transactions(offset, log.read(log.log_end_offset, 100)) == []


def test_the_entry_lives_in_the_marker_segment_and_is_found_from_the_data_segment() -> None:
    log = Storage("memory", Path()).open(LogConfig())
    first = txn(log, 1, 2)
    log.roll(5)
    produce(log, [(b"x", b"plain")], 5)
    abort = end_txn(log, commit=False, producer_id=1, producer_epoch=0, now_ms=6)
    assert entries(log) == [[], [AbortedTxn(1, first, abort, abort + 1)]]
    read = log.read(first, 1 << 20, max_offset=log.last_stable_offset)
    assert [a.first_offset for a in log.aborted_transactions(first, read)] == [first]


# -- following the segment --------------------------------------------------------------------


def _aborting_log(storage: Storage) -> PartitionLog:
    log = storage.open(SMALL)
    for pid in range(1, 7):
        txn(log, pid, 3, key=b"k%d" % pid)
        end_txn(log, commit=pid % 3 == 0, producer_id=pid, producer_epoch=0, now_ms=pid)
    return log


@pytest.mark.parametrize("kind", STORAGES)
def test_a_clean_restart_reads_the_index_files(kind: str, tmp_path: Path) -> None:
    storage = Storage(kind, tmp_path)
    log = _aborting_log(storage)
    before = entries(log)
    log.close()
    again = storage.open(SMALL, clean_shutdown=True)
    assert again.recovered_segments == 0
    assert entries(again) == before


@pytest.mark.parametrize("kind", STORAGES)
def test_recovery_rebuilds_lost_or_torn_indexes(kind: str, tmp_path: Path) -> None:
    storage = Storage(kind, tmp_path)
    log = _aborting_log(storage)
    before = entries(log)
    assert sum(map(len, before)) == 4
    log.flush()
    for name in storage.names():
        if name.endswith(".txnindex"):
            storage.directory.delete(name)
    again = storage.open(SMALL, clean_shutdown=False)  # a crash: every segment is revalidated
    assert entries(again) == before


@pytest.mark.parametrize("kind", STORAGES)
def test_a_torn_index_after_a_clean_shutdown_forces_that_segment_s_recovery(kind: str, tmp_path: Path) -> None:
    storage = Storage(kind, tmp_path)
    log = _aborting_log(storage)
    before = entries(log)
    log.close()
    name = next(n for n in storage.names() if n.endswith(".txnindex"))
    data = storage.directory.read_document(name)
    assert data is not None
    storage.directory.write_document(name, data[:-5])
    again = storage.open(SMALL, clean_shutdown=True)
    assert again.recovered_segments >= 1
    assert entries(again) == before


def test_truncation_drops_entries_of_removed_markers() -> None:
    log = Storage("memory", Path()).open(LogConfig())
    txn(log, 1, 2)
    abort = end_txn(log, commit=False, producer_id=1, producer_epoch=0, now_ms=1)
    txn(log, 2, 2)
    end_txn(log, commit=False, producer_id=2, producer_epoch=0, now_ms=2)
    assert len(entries(log)[0]) == 2
    log.truncate_to(abort + 1, now_ms=3)
    assert [e.producer_id for e in entries(log)[0]] == [1]


def test_retention_deletes_the_index_with_its_segment() -> None:
    storage = Storage("memory", Path())
    log = _aborting_log(storage)
    names = storage.names()
    assert any(n.endswith(".txnindex") for n in names)
    log.apply_retention(10_000_000)
    log.delete_due_files(10_000_000)
    remaining = {n.split(".")[0] for n in storage.names() if n.endswith(".log")}
    assert all(n.split(".")[0] in remaining for n in storage.names() if n.endswith(".txnindex"))


def test_compaction_keeps_entries_only_for_markers_it_keeps() -> None:
    config = LogConfig(cleanup_policy="compact", segment_bytes=1024, index_interval_bytes=64, delete_retention_ms=1_000)
    log = Storage("memory", Path()).open(config)
    txn(log, 1, 2, key=b"a")
    abort = end_txn(log, commit=False, producer_id=1, producer_epoch=0, now_ms=1)
    produce(log, [(b"d", b"committed")], 2, producer_id=1, producer_epoch=0, base_sequence=2, transactional=True)
    end_txn(log, commit=True, producer_id=1, producer_epoch=0, now_ms=3)
    log.roll(5)
    produce(log, [(b"tail", b"t")], 5)
    assert entries(log)[0] == [AbortedTxn(1, 0, abort, abort + 1)]
    cleaner = LogCleaner()
    cleaner.clean_log(log, 100)  # the aborted data goes, the marker stays this pass
    assert [e.last_offset for e in entries(log)[0]] == [abort]
    cleaner.clean_log(log, 200)  # the marker gets its delete horizon
    assert [e.last_offset for e in entries(log)[0]] == [abort]
    cleaner.clean_log(log, 1_300)  # ... and goes: so does its entry
    assert entries(log)[0] == []
    assert not any(n.endswith(".txnindex") for n in log.directory.list_names())
