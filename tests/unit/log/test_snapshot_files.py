"""KRaft snapshot file names and their replacement in a log directory, on disk and in memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalike.log.snapshot_files import SnapshotFiles, SnapshotId, parse_snapshot_file_name
from kafkalike.log.storage import FileLogDirectory, LogDirectory, MemoryLogDirectory


@pytest.fixture(params=["file", "memory"])
def directory(request: pytest.FixtureRequest, tmp_path: Path) -> LogDirectory:
    if request.param == "file":
        return FileLogDirectory(tmp_path / "__cluster_metadata-0")
    return MemoryLogDirectory()


def test_file_name_is_kafkas_20_digit_offset_and_10_digit_epoch() -> None:
    assert SnapshotId(42, 3).file_name == "00000000000000000042-0000000003.checkpoint"
    assert parse_snapshot_file_name("00000000000000000042-0000000003.checkpoint") == SnapshotId(42, 3)


@pytest.mark.parametrize(
    "name",
    [
        "00000000000000000042-0000000003.checkpoint.part",
        "00000000000000000042-0000000003.checkpoint.deleted",
        "00000000000000000042-0000000003.checkpoint.0.tmp",
        "0000000000000000042-0000000003.checkpoint",
        "00000000000000000000.log",
        "quorum-state",
    ],
)
def test_other_names_are_not_snapshots(name: str) -> None:
    assert parse_snapshot_file_name(name) is None


def test_ids_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="out of range"):
        SnapshotId(-1, 0)
    with pytest.raises(ValueError, match="out of range"):
        SnapshotId(0, 2**31)


def test_write_read_list_and_delete_older(directory: LogDirectory) -> None:
    files = SnapshotFiles(directory)
    assert files.latest() is None
    for end_offset, epoch in [(10, 1), (200, 2), (35, 1)]:
        files.write(SnapshotId(end_offset, epoch), f"snapshot {end_offset}".encode())
    directory.write_document("00000000000000000000.log", b"")  # a segment is not a snapshot
    assert files.ids() == [SnapshotId(10, 1), SnapshotId(35, 1), SnapshotId(200, 2)]
    assert files.latest() == SnapshotId(200, 2)
    assert files.read(SnapshotId(35, 1)) == b"snapshot 35"
    assert files.delete_before(SnapshotId(200, 2)) == [SnapshotId(10, 1), SnapshotId(35, 1)]
    assert files.ids() == [SnapshotId(200, 2)]
    with pytest.raises(FileNotFoundError):
        files.read(SnapshotId(10, 1))


def test_leftovers_of_a_crash_are_removed_and_never_listed(directory: LogDirectory) -> None:
    files = SnapshotFiles(directory)
    files.write(SnapshotId(5, 1), b"whole")
    leftovers = [
        "00000000000000000009-0000000001.checkpoint.part",
        "00000000000000000009-0000000001-123.checkpoint.part",
        "00000000000000000003-0000000001.checkpoint.deleted",
        "00000000000000000009-0000000001.checkpoint.7.tmp",
    ]
    for name in leftovers:
        directory.write_document(name, b"torn")
    assert files.ids() == [SnapshotId(5, 1)]
    assert sorted(files.remove_leftovers()) == sorted(leftovers)
    assert sorted(directory.list_names()) == ["00000000000000000005-0000000001.checkpoint"]
