"""The quorum's log on disk (FileRaftLog) against a real temp directory: the same answers as the
in-memory log for any sequence of appends, truncations, flushes and snapshots; crashes that lose
what was not fsynced; reopening; Kafka's layout of the directory."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalike.log.epoch_cache import LEADER_EPOCH_CHECKPOINT
from kafkalike.protocol.records import iter_batches
from kafkalike.raft.file_log import METADATA_LOG_CONFIG, FileRaftLog, snapshot_name
from kafkalike.raft.log import MemoryRaftLog, OffsetAndEpoch, RaftLogError
from kafkalike.raft.records import data_batch
from kafkalike.testing.raft_file_log import SimFileRaftLog
from kafkalike.testing.raft_scenarios import FAMILIES, run_seed

LOG_FILE = "00000000000000000000.log"
# Segments of a few batches each, so that rolls, cuts across segments and deletions happen.
SMALL_SEGMENTS = METADATA_LOG_CONFIG.with_overrides(segment_bytes=300)


@pytest.fixture(autouse=True)
def close_every_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every log a test opens is closed after it (its descriptors released)."""
    opened: list[FileRaftLog] = []
    real_open = FileRaftLog.open.__func__  # type: ignore[attr-defined]

    def tracking_open(cls: type[FileRaftLog], *args: Any, **kwargs: Any) -> FileRaftLog:
        log: FileRaftLog = real_open(cls, *args, **kwargs)
        opened.append(log)
        return log

    monkeypatch.setattr(FileRaftLog, "open", classmethod(tracking_open))
    yield
    for log in opened:
        if not log.partition_log.closed:
            log.close()


def batch(log: FileRaftLog | MemoryRaftLog, epoch: int, count: int = 1) -> bytes:
    values = [f"v{log.end_offset + i}".encode() for i in range(count)]
    return data_batch(values, base_offset=log.end_offset, epoch=epoch, timestamp_ms=1000)


def observed(log: FileRaftLog | MemoryRaftLog, max_epoch: int) -> dict[str, object]:
    """Everything the node can ask of a log."""
    offsets = range(log.start_offset - 1, log.end_offset + 2)
    return {
        "start": log.start_offset,
        "end": log.end_offset,
        "durable_end": log.durable_end_offset,
        "last_fetched_epoch": log.last_fetched_epoch(),
        "end_for_epoch": [log.end_offset_for_epoch(e) for e in range(max_epoch + 2)],
        "epoch_at": [log.epoch_at(o) for o in offsets],
        "batch_end": [log.is_batch_end(o) for o in offsets],
        "read": [log.read(o, 100) for o in offsets],
        "snapshots": (log.earliest_snapshot_id(), log.latest_snapshot_id()),
    }


