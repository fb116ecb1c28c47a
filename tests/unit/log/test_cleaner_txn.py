"""Log compaction and producers: aborted transactions, markers, and the producer state a log keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cleaner_support import STORAGES, Storage, batches, end_txn, produce, rows

from kafkalike.log import LogCleaner, OutOfOrderSequence, PartitionLog
from kafkalike.protocol.records import DELETE_HORIZON_MASK, Record, RecordBatchHeader, build_batch


def markers(log: PartitionLog) -> list[tuple[int, bool]]:
    """(offset, has a delete horizon) of every control batch still in the log."""
    return [(h.base_offset, bool(h.attributes & DELETE_HORIZON_MASK)) for h, _records in batches(log) if h.is_control]


def test_aborted_records_go_and_their_marker_follows_after_the_horizon(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    produce(
        log,
        [(b"a", b"aborted"), (b"b", b"aborted")],
        0,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    abort = end_txn(log, commit=False, producer_id=1, producer_epoch=0, now_ms=1)
    produce(log, [(b"d", b"committed")], 2, producer_id=1, producer_epoch=0, base_sequence=2, transactional=True)
    commit = end_txn(log, commit=True, producer_id=1, producer_epoch=0, now_ms=3)
    produce(log, [(b"c", b"plain")], 4)
    log.roll(5)
    produce(log, [(b"tail", b"t")], 5)
    cleaner = LogCleaner()

    cleaner.clean_log(log, 100)
    assert rows(log) == [(3, b"d", b"committed"), (5, b"c", b"plain"), (6, b"tail", b"t")]
    assert markers(log) == [(abort, False), (commit, False)]  # the abort marker saw its data this pass
    assert log.last_stable_offset == log.log_end_offset

    cleaner.clean_log(log, 200)  # no data of the aborted transaction left: the marker gets a horizon
    assert markers(log) == [(abort, True), (commit, False)]
    cleaner.clean_log(log, 1_199)
    assert markers(log) == [(abort, True), (commit, False)]
    cleaner.clean_log(log, 1_200)
    assert markers(log) == [(commit, False)]  # the committed data is still there, so is its marker
    assert rows(log) == [(3, b"d", b"committed"), (5, b"c", b"plain"), (6, b"tail", b"t")]


def test_a_commit_marker_goes_once_its_records_are_superseded(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    produce(log, [(b"a", b"1")], 0, producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    commit = end_txn(log, commit=True, producer_id=1, producer_epoch=0, now_ms=1)
    produce(log, [(b"b", b"from 1")], 2, producer_id=1, producer_epoch=0, base_sequence=1)  # its last batch
    produce(log, [(b"a", b"2")], 3)
    log.roll(4)
    produce(log, [(b"tail", b"t")], 4)
    cleaner = LogCleaner()
    cleaner.clean_log(log, 100)
    assert markers(log) == [(commit, False)]  # this pass still read the transaction's batch
    cleaner.clean_log(log, 100)
    assert markers(log) == [(commit, True)]
    cleaner.clean_log(log, 1_100)
    assert markers(log) == []
    assert rows(log) == [(2, b"b", b"from 1"), (3, b"a", b"2"), (4, b"tail", b"t")]


def test_aborted_records_go_even_when_the_marker_is_in_the_active_segment(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    produce(log, [(b"x", b"kept")], 0)
    produce(log, [(b"a", b"aborted")], 1, producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    produce(log, [(b"y", b"kept")], 2)
    log.roll(3)
    end_txn(log, commit=False, producer_id=1, producer_epoch=0, now_ms=3)
    LogCleaner().clean_log(log, 100)
    assert rows(log) == [(0, b"x", b"kept"), (2, b"y", b"kept")]
    # The producer's last batch stays, emptied, so its sequence survives a rebuild of producer state.
    emptied = [h for h, records in batches(log) if h.is_transactional and not h.is_control]
    assert [(h.base_offset, h.records_count, h.base_sequence) for h in emptied] == [(1, 0, 0)]


def test_an_open_transaction_is_never_cleaned(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    produce(log, [(b"a", b"old")], 0)
    open_at = produce(
        log, [(b"a", b"pending")], 1, producer_id=1, producer_epoch=0, base_sequence=0, transactional=True
    )
    log.roll(2)
    produce(log, [(b"a", b"new")], 2)
    log.roll(3)
    produce(log, [(b"tail", b"t")], 3)
    before = rows(log)
    stats = LogCleaner().clean_log(log, 100)
    assert stats.end_offset <= open_at
    assert rows(log) == before


@pytest.mark.parametrize("kind", STORAGES)
def test_an_idempotent_producers_last_batch_survives_as_an_empty_batch(tmp_path: Path, kind: str) -> None:
    storage = Storage(kind, tmp_path)
    log = storage.open()
    produce(log, [(b"k", b"1")], 0, producer_id=9, producer_epoch=2, base_sequence=0)
    produce(log, [(b"k", b"2"), (b"j", b"2")], 1, producer_id=9, producer_epoch=2, base_sequence=1)
    produce(log, [(b"k", b"3"), (b"j", b"3")], 2)
    log.roll(3)
    produce(log, [(b"tail", b"t")], 3)
    LogCleaner().clean_log(log, 100)
    kept: list[RecordBatchHeader] = [h for h, _records in batches(log) if h.producer_id == 9]
    assert [(h.base_offset, h.last_offset, h.base_sequence, h.records_count) for h in kept] == [(1, 2, 1, 0)]
    log.close()
    for name in storage.names():  # no snapshots: producer state comes from the batches alone
        if name.endswith(".snapshot"):
            storage.directory.delete(name)
    reopened = storage.open()
    retry = bytearray(
        build_batch(
            [Record(key=b"k", value=b"2"), Record(key=b"j", value=b"2")],
            producer_id=9,
            producer_epoch=2,
            base_sequence=1,
        )
    )
    assert reopened.append(retry, leader_epoch=0, now_ms=10).duplicate
    with pytest.raises(OutOfOrderSequence):
        produce(reopened, [(b"k", b"gap")], 10, producer_id=9, producer_epoch=2, base_sequence=5)
    produce(reopened, [(b"k", b"next")], 10, producer_id=9, producer_epoch=2, base_sequence=3)


def test_a_producers_last_marker_is_emptied_not_removed_and_then_left_alone(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    produce(log, [(b"a", b"aborted")], 0, producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    abort = end_txn(log, commit=False, producer_id=1, producer_epoch=1, now_ms=1)  # aborted on an epoch bump
    produce(log, [(b"b", b"plain")], 2)
    log.roll(3)
    produce(log, [(b"tail", b"t")], 3)
    cleaner = LogCleaner()
    cleaner.clean_log(log, 100)
    cleaner.clean_log(log, 100)
    assert markers(log) == [(abort, True)]
    cleaner.clean_log(log, 1_100)
    # The marker holds the producer's latest epoch (fencing), so it stays, as an empty batch.
    kept = [(h.base_offset, h.producer_epoch, h.records_count) for h, _records in batches(log) if h.is_control]
    assert kept == [(abort, 1, 0)]
    again = cleaner.clean_log(log, 5_000)
    assert again.groups_swapped == 0 and again.next_delete_horizon_ms is None
    assert rows(log) == [(2, b"b", b"plain"), (3, b"tail", b"t")]
