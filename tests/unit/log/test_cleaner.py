"""Log compaction: what survives a clean, when a log gets cleaned, and reading it afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cleaner_support import (
    CONFIG,
    STORAGES,
    Row,
    Storage,
    batches,
    check_lookups,
    fold,
    latest_per_key,
    produce,
    rows,
)

from kafkalike.log import LogCleaner, LogConfig, LogManager
from kafkalike.log.cleaner import CLEANER_OFFSET_CHECKPOINT, cleanable
from kafkalike.protocol.records import DELETE_HORIZON_MASK


def fill(storage: Storage, count: int = 200, keys: int = 17) -> tuple[object, list[Row]]:
    log = storage.open()
    written: list[Row] = []
    for i in range(count):
        key, value = b"k%02d" % (i % keys), b"v%03d" % i
        written.append((produce(log, [(key, value)], now_ms=i), key, value))
    return log, written


# ---- what survives ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", STORAGES)
def test_keeps_the_newest_value_of_each_key_at_its_offset(tmp_path: Path, kind: str) -> None:
    storage = Storage(kind, tmp_path)
    log, written = fill(storage)
    active = log.active_segment.base_offset
    assert active > 100 and len(log.segments) > 5
    stats = LogCleaner().clean_once([log], 1_000)
    assert stats is not None and stats.end_offset == active and not stats.errors
    # The map covers the cleanable segments only: newest per key there, and the active segment as it was.
    expected = latest_per_key([w for w in written if w[0] < active]) + [w for w in written if w[0] >= active]
    assert rows(log) == expected
    assert log.log_end_offset == 200
    assert fold(rows(log)) == fold(written)  # a consumer from offset 0 ends with the newest values
    assert log.size_in_bytes < 0.4 * 200 * 75
    log.close()
    reopened = storage.open(clean_shutdown=True)
    assert reopened.recovered_segments == 0
    assert rows(reopened) == expected


def test_a_segment_that_loses_nothing_is_left_as_it_was(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    for i in range(60):
        produce(log, [(b"unique-%d" % i, b"x" * 20)], now_ms=i)
    files = [(s.file, s.file.read(0, s.size)) for s in log.segments]
    stats = LogCleaner().clean_log(log, 100)
    assert stats.groups_swapped == 0 and stats.bytes_written == 0
    assert [(s.file, s.file.read(0, s.size)) for s in log.segments] == files


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_a_batch_that_loses_records_is_rewritten_with_its_header(tmp_path: Path, codec: int) -> None:
    log = Storage("memory", tmp_path).open()
    produce(
        log,
        [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")],
        10,
        compression=codec,
        producer_id=7,
        producer_epoch=3,
        base_sequence=0,
    )
    produce(log, [(b"b", b"22")], 20, producer_id=7, producer_epoch=3, base_sequence=3)
    log.roll(30)
    produce(log, [(b"tail", b"t")], 30)
    LogCleaner().clean_log(log, 40)
    (header, records), second = batches(log)[:2]
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (0, 2, 2)
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 0)
    assert [(r.offset(header), r.key, r.value, r.timestamp(header)) for r in records] == [
        (0, b"a", b"1", 10),
        (2, b"c", b"3", 10),
    ]
    assert second[0].base_offset == 3 and [r.value for r in second[1]] == [b"22"]


@pytest.mark.parametrize("kind", STORAGES)
def test_reads_index_lookups_and_timestamps_work_after_cleaning(tmp_path: Path, kind: str) -> None:
    storage = Storage(kind, tmp_path)
    log, _written = fill(storage)
    LogCleaner().clean_log(log, 1_000)
    check_lookups(log)
    survivors = rows(log)
    for target in range(0, 200, 7):  # record timestamps equal their offsets here
        first = next(offset for offset, _k, _v in survivors if offset >= target)
        assert log.offset_for_timestamp(target) == (first, first)
    log.close()
    trusted = storage.open(clean_shutdown=True)  # loads the cleaned segments' index files
    check_lookups(trusted)
    entries = [(s.offset_index.entries(), s.time_index.entries()) for s in trusted.segments]
    trusted.close()
    for name in storage.names():  # drop every index: the unclean open rebuilds them from the data
        if name.endswith((".index", ".timeindex")):
            storage.directory.delete(name)
    rebuilt = storage.open()
    assert [(s.offset_index.entries(), s.time_index.entries()) for s in rebuilt.segments] == entries
    assert rows(rebuilt) == survivors


def test_consecutive_small_segments_are_merged_within_segment_bytes(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    for i in range(30):
        produce(log, [(b"k%02d" % i, b"v")], now_ms=i)
        log.roll(i)
    before = rows(log)
    assert len(log.segments) == 31
    LogCleaner().clean_log(log, 100)
    assert rows(log) == before
    assert len(log.segments) < 8
    assert all(s.size <= CONFIG.segment_bytes for s in log.segments)
    check_lookups(log)


def test_keyless_records_are_dropped_and_counted(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    produce(log, [(None, b"no key"), (b"k", b"v")], 0)
    produce(log, [(b"k2", b"v2")], 1)
    log.roll(2)
    produce(log, [(b"t", b"t")], 2)
    stats = LogCleaner().clean_log(log, 10)
    assert stats.invalid_messages == 1
    assert rows(log) == [(1, b"k", b"v"), (2, b"k2", b"v2"), (3, b"t", b"t")]


# ---- tombstones ---------------------------------------------------------------------------------


def tombstone_log(tmp_path: Path) -> object:
    log = Storage("memory", tmp_path).open()
    produce(log, [(b"k", b"v")], 0)
    produce(log, [(b"k", None)], 1)
    produce(log, [(b"other", b"x")], 2)
    log.roll(3)
    produce(log, [(b"z", b"tail")], 3)
    return log


def test_tombstones_outlive_their_first_clean_by_delete_retention_ms(tmp_path: Path) -> None:
    log = tombstone_log(tmp_path)
    cleaner = LogCleaner()
    first = cleaner.clean_log(log, 5_000)
    assert rows(log) == [(1, b"k", None), (2, b"other", b"x"), (3, b"z", b"tail")]
    header, records = batches(log)[0]
    assert header.attributes & DELETE_HORIZON_MASK and header.base_timestamp == 6_000
    assert records[0].timestamp(header) == 1  # the record keeps its own timestamp
    assert first.next_delete_horizon_ms == 6_000
    cleaner.clean_log(log, 5_999)
    assert rows(log)[0] == (1, b"k", None)
    assert batches(log)[0][0].base_timestamp == 6_000  # the horizon is set once, not pushed back
    cleaner.clean_log(log, 6_000)
    assert rows(log) == [(2, b"other", b"x"), (3, b"z", b"tail")]


def test_a_tombstone_pass_runs_once_the_horizon_passes_without_new_data(tmp_path: Path) -> None:
    log = tombstone_log(tmp_path)
    cleaner = LogCleaner()
    assert cleaner.work([log], 5_000)  # never cleaned: everything is dirty
    assert not cleaner.work([log], 5_000)
    assert not cleaner.work([log], 5_999)  # below the ratio and the horizon not reached
    assert rows(log)[0] == (1, b"k", None)
    assert cleaner.work([log], 6_000)
    assert rows(log) == [(2, b"other", b"x"), (3, b"z", b"tail")]
    assert not cleaner.work([log], 6_000)


# ---- when a log is cleaned ----------------------------------------------------------------------


def duplicates(log: object, start_ms: int, count: int, keys: int = 3) -> None:
    for i in range(count):
        produce(log, [(b"k%d" % (i % keys), b"v%d" % i)], start_ms + i)  # type: ignore[arg-type]


def test_segments_younger_than_min_compaction_lag_are_not_cleaned(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open(CONFIG.with_overrides(min_compaction_lag_ms=1_000))
    duplicates(log, 0, 10)
    log.roll(10)
    young = log.active_segment.base_offset
    duplicates(log, 5_000, 10)
    log.roll(5_010)
    produce(log, [(b"tail", b"t")], 5_010)
    cleaner = LogCleaner()
    stats = cleaner.clean_log(log, 5_500)
    assert stats.end_offset == young
    assert [r[0] for r in rows(log) if r[0] >= young] == list(range(young, young + 11))
    assert len([r for r in rows(log) if r[0] < young]) == 3
    stats = cleaner.clean_log(log, 6_010)
    assert stats.end_offset == log.active_segment.base_offset
    assert len(rows(log)) == 3 + 1


def test_only_logs_above_min_cleanable_dirty_ratio_are_cleaned(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    duplicates(log, 0, 40, keys=40)  # nothing to remove: after one clean it is all clean bytes
    log.roll(40)
    cleaner = LogCleaner()
    assert cleaner.clean_once([log], 50) is not None
    assert cleaner.clean_once([log], 50) is None
    for i in range(60):
        if cleanable(log, 100).cleanable_ratio > 0.5:
            break
        assert cleaner.clean_once([log], 100) is None
        produce(log, [(b"k0", b"again-%d" % i)], 100)
        log.roll(100)
    assert cleanable(log, 100).cleanable_ratio > 0.5
    assert cleaner.clean_once([log], 100) is not None


def test_the_dirtiest_log_goes_first(tmp_path: Path) -> None:
    a, b = Storage("memory", tmp_path).open(), Storage("memory", tmp_path).open()
    for log in (a, b):
        duplicates(log, 0, 30)
        log.roll(30)
    cleaner = LogCleaner()
    cleaner.clean_log(a, 40)
    cleaner.clean_log(b, 40)
    duplicates(a, 50, 30)
    duplicates(b, 50, 5)
    for log in (a, b):
        log.roll(90)
    target = cleaner.grab_filthiest([b, a], 100)
    assert target is not None and target.log is a
    assert target.cleanable_ratio > cleanable(b, 100).cleanable_ratio


def test_max_compaction_lag_forces_a_clean_below_the_ratio(tmp_path: Path) -> None:
    config = CONFIG.with_overrides(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=1_000)
    log = Storage("memory", tmp_path).open(config)
    duplicates(log, 0, 20)
    log.roll(20)
    cleaner = LogCleaner()
    cleaner.clean_log(log, 30)
    duplicates(log, 10_000, 3)
    log.roll(10_003)
    produce(log, [(b"tail", b"t")], 10_003)
    assert cleaner.clean_once([log], 10_999) is None  # the first dirty batch is not 1 s old yet
    assert cleanable(log, 11_001).need_compaction_now
    stats = cleaner.clean_once([log], 11_001)
    assert stats is not None and stats.end_offset == log.active_segment.base_offset


def test_compacted_logs_roll_within_max_compaction_lag() -> None:
    config = LogConfig(cleanup_policy="compact", max_compaction_lag_ms=1_000)
    assert config.max_segment_ms == 1_000
    assert LogConfig(max_compaction_lag_ms=1_000).max_segment_ms == LogConfig().segment_ms  # delete policy
    log = Storage("memory", Path()).open(config)
    produce(log, [(b"k", b"1")], 0)
    produce(log, [(b"k", b"2")], 500)
    assert len(log.segments) == 1
    produce(log, [(b"k", b"3")], 1_001)
    assert len(log.segments) == 2


def test_cleaning_stops_before_the_segment_holding_the_high_watermark(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    duplicates(log, 0, 60)
    bases = [s.base_offset for s in log.segments]
    log.high_watermark = bases[2] + 1
    before = rows(log)
    stats = LogCleaner().clean_log(log, 100)
    assert stats.end_offset == bases[2]
    assert [r for r in rows(log) if r[0] >= bases[2]] == [r for r in before if r[0] >= bases[2]]


def test_cleaning_stops_before_an_open_transaction(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    duplicates(log, 0, 20)
    log.roll(20)
    open_at = produce(
        log, [(b"k0", b"in-txn")], 20, producer_id=5, producer_epoch=0, base_sequence=0, transactional=True
    )
    duplicates(log, 21, 20)
    log.roll(41)
    produce(log, [(b"tail", b"t")], 41)
    assert log.last_stable_offset == open_at
    stats = LogCleaner().clean_log(log, 100)
    assert stats.end_offset == open_at
    assert [r for r in rows(log) if r[0] >= open_at][:1] == [(open_at, b"k0", b"in-txn")]


def test_a_full_offset_map_cleans_what_fits_and_later_passes_finish(tmp_path: Path) -> None:
    config = CONFIG.with_overrides(min_cleanable_dirty_ratio=0.0)
    log = Storage("memory", tmp_path).open(config)
    written = [
        (produce(log, [(b"k%02d" % (i % 20), b"v%d" % i)], i), b"k%02d" % (i % 20), b"v%d" % i) for i in range(90)
    ]
    log.roll(90)
    produce(log, [(b"tail", b"t")], 90)
    cleaner = LogCleaner(max_map_entries=5)
    ends = []
    while (stats := cleaner.clean_once([log], 100)) is not None:
        assert stats.map_entries <= 5
        ends.append(stats.end_offset)
    assert len(ends) > 3 and ends == sorted(ends) and ends[-1] == 90
    assert rows(log) == [*latest_per_key(written), (90, b"tail", b"t")]


def test_stepped_work_gives_the_same_log_as_one_go(tmp_path: Path) -> None:
    one, stepped = Storage("memory", tmp_path), Storage("memory", tmp_path)
    logs = [fill(one)[0], fill(stepped)[0]]
    LogCleaner().clean_once([logs[0]], 1_000)
    cleaner, calls = LogCleaner(), 0
    while cleaner.work([logs[1]], 1_000, max_bytes=500):
        calls += 1
    assert calls > 20
    assert [s.file.read(0, s.size) for s in logs[0].segments] == [s.file.read(0, s.size) for s in logs[1].segments]


@pytest.mark.parametrize("kind", STORAGES)
def test_a_truncation_between_steps_drops_the_pass(tmp_path: Path, kind: str) -> None:
    storage = Storage(kind, tmp_path)
    log, _written = fill(storage)
    cleaner = LogCleaner()
    while not any(n.endswith(".cleaned") for n in storage.names()):
        assert cleaner.work([log], 1_000, max_bytes=200)
    log.truncate_to(30, now_ms=1_000)
    log.high_watermark = log.log_end_offset
    assert cleaner.work([log], 1_000, max_bytes=200)
    assert cleaner.last_stats is not None and cleaner.last_stats.aborted
    assert not any(n.endswith(".cleaned") for n in storage.names())
    while cleaner.work([log], 1_000):
        pass
    assert [r[0] for r in rows(log)][-1] < 30
    check_lookups(log)


def test_a_corrupt_segment_makes_the_log_uncleanable(tmp_path: Path) -> None:
    storage = Storage("file", tmp_path)
    log, _written = fill(storage)
    first = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    data[100] ^= 0xFF
    first.write_bytes(bytes(data))
    cleaner = LogCleaner()
    stats = cleaner.clean_once([log], 1_000)
    assert stats is not None and stats.errors and stats.aborted
    assert cleaner.is_uncleanable(log)
    assert not any(n.endswith((".cleaned", ".swap")) for n in storage.names())
    assert cleaner.clean_once([log], 1_000) is None


# ---- checkpoints and configuration --------------------------------------------------------------


def test_log_manager_keeps_the_first_dirty_offset_in_cleaner_offset_checkpoint(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    log = manager.get_or_create("t", 0, CONFIG, 0)
    plain = manager.get_or_create("plain", 0, LogConfig(), 0)
    duplicates(log, 0, 60)
    duplicates(plain, 0, 60)
    cleaner = LogCleaner()
    while manager.run_cleaner(cleaner, 100):
        pass
    end = log.active_segment.base_offset
    assert log.cleaner_checkpoint == end and plain.cleaner_checkpoint is None
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == f"0\n1\nt 0 {end}\n"
    manager.close_all()
    again = LogManager([tmp_path])
    assert again.get_or_create("t", 0, CONFIG, 0).cleaner_checkpoint == end
    assert again.get_or_create("plain", 0, LogConfig(), 0).cleaner_checkpoint is None
    again.delete_partition("t", 0)
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == "0\n0\n"


def test_a_checkpoint_outside_the_log_resets_to_the_log_start(tmp_path: Path) -> None:
    log = Storage("memory", tmp_path).open()
    duplicates(log, 0, 30)
    log.cleaner_checkpoint = 10_000
    assert cleanable(log, 0).first_dirty_offset == 0
    assert log.cleaner_checkpoint == 0
    log.cleaner_checkpoint = 20
    log.truncate_to(12, now_ms=0)
    assert log.cleaner_checkpoint == 12


def test_compaction_settings_use_kafka_names_and_defaults() -> None:
    default = LogConfig()
    assert (default.delete_retention_ms, default.min_cleanable_dirty_ratio) == (86_400_000, 0.5)
    assert (default.min_compaction_lag_ms, default.max_compaction_lag_ms) == (0, (1 << 63) - 1)
    config = LogConfig.from_properties(
        {
            "cleanup.policy": "compact, delete",
            "delete.retention.ms": "5",
            "min.cleanable.dirty.ratio": "0.25",
            "min.compaction.lag.ms": "7",
            "max.compaction.lag.ms": "9",
        }
    )
    assert config.compacts and config.deletes
    assert (config.delete_retention_ms, config.min_cleanable_dirty_ratio) == (5, 0.25)
    assert (config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (7, 9)
    assert LogConfig.from_properties(config.to_properties()) == config
    for bad in ({"min_cleanable_dirty_ratio": 1.5}, {"max_compaction_lag_ms": 0}, {"delete_retention_ms": -1}):
        with pytest.raises(ValueError):
            LogConfig(**bad)  # type: ignore[arg-type]