@pytest.mark.parametrize("seed", range(16))
def test_answers_as_the_memory_log_does(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    config = SMALL_SEGMENTS if seed % 2 else METADATA_LOG_CONFIG
    memory, disk = MemoryRaftLog(), FileRaftLog.open(tmp_path, now_ms=0, config=config)
    epoch = 1
    for step in range(60):
        action = rng.random()
        if action < 0.5:
            epoch += rng.random() < 0.2
            data = batch(memory, epoch, rng.randint(1, 3))
            assert memory.append(data)[:3] == disk.append(data)[:3]
        elif action < 0.62 and memory.end_offset > memory.start_offset:
            ends = [b.last_offset + 1 for b in memory.batches] + [memory.start_offset]
            cut = rng.choice(ends)
            memory.truncate_to(cut)
            disk.truncate_to(cut)
            epoch = max(memory.last_fetched_epoch(), 1)
        elif action < 0.85:
            offset = rng.randint(memory.start_offset, memory.end_offset)
            memory.flush(offset)
            disk.flush(offset)
        elif memory.durable_end_offset > memory.start_offset and memory.is_batch_end(memory.durable_end_offset):
            end = memory.durable_end_offset
            snapshot = OffsetAndEpoch(end, memory.epoch_at(end - 1) or 0)
            memory.create_snapshot(snapshot, b"state %d" % step)
            disk.create_snapshot(snapshot, b"state %d" % step)
            if rng.random() < 0.7:
                memory.delete_before_snapshot(snapshot)
                disk.delete_before_snapshot(snapshot)
        assert observed(disk, epoch) == observed(memory, epoch), f"step {step}"
    # The same again after a restart, with nothing lost (all flushed first).
    memory.flush(memory.end_offset)
    disk.flush(disk.end_offset)
    disk.close()
    reopened = FileRaftLog.open(tmp_path, now_ms=1, config=config)
    assert observed(reopened, epoch) == observed(memory, epoch)
    if config is SMALL_SEGMENTS:
        assert len(reopened.partition_log.segments) > 1 or memory.start_offset > 0


def write_and_flush_some(tmp_path: Path) -> tuple[FileRaftLog, int]:
    """Epoch 1 at 0-2 and epoch 2 at 3-4, durable; then epoch 2 at 5-6, only written. Returns the
    log and the size of its segment file when the flush was done."""
    log = FileRaftLog.open(tmp_path, now_ms=0)
    log.append(batch(log, 1, 3))
    log.append(batch(log, 2, 2))
    log.flush(log.end_offset)
    durable_size = (tmp_path / LOG_FILE).stat().st_size
    log.append(batch(log, 2, 2))
    assert (log.end_offset, log.durable_end_offset) == (7, 5)
    return log, durable_size


def test_a_crash_loses_only_what_was_not_fsynced(tmp_path: Path) -> None:
    """Power lost after the flush: the file holds the durable bytes and part of the next batch."""
    log, durable_size = write_and_flush_some(tmp_path)
    log.close()
    with open(tmp_path / LOG_FILE, "r+b") as f:
        f.truncate(durable_size + 25)  # a torn batch
    reopened = FileRaftLog.open(tmp_path, now_ms=1)
    assert (reopened.start_offset, reopened.end_offset, reopened.durable_end_offset) == (0, 5, 5)
    assert reopened.last_fetched_epoch() == 2
    assert reopened.end_offset_for_epoch(1) == OffsetAndEpoch(3, 1)
    assert reopened.append(batch(reopened, 3)).base_offset == 5  # and it goes on from there


def test_what_survives_a_process_crash_is_durable_once_reopened(tmp_path: Path) -> None:
    """The page cache kept the unflushed batch: it is recovered, and opening fsyncs it."""
    log, _ = write_and_flush_some(tmp_path)
    log.close()
    reopened = FileRaftLog.open(tmp_path, now_ms=1)
    assert (reopened.end_offset, reopened.durable_end_offset) == (7, 7)


def test_a_truncation_stays_truncated_across_a_restart(tmp_path: Path) -> None:
    log, _ = write_and_flush_some(tmp_path)
    log.truncate_to(3)
    assert (log.end_offset, log.durable_end_offset, log.last_fetched_epoch()) == (3, 3, 1)
    log.append(batch(log, 4))
    log.flush(log.end_offset)
    log.close()
    reopened = FileRaftLog.open(tmp_path, now_ms=1)
    assert (reopened.end_offset, reopened.last_fetched_epoch()) == (4, 4)
    assert reopened.end_offset_for_epoch(2) == OffsetAndEpoch(3, 1)  # epoch 2 is gone
    assert [h.partition_leader_epoch for _, h in iter_batches(reopened.read(0, 10_000))] == [1, 4]


def test_a_flush_that_began_before_a_truncation_makes_nothing_after_it_durable(tmp_path: Path) -> None:
    log = FileRaftLog.open(tmp_path, now_ms=0)
    log.append(batch(log, 1))
    log.append(batch(log, 1))
    prepared = log.prepare_flush()  # covers offsets 0 and 1
    log.truncate_to(1)
    log.append(batch(log, 2))  # a new offset 1, written after the fsyncs were collected
    prepared.syncs.run()  # on the driver's worker thread
    log.complete_flush(prepared)
    # The new offset 1 is not durable (PartitionLog drops a flush the log was cut under whole, so
    # not offset 0 either, until the next flush).
    assert log.durable_end_offset <= 1
    log.flush(log.end_offset)
    assert log.durable_end_offset == 2


def test_durable_only_once_the_fsyncs_ran(tmp_path: Path) -> None:
    log = FileRaftLog.open(tmp_path, now_ms=0)
    log.append(batch(log, 1, 2))
    prepared = log.prepare_flush()
    assert prepared.syncs  # there are fsyncs for the worker thread
    assert log.durable_end_offset == 0
    prepared.syncs.run()
    assert log.durable_end_offset == 0  # not until the driver says they ran
    log.complete_flush(prepared)
    assert log.durable_end_offset == 2


def test_each_batch_keeps_its_leader_epoch_on_disk(tmp_path: Path) -> None:
    log = FileRaftLog.open(tmp_path, now_ms=0)
    log.append(batch(log, 1, 2) + b"")
    log.append(batch(log, 3) + batch(log, 3)[:0])
    log.flush(log.end_offset)
    log.close()
    data = (tmp_path / LOG_FILE).read_bytes()
    assert [(h.base_offset, h.partition_leader_epoch) for _, h in iter_batches(data)] == [(0, 1), (2, 3)]
    # Kafka's leader-epoch-checkpoint: version 0, two entries, "epoch start-offset" lines.
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n1 0\n3 2\n"
    assert (tmp_path / "partition.metadata").read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"


def test_appends_out_of_order_are_refused_and_change_nothing(tmp_path: Path) -> None:
    log = FileRaftLog.open(tmp_path, now_ms=0)
    log.append(batch(log, 2))
    with pytest.raises(RaftLogError):
        log.append(data_batch([b"x"], base_offset=5, epoch=2, timestamp_ms=0))  # a gap
    with pytest.raises(RaftLogError):
        log.append(batch(log, 1))  # a falling epoch
    corrupt = bytearray(batch(log, 2))
    corrupt[-1] ^= 1
    with pytest.raises(RaftLogError):
        log.append(batch(log, 2) + bytes(corrupt))  # the good batch before it is not appended either
    assert log.end_offset == 1
    whole = batch(log, 2)
    assert log.append(whole + whole[:20]).last_offset == 1  # a partial last batch is left out


def test_snapshots_move_the_log_start_and_survive_a_restart(tmp_path: Path) -> None:
    log = FileRaftLog.open(tmp_path, now_ms=0, config=SMALL_SEGMENTS)
    for epoch in (1, 1, 2, 2):
        log.append(batch(log, epoch, 2))
    log.flush(log.end_offset)
    first, second = OffsetAndEpoch(4, 1), OffsetAndEpoch(6, 2)
    log.create_snapshot(first, b"up to 4")
    log.create_snapshot(second, b"up to 6")
    log.delete_before_snapshot(second)
    assert (log.start_offset, log.earliest_snapshot_id()) == (6, second)
    assert not (tmp_path / snapshot_name(first)).exists()
    assert (tmp_path / snapshot_name(second)).read_bytes() == b"up to 6"
    assert log.partition_log.segments[0].base_offset > 0  # whole segments before the snapshot went
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".deleted")]  # at once, files and all
    log.close()
    reopened = FileRaftLog.open(tmp_path, now_ms=1, config=SMALL_SEGMENTS)
    assert (reopened.start_offset, reopened.end_offset) == (6, 8)
    assert reopened.read_snapshot(second) == b"up to 6"
    assert reopened.end_offset_for_epoch(1) == OffsetAndEpoch(6, 2)  # before the log: the snapshot


