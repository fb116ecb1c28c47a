"""The coordinator records' append and read-back, shared by the group and transaction coordinators."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from logtest_batches import make_batch, make_marker

from kafkalike.log import FileLogDirectory, LogConfig, MemoryLogDirectory, PartitionLog
from kafkalike.log.coordinator_log import (
    CoordinatorLogStore,
    RecordError,
    StoreError,
    decode_versioned,
    encode_versioned,
    key_version,
    partition_for,
    read_records,
)
from kafkalike.testing.faulty_storage import DiskFaults

NOW = 1_000_000


def open_log(config: LogConfig | None = None) -> PartitionLog:
    return PartitionLog.open(MemoryLogDirectory("__coordinator-0"), config or LogConfig(), NOW)


def test_one_batch_per_append_and_read_back_in_order() -> None:
    plog = open_log()
    appended: list[int] = []
    store = CoordinatorLogStore(lambda p: (plog, 3), on_append=appended.append)
    store.append(0, [(b"k1", b"v1"), (b"k2", None)], NOW)
    store.append(0, [], NOW)  # nothing to write: no batch, no callback
    store.append(0, [(b"k3", b"v3")], NOW + 1)
    assert appended == [0, 0]
    assert plog.log_end_offset == 3
    assert list(read_records(plog, skip_transactional=False)) == [
        (0, (b"k1", b"v1")),
        (1, (b"k2", None)),
        (2, (b"k3", b"v3")),
    ]


def test_read_back_skips_control_and_keyless_records_and_transactional_on_request() -> None:
    plog = open_log()
    plog.append(make_batch([b"plain"], keys=[b"a"]), leader_epoch=0, now_ms=NOW)
    plog.append(make_batch([b"no key"]), leader_epoch=0, now_ms=NOW)
    txn = make_batch([b"pending"], keys=[b"b"], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    plog.append(txn, leader_epoch=0, now_ms=NOW)
    plog.append(make_marker(commit=True, producer_id=7, producer_epoch=0), leader_epoch=0, now_ms=NOW)
    assert list(read_records(plog, skip_transactional=False)) == [(0, (b"a", b"plain")), (2, (b"b", b"pending"))]
    assert list(read_records(plog, skip_transactional=True)) == [(0, (b"a", b"plain"))]


def test_a_batch_over_segment_bytes_is_a_store_error_marked_too_large() -> None:
    plog = open_log(LogConfig(segment_bytes=200))
    store = CoordinatorLogStore(lambda p: (plog, 0))
    with pytest.raises(StoreError) as info:
        store.append(0, [(b"k", b"x" * 300)], NOW)
    assert info.value.too_large
    assert plog.log_end_offset == 0


def test_versioned_key_and_value_round_trip() -> None:
    key = encode_versioned("GroupMetadataKey", 2, {"group": "g"})
    assert key[:2] == b"\x00\x02"
    assert key_version(key) == 2
    version, fields = decode_versioned("GroupMetadataKey", key)
    assert (version, fields.group) == (2, "g")
    for bad in (None, b"", b"\x00"):
        with pytest.raises(RecordError):
            key_version(bad)
    with pytest.raises(RecordError):
        decode_versioned("GroupMetadataKey", b"\x00\x02\x00")  # a string cut short


def test_partition_for_matches_kafkas_utils_abs_of_string_hash() -> None:
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE; Utils.abs makes it 0


@pytest.mark.parametrize("kind", ["file", "memory"])
@pytest.mark.parametrize("operation", ["append", "flush"])
@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO, errno.EMFILE, errno.EROFS], ids=errno.errorcode.get)
def test_a_disk_error_is_a_storage_store_error_and_leaves_no_record_behind(
    tmp_path: Path, kind: str, operation: str, err: int
) -> None:
    faults = DiskFaults()
    inner = MemoryLogDirectory("__consumer_offsets-0") if kind == "memory" else FileLogDirectory(tmp_path / "o-0")
    plog = PartitionLog.open(faults.wrap(inner), LogConfig(), NOW)
    appended: list[int] = []
    store = CoordinatorLogStore(lambda p: (plog, 0), on_append=appended.append)
    store.append(0, [(b"k1", b"v1")], NOW)
    rule = faults.fail(operation, err, name=".log")
    with pytest.raises(StoreError) as info:
        store.append(0, [(b"k2", b"v2")], NOW)
    assert info.value.storage and not info.value.too_large
    assert appended == [0]
    assert plog.log_end_offset == 1  # the coordinator was told it failed: the log does not hold it
    faults.remove(rule)
    store.append(0, [(b"k3", b"v3")], NOW)
    assert list(read_records(plog, skip_transactional=False)) == [(0, (b"k1", b"v1")), (1, (b"k3", b"v3"))]
