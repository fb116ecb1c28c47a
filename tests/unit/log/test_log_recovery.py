"""Opening a log after clean and unclean shutdowns: torn tails, garbage, broken indexes, leftovers."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from logtest_batches import batch_values, make_batch

from kafkalike.log import LogConfig, LogManager, PartitionLog
from kafkalike.protocol.records import read_batch_header

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=200)


def build(path: Path, batches: int = 100) -> list[tuple[int, bytes]]:
    log = PartitionLog.open(path, CONFIG, 0)
    expected = []
    for i in range(batches):
        values = [f"value-{i}-{j}".encode() for j in range(2)]
        result = log.append(make_batch(values, base_timestamp=10_000 + i), leader_epoch=i // 40, now_ms=0)
        expected += [(result.first_offset + j, v) for j, v in enumerate(values)]
    log.close()
    return expected


def last_log_file(path: Path) -> Path:
    return sorted(path.glob("*.log"))[-1]


def test_clean_reopen_scans_nothing(tmp_path: Path) -> None:
    expected = build(tmp_path)
    log = PartitionLog.open(tmp_path, CONFIG, 0, clean_shutdown=True)
    assert log.recovered_segments == 0
    assert log.log_end_offset == 200
    assert batch_values(log.read_bytes(0, 1 << 30)) == expected


def test_torn_batch_is_truncated_and_appends_continue(tmp_path: Path) -> None:
    expected = build(tmp_path)
    tail = last_log_file(tmp_path)
    with open(tail, "r+b") as f:
        f.truncate(tail.stat().st_size - 5)  # the last batch loses its final bytes
    log = PartitionLog.open(tmp_path, CONFIG, 0)
    assert log.truncated_bytes > 0
    assert log.log_end_offset == 198
    assert batch_values(log.read_bytes(0, 1 << 30)) == expected[:-2]
    result = log.append(make_batch([b"after"]), leader_epoch=2, now_ms=0)
    assert result.first_offset == 198
    assert batch_values(log.read_bytes(198, 1 << 20)) == [(198, b"after")]


@pytest.mark.parametrize("garbage", [b"\x00" * 100, os.urandom(3000), b"\xff" * 61])
def test_garbage_tail_is_truncated(tmp_path: Path, garbage: bytes) -> None:
    expected = build(tmp_path)
    tail = last_log_file(tmp_path)
    good_size = tail.stat().st_size
    with open(tail, "ab") as f:
        f.write(garbage)
    log = PartitionLog.open(tmp_path, CONFIG, 0)
    assert tail.stat().st_size == good_size
    assert batch_values(log.read_bytes(0, 1 << 30)) == expected


def test_corrupt_crc_in_middle_segment_drops_everything_after(tmp_path: Path) -> None:
    build(tmp_path)
    files = sorted(tmp_path.glob("*.log"))
    victim = files[1]
    data = bytearray(victim.read_bytes())
    first = read_batch_header(data, 0)
    data[first.size + 70] ^= 0xFF  # a record byte of the second batch: the CRC no longer matches
    victim.write_bytes(bytes(data))
    log = PartitionLog.open(tmp_path, CONFIG, 0)
    assert log.log_end_offset == first.last_offset + 1
    assert [p.name for p in sorted(tmp_path.glob("*.log"))] == [f.name for f in files[:2]]
    assert log.epoch_cache.latest_epoch == first.partition_leader_epoch
    assert all(offset < log.log_end_offset for _, offset in log.epoch_cache.entries())


@pytest.mark.parametrize("damage", ["delete", "garbage", "decreasing", "past_end"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_broken_indexes_are_rebuilt(tmp_path: Path, damage: str, suffix: str) -> None:
    expected = build(tmp_path)
    log = PartitionLog.open(tmp_path, CONFIG, 0, clean_shutdown=True)
    good = [(s.offset_index.entries(), s.time_index.entries()) for s in log.segments]
    log.close()
    for path in tmp_path.glob(f"*{suffix}"):
        raw = path.read_bytes()
        if damage == "delete":
            path.unlink()
        elif damage == "garbage":
            path.write_bytes(raw + b"\x01\x02\x03")
        elif damage == "decreasing" and len(raw) >= 2 * (8 if suffix == ".index" else 12):
            size = 8 if suffix == ".index" else 12
            path.write_bytes(raw[size : 2 * size] + raw[:size] + raw[2 * size :])
        elif damage == "past_end":
            path.write_bytes(
                raw + (b"\x00\x00\x7f\xff\x7f\xff\xff\xff" + b"\x7f\xff\xff\xff")[: 8 if suffix == ".index" else 12]
            )
    # Even after a clean shutdown, insane indexes force the segment through recovery.
    log = PartitionLog.open(tmp_path, CONFIG, 0, clean_shutdown=True)
    assert log.recovered_segments > 0
    assert [(s.offset_index.entries(), s.time_index.entries()) for s in log.segments] == good
    assert batch_values(log.read_bytes(0, 1 << 30)) == expected
    for offset in range(0, 200, 9):
        header = read_batch_header(log.read_bytes(offset, 1), 0)
        assert header.base_offset <= offset <= header.last_offset
    assert log.offset_for_timestamp(10_050) == (99, 10_050)


def test_leftover_files_are_cleared(tmp_path: Path) -> None:
    build(tmp_path)
    (tmp_path / "00000000000000000005.log.deleted").write_bytes(b"old")
    (tmp_path / "00000000000000000005.index.deleted").write_bytes(b"old")
    (tmp_path / "00000000000000000007.log.cleaned").write_bytes(b"half-cleaned")
    (tmp_path / "00000000000000999999.index").write_bytes(b"")  # orphan index without a .log
    (tmp_path / "leader-epoch-checkpoint.tmp").write_bytes(b"partial")
    PartitionLog.open(tmp_path, CONFIG, 0)
    left = {p.name for p in tmp_path.iterdir()}
    assert not {n for n in left if n.endswith((".deleted", ".cleaned", ".tmp"))}
    assert "00000000000000999999.index" not in left


def test_swap_file_replaces_the_segments_it_covers(tmp_path: Path) -> None:
    build(tmp_path)
    log = PartitionLog.open(tmp_path, CONFIG, 0, clean_shutdown=True)
    first, second = log.segments[0], log.segments[1]
    # A compacted replacement for the first segment: keep only its first batch.
    keep = first.file.read(0, read_batch_header(first.file.read(0, 61 + 4096), 0).size)
    log.close()
    (tmp_path / f"{first.base_offset:020d}.log.swap").write_bytes(keep)
    (tmp_path / f"{first.base_offset:020d}.index.swap").write_bytes(b"junk")
    reopened = PartitionLog.open(tmp_path, CONFIG, 0)
    assert reopened.segments[0].size == len(keep)
    assert reopened.segments[1].base_offset == second.base_offset
    assert not list(tmp_path.glob("*.swap"))


def test_epoch_cache_is_rebuilt_from_batches_when_checkpoint_is_lost(tmp_path: Path) -> None:
    build(tmp_path)
    (tmp_path / "leader-epoch-checkpoint").unlink()
    log = PartitionLog.open(tmp_path, CONFIG, 0)
    assert log.epoch_cache.entries() == [(0, 0), (1, 80), (2, 160)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n1 80\n2 160\n"


def test_epoch_cache_is_truncated_with_a_torn_tail(tmp_path: Path) -> None:
    build(tmp_path, batches=81)  # the last batch alone starts epoch 2
    tail = last_log_file(tmp_path)
    with open(tail, "r+b") as f:
        f.truncate(tail.stat().st_size - 1)
    log = PartitionLog.open(tmp_path, CONFIG, 0)
    assert log.log_end_offset == 160
    assert log.epoch_cache.entries() == [(0, 0), (1, 80)]


KILL_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {helpers!r})
    from kafkalike.log import LogConfig, LogManager
    from logtest_batches import make_batch
    manager = LogManager([{path!r}])
    log = manager.get_or_create("t", 0, LogConfig(flush_interval_messages=1, segment_bytes=2048), 0)
    for i in range(200):
        result = log.append(make_batch([b"acked-%d" % i]), leader_epoch=0, now_ms=i)
        print(result.last_offset, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_acknowledged_data_survives_kill_9(tmp_path: Path) -> None:
    script = KILL_SCRIPT.format(helpers=str(Path(__file__).parent), path=str(tmp_path))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    acked = [int(line) for line in proc.stdout.split()]
    assert acked[-1] == 199
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    manager = LogManager([tmp_path])
    log = manager.get_or_create("t", 0, LogConfig(segment_bytes=2048), 0)
    assert log.log_end_offset == 200
    assert batch_values(log.read_bytes(0, 1 << 30)) == [(i, b"acked-%d" % i) for i in range(200)]
    manager.close_all()
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_a_corrupt_tail_is_cut_with_a_warning_naming_segment_offset_and_bytes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    expected = build(tmp_path)
    files = sorted(tmp_path.glob("*.log"))
    victim = files[1]
    data = bytearray(victim.read_bytes())
    first = read_batch_header(data, 0)
    second = read_batch_header(data, first.size)
    data[first.size + 70] ^= 0xFF  # a record byte of the second batch: its CRC no longer matches
    victim.write_bytes(bytes(data))
    later_bytes = sum(f.stat().st_size for f in files[2:])
    later_records = sum(1 for offset, _ in expected if offset >= int(files[2].stem))
    with caplog.at_level(logging.WARNING, logger="kafkalike.log"):
        PartitionLog.open(tmp_path, CONFIG, 0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"recovery truncated {victim} at byte {first.size} (offset {second.base_offset}): CRC mismatch in the batch "
        f"at offset {second.base_offset}; dropped {len(data) - first.size} bytes "
        f"({sum(1 for o, _ in expected if second.base_offset <= o < int(files[2].stem))} records)",
        f"recovery deleted the {len(files) - 2} segment(s) after it, from offset {int(files[2].stem)} on: "
        f"{later_bytes} more bytes ({later_records} records)",
    ]


@pytest.mark.parametrize(
    ("garbage", "reason"),
    [(b"\x00" * 20, "torn batch header (20 of 61 bytes)"), (b"\x00" * 100, "not a v2 batch (magic byte 0)")],
    ids=["torn header", "not a batch"],
)
def test_each_kind_of_bad_tail_is_named_in_its_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, garbage: bytes, reason: str
) -> None:
    build(tmp_path, batches=3)
    tail = last_log_file(tmp_path)
    good = tail.stat().st_size
    with open(tail, "ab") as f:
        f.write(garbage)
    with caplog.at_level(logging.WARNING, logger="kafkalike.log"):
        PartitionLog.open(tmp_path, CONFIG, 0)
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"at byte {good} (offset 6): {reason}; dropped" in line


def test_a_torn_last_batch_is_named_torn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    build(tmp_path, batches=3)
    tail = last_log_file(tmp_path)
    size = tail.stat().st_size
    with open(tail, "r+b") as f:
        f.truncate(size - 5)
    with caplog.at_level(logging.WARNING, logger="kafkalike.log"):
        log = PartitionLog.open(tmp_path, CONFIG, 0)
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "torn batch" in line and "(2 records)" in line
    assert log.log_end_offset == 4


def test_a_clean_recovery_logs_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    expected = build(tmp_path)
    with caplog.at_level(logging.WARNING, logger="kafkalike.log"):
        log = PartitionLog.open(tmp_path, CONFIG, 0)  # unclean: every segment is checked
    assert log.recovered_segments > 0
    assert batch_values(log.read_bytes(0, 1 << 30)) == expected
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