def test_a_snapshot_from_the_leader_past_the_log_restarts_it_there(tmp_path: Path) -> None:
    log = FileRaftLog.open(tmp_path, now_ms=0)
    log.append(batch(log, 1, 3))
    log.flush(log.end_offset)
    assert log.install_snapshot(OffsetAndEpoch(20, 4), b"leader's state") is True
    assert (log.start_offset, log.end_offset, log.durable_end_offset, log.last_fetched_epoch()) == (20, 20, 20, 4)
    log.append(data_batch([b"next"], base_offset=20, epoch=4, timestamp_ms=0))
    log.flush(log.end_offset)
    log.close()
    reopened = FileRaftLog.open(tmp_path, now_ms=1)
    assert (reopened.start_offset, reopened.end_offset, reopened.last_fetched_epoch()) == (20, 21, 4)


def test_a_snapshot_installed_before_a_crash_is_where_the_log_restarts(tmp_path: Path) -> None:
    """The snapshot file is renamed into place before the log is cut: a crash between the two
    leaves the old segments, and opening restarts the log at the snapshot."""
    log = FileRaftLog.open(tmp_path, now_ms=0)
    log.append(batch(log, 1, 3))
    log.flush(log.end_offset)
    log.close()
    (tmp_path / snapshot_name(OffsetAndEpoch(20, 4))).write_bytes(b"leader's state")
    reopened = FileRaftLog.open(tmp_path, now_ms=1)
    assert (reopened.start_offset, reopened.end_offset, reopened.last_fetched_epoch()) == (20, 20, 4)


# -- the quorum over file logs, under the simulation ----------------------------------------------

FILE_LOG_SEEDS = 20


@pytest.mark.parametrize(
    "name",
    ["leader_killed", "lose_unflushed_tail", "all_killed_majority_restarted", "follower_behind_the_log_start"],
)
def test_the_quorum_over_file_logs_holds_every_invariant(tmp_path: Path, name: str) -> None:
    """The simulated quorum with every node's log in a real directory: crashes cut the files back
    to what was fsynced and the node restarts from what kafkalike.log recovers."""
    crashes_with_a_lost_tail = 0
    for seed in range(FILE_LOG_SEEDS):
        logs: list[SimFileRaftLog] = []

        def make(node_id: int, seed: int = seed, logs: list[SimFileRaftLog] = logs) -> SimFileRaftLog:
            log = SimFileRaftLog.create(tmp_path / f"seed-{seed}" / f"node-{node_id}" / "__cluster_metadata-0")
            logs.append(log)
            return log

        run_seed(FAMILIES[name], seed, log_factory=make)
        crashes_with_a_lost_tail += sum(log.crashes_with_a_lost_tail for log in logs)
        for log in logs:
            log.close()
    if name == "lose_unflushed_tail":
        assert crashes_with_a_lost_tail > 0  # the scenario did cut files
