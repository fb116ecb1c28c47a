"""The leader epoch cache and OffsetForLeaderEpoch answers."""

from __future__ import annotations

from pathlib import Path

from logtest_batches import make_batch

from kafkalike.log import LeaderEpochCache, LogConfig, MemoryLogDirectory, PartitionLog


def test_epochs_start_where_their_first_batch_lands(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0)
    for epoch, count in ((0, 3), (2, 2), (5, 4)):
        for _ in range(count):
            log.append(make_batch([b"a", b"b"]), leader_epoch=epoch, now_ms=0)
    assert log.epoch_cache.entries() == [(0, 0), (2, 6), (5, 10)]
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 6\n5 10\n"
    assert log.end_offset_for_epoch(0) == (0, 6)
    assert log.end_offset_for_epoch(1) == (0, 6)  # unknown epoch: the previous one's end
    assert log.end_offset_for_epoch(2) == (2, 10)
    assert log.end_offset_for_epoch(5) == (5, 18)  # the current epoch ends at the log end
    assert log.end_offset_for_epoch(6) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert [log.epoch_for_offset(o) for o in (0, 5, 6, 9, 10, 17)] == [0, 0, 2, 2, 5, 5]


def test_epoch_older_than_all_known_answers_first_start(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0)
    log.append(make_batch([b"a"]), leader_epoch=3, now_ms=0)
    log.append(make_batch([b"a"]), leader_epoch=4, now_ms=0)
    assert log.end_offset_for_epoch(1) == (1, 0)
    assert log.end_offset_for_epoch(3) == (3, 1)


def test_truncation_trims_the_cache_at_both_ends() -> None:
    cache = LeaderEpochCache(MemoryLogDirectory())
    for epoch, offset in ((1, 0), (2, 10), (4, 20), (6, 30)):
        assert cache.assign(epoch, offset)
    assert not cache.assign(6, 35)  # same epoch, later offset: nothing new
    cache.truncate_from_end(25)
    assert cache.entries() == [(1, 0), (2, 10), (4, 20)]
    cache.truncate_from_start(15)
    assert cache.entries() == [(2, 15), (4, 20)]
    # A lower epoch at a lower offset replaces what follows it, as after an unclean election.
    cache.assign(3, 18)
    assert cache.entries() == [(2, 15), (3, 18)]


def test_truncate_to_rewinds_epochs(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=1024), 0)
    for epoch in range(6):
        for _ in range(5):
            log.append(make_batch([b"x" * 30]), leader_epoch=epoch, now_ms=0)
    assert log.truncate_to(12, now_ms=0)
    assert log.log_end_offset == 12
    assert log.epoch_cache.entries() == [(0, 0), (1, 5), (2, 10)]
    log.append(make_batch([b"new"]), leader_epoch=7, now_ms=0)
    assert log.end_offset_for_epoch(2) == (2, 12)
    assert log.read_bytes(12, 1 << 20)[:8] == (12).to_bytes(8, "big")
