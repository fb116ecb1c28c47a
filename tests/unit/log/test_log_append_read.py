"""Appending and reading: offsets, segment rolls, index lookups, fetch limits."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from logtest_batches import batch_values, make_batch

from kafkalike.log import (
    AppendLargerThanSegment,
    CorruptLogError,
    LogConfig,
    MemoryLogDirectory,
    OffsetOutOfRange,
    PartitionLog,
    RecordBatchTooLarge,
)
from kafkalike.log.segment import iter_batches
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import batch_crc_ok, read_batch_header

SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256)


def open_log(path: Path, config: LogConfig = SMALL, now_ms: int = 0) -> PartitionLog:
    return PartitionLog.open(path / "topic-0", config, now_ms)


def fill(log: PartitionLog, batches: int, per_batch: int = 3, start_ms: int = 1_000) -> list[tuple[int, bytes]]:
    expected = []
    for i in range(batches):
        values = [f"b{i}-r{j}-".encode() * 3 for j in range(per_batch)]
        result = log.append(make_batch(values, base_timestamp=start_ms + i), leader_epoch=0, now_ms=start_ms + i)
        expected += [(result.first_offset + j, v) for j, v in enumerate(values)]
    return expected


def test_round_trip_across_many_rolls(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    expected = fill(log, 300)
    assert log.log_end_offset == 900
    assert len(log.segments) > 10
    assert batch_values(log.read_bytes(0, 1 << 30)) == expected
    # Every segment is named by its base offset and starts exactly there.
    names = sorted(n for n in os.listdir(tmp_path / "topic-0") if n.endswith(".log"))
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    for segment in log.segments[:-1]:
        first = next(iter_batches(segment.file, 0, segment.size))[1]
        assert first.base_offset == segment.base_offset
        assert segment.size <= SMALL.segment_bytes


def test_appended_bytes_are_unchanged_apart_from_offset_and_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 2)
    batch = make_batch([b"x", b"y"], base_timestamp=5_000)
    original = bytes(batch)
    log.append(batch, leader_epoch=7, now_ms=5_000)
    stored = log.read_bytes(6, 1 << 20)
    header = read_batch_header(stored, 0)
    assert header.base_offset == 6 and header.partition_leader_epoch == 7
    assert stored[17:] == original[17:]  # everything from the CRC on is the producer's
    assert batch_crc_ok(stored, 0, header)


def test_every_offset_lands_on_its_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 200, per_batch=4)
    for offset in range(0, 800, 7):
        data = log.read_bytes(offset, 1)  # min-one-batch: exactly the batch holding it
        header = read_batch_header(data, 0)
        assert header.base_offset <= offset <= header.last_offset
        assert len(data) == header.size


def test_index_entries_are_sparse_and_point_at_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(index_interval_bytes=1024))
    fill(log, 200)
    segment = log.active_segment
    entries = segment.offset_index.entries()
    assert 0 < len(entries) < 200
    for offset, position in entries:
        header = read_batch_header(segment.file.read(position, 1 << 16), 0)
        assert header.last_offset == offset
    log.flush()
    raw = (tmp_path / "topic-0" / "00000000000000000000.index").read_bytes()
    assert [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)] == [(o, p) for o, p in entries]


def test_max_bytes_returns_whole_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 50)
    batch_size = read_batch_header(log.read_bytes(0, 1), 0).size
    result = log.read(0, batch_size * 3 + batch_size // 2)
    assert result.size == batch_size * 3
    assert len(batch_values(result.read_all())) == 9
    # KIP-74: the first batch comes back whole even when it alone exceeds max_bytes ...
    assert log.read(3, 10).size == batch_size
    # ... unless the caller already has data for another partition.
    assert log.read(3, 10, min_one_batch=False).size == 0


def test_read_from_middle_of_batch_starts_at_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 5)
    data = log.read_bytes(4, 1 << 20)
    assert read_batch_header(data, 0).base_offset == 3
    assert batch_values(data)[0] == (3, b"b1-r0-b1-r0-b1-r0-")


def test_read_spans_segments_when_budget_allows(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 100)
    result = log.read(0, 1 << 20)
    assert len(result.ranges) == len(log.segments)
    assert sum(r.length for r in result.ranges) == result.size == log.size_in_bytes
    assert all(r.path is not None and r.file.fileno() is not None for r in result.ranges)


def test_offsets_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 3)
    assert log.read(9, 100).size == 0  # the log end itself is a valid, empty read
    with pytest.raises(OffsetOutOfRange):
        log.read(10, 100)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)
    log.high_watermark = 9
    log.delete_records_before(4, now_ms=0)
    with pytest.raises(OffsetOutOfRange):
        log.read(3, 100)
    # Reading at the new log start, mid-batch, returns that batch whole.
    assert read_batch_header(log.read_bytes(4, 1), 0).base_offset == 3


def test_reads_stop_at_max_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    log.high_watermark = 6
    assert log.high_watermark == 6
    data = log.read_bytes(0, 1 << 20, max_offset=log.high_watermark)
    assert [o for o, _ in batch_values(data)] == list(range(6))
    assert log.read(6, 1 << 20, max_offset=6).size == 0
    # A limit inside a batch excludes that batch.
    assert [o for o, _ in batch_values(log.read_bytes(0, 1 << 20, max_offset=7))] == list(range(6))
    log.high_watermark = 10_000
    assert log.high_watermark == log.log_end_offset


def test_roll_by_size(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=1000))
    batch = make_batch([b"x" * 200])
    size = len(batch)
    for _ in range(10):
        log.append(make_batch([b"x" * 200]), leader_epoch=0, now_ms=0)
    per_segment = 1000 // size
    assert [s.size for s in log.segments[:-1]] == [per_segment * size] * (len(log.segments) - 1)


def test_roll_by_time_uses_first_batch_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_ms=1_000))
    log.append(make_batch([b"a"], base_timestamp=10_000), leader_epoch=0, now_ms=10_000)
    log.append(make_batch([b"b"], base_timestamp=10_900), leader_epoch=0, now_ms=10_900)
    assert len(log.segments) == 1
    log.append(make_batch([b"c"], base_timestamp=11_001), leader_epoch=0, now_ms=11_001)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_by_time_without_timestamps_uses_creation_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_ms=1_000), now_ms=50_000)
    log.append(make_batch([b"a"], timestamps=[-1]), leader_epoch=0, now_ms=50_000)
    log.append(make_batch([b"b"], timestamps=[-1]), leader_epoch=0, now_ms=51_000)
    assert len(log.segments) == 1
    log.append(make_batch([b"c"], timestamps=[-1]), leader_epoch=0, now_ms=51_001)
    assert len(log.segments) == 2


def test_roll_when_index_is_full(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(index_interval_bytes=0, segment_index_bytes=80))
    fill(log, 40)
    assert len(log.segments) > 1
    assert all(len(s.offset_index) <= 10 for s in log.segments)
    assert batch_values(log.read_bytes(0, 1 << 20))[-1][0] == 119


def test_several_batches_in_one_append(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    buf = make_batch([b"a", b"b"]) + make_batch([b"c"]) + make_batch([b"d", b"e", b"f"])
    result = log.append(buf, leader_epoch=2, now_ms=0)
    assert (result.first_offset, result.last_offset) == (0, 5)
    assert batch_values(log.read_bytes(0, 1 << 20)) == list(enumerate([b"a", b"b", b"c", b"d", b"e", b"f"]))


def test_log_append_time_rewrites_header_only(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    batch = make_batch([b"a", b"b"], base_timestamp=1)
    result = log.append(batch, leader_epoch=0, now_ms=777_000)
    assert result.log_append_time_ms == 777_000
    stored = log.read_bytes(0, 1 << 20)
    header = read_batch_header(stored, 0)
    assert header.log_append_time and header.max_timestamp == 777_000 and header.base_timestamp == 1
    assert batch_crc_ok(stored, 0, header)
    assert log.offset_for_timestamp(777_000) == (0, 777_000)


def test_rejects_bad_input(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(max_message_bytes=200))
    with pytest.raises(RecordBatchTooLarge):
        log.append(make_batch([b"x" * 300]), leader_epoch=0, now_ms=0)
    with pytest.raises(CorruptLogError):
        log.append(make_batch([b"x"])[:-3], leader_epoch=0, now_ms=0)
    with pytest.raises(CorruptLogError):
        log.append(bytearray(), leader_epoch=0, now_ms=0)
    with pytest.raises(TypeError):
        log.append(memoryview(bytes(make_batch([b"x"]))), leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 0


def test_an_append_larger_than_a_segment_is_refused_after_the_batch_size_check(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=1024, max_message_bytes=1500))
    with pytest.raises(AppendLargerThanSegment) as past_segment:
        log.append(make_batch([b"x" * 1200]), leader_epoch=0, now_ms=0)
    assert past_segment.value.error_code == ErrorCode.RECORD_LIST_TOO_LARGE
    # Over both limits: max.message.bytes is what Kafka checks first, batch by batch.
    with pytest.raises(RecordBatchTooLarge) as past_both:
        log.append(make_batch([b"x" * 2000]), leader_epoch=0, now_ms=0)
    assert past_both.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0


def test_an_append_given_its_batch_header_stores_what_one_that_reads_it_stores(tmp_path: Path) -> None:
    """Produce passes the header validation read; the log skips reading it again, nothing else."""
    read_it, given_it = open_log(tmp_path / "a"), open_log(tmp_path / "b")
    for i in range(40):  # across rolls of the 4 KiB segments
        batch = make_batch([f"v{i}-{j}".encode() * 20 for j in range(3)], base_timestamp=1_000 + i)
        first = read_it.append(bytearray(batch), leader_epoch=3, now_ms=2_000 + i)
        second = given_it.append(
            bytearray(batch), leader_epoch=3, now_ms=2_000 + i, known_header=read_batch_header(batch)
        )
        assert first == second
    assert len(given_it.segments) > 2
    assert given_it.read_bytes(0, 1 << 30) == read_it.read_bytes(0, 1 << 30)


def test_an_append_given_a_header_still_makes_the_logs_checks(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=1024, max_message_bytes=1500))
    big = make_batch([b"x" * 2000])
    with pytest.raises(RecordBatchTooLarge):
        log.append(big, leader_epoch=0, now_ms=0, known_header=read_batch_header(big))
    past_segment = make_batch([b"x" * 1200])
    with pytest.raises(AppendLargerThanSegment):
        log.append(past_segment, leader_epoch=0, now_ms=0, known_header=read_batch_header(past_segment))
    # A header that does not describe the whole buffer (two batches, or a cut one) is refused.
    two = make_batch([b"a"]) + make_batch([b"b"])
    with pytest.raises(CorruptLogError):
        log.append(two, leader_epoch=0, now_ms=0, known_header=read_batch_header(two))
    assert log.log_end_offset == 0
    one = make_batch([b"a"])
    assert log.append(one, leader_epoch=0, now_ms=0, known_header=read_batch_header(one)).last_offset == 0


def test_offset_for_timestamp_and_max_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    # Timestamps out of order inside and across batches, as producers may send them.
    log.append(make_batch([b"a", b"b", b"c"], timestamps=[100, 300, 200]), leader_epoch=0, now_ms=0)
    log.append(make_batch([b"d", b"e"], timestamps=[250, 500]), leader_epoch=0, now_ms=0)
    log.append(make_batch([b"f"], timestamps=[400]), leader_epoch=0, now_ms=0)
    assert log.offset_for_timestamp(50) == (0, 100)
    assert log.offset_for_timestamp(150) == (1, 300)
    assert log.offset_for_timestamp(301) == (4, 500)
    assert log.offset_for_timestamp(501) is None
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-1) == (6, -1)
    assert log.max_timestamp() == (500, 4)
    assert log.offset_for_timestamp(-3) == (4, 500)


def test_offset_for_timestamp_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 300, per_batch=1, start_ms=1_000_000)
    assert len(log.segments) > 3
    for ts in (1_000_000, 1_000_123, 1_000_299):
        assert log.offset_for_timestamp(ts) == (ts - 1_000_000, ts)


def test_memory_storage_behaves_the_same(tmp_path: Path) -> None:
    directory = MemoryLogDirectory("mem/topic-0")
    log = PartitionLog.open(directory, SMALL, 0)
    expected = fill(log, 100)
    assert batch_values(log.read_bytes(0, 1 << 30)) == expected
    assert all(r.path is None and r.file.fileno() is None for r in log.read(0, 1 << 30).ranges)
    log.close()
    reopened = PartitionLog.open(directory, SMALL, 0, clean_shutdown=True)
    assert reopened.log_end_offset == 300
    assert batch_values(reopened.read_bytes(0, 1 << 30)) == expected
    assert not os.listdir(tmp_path)
