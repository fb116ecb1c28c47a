"""A crash at each step of swapping a cleaned segment in, then a restart from what is stored.

Swap steps (``PartitionLog.replace_segments``): the cleaned data is written and flushed as
``.log.cleaned`` ("cleaned"), renamed to ``.log.swap`` ("swap"), each replaced segment renamed to
``.deleted`` ("deleted-<n>"), the swap renamed to ``.log`` ("renamed") and its indexes written
("done"). The loader must bring back the old segments before "swap" and the cleaned one from
"swap" on, with no leftovers, no offset twice and every latest value readable.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cleaner_support import (
    CONFIG,
    STORAGES,
    Crash,
    Row,
    Storage,
    check_lookups,
    crash_at,
    fold,
    produce,
    rows,
)

from kafkalike.log import LogCleaner, PartitionLog

NOW = 10_000
ONE_GROUP = CONFIG.with_overrides(segment_bytes=4096)  # the three rolled segments fit one cleaned segment
POINTS = ["cleaned", "swap", "deleted-0", "deleted-1", "deleted-2", "renamed", "done"]
LEFTOVERS = {  # what the crash leaves behind, for the loader to sort out
    "cleaned": (".log.cleaned",),
    "swap": (".log.swap",),
    "deleted-0": (".log.swap", ".log.deleted"),
    "deleted-1": (".log.swap", ".log.deleted"),
    "deleted-2": (".log.swap", ".log.deleted"),
    "renamed": (".log.deleted",),  # the cleaned segment is in place, its index files not yet written
    "done": (".log.deleted",),
}


def build(storage: Storage) -> tuple[PartitionLog, list[Row]]:
    """Three small segments (one cleaning group) full of overwrites and a tombstone, then an active one."""
    log = storage.open(ONE_GROUP)
    written: list[Row] = []
    for i in range(24):
        key, value = b"k%d" % (i % 5), (None if i == 20 else b"v%d" % i)
        written.append((produce(log, [(key, value)], now_ms=i), key, value))
        if i % 8 == 7:
            log.roll(i)
    written.append((produce(log, [(b"tail", b"t")], now_ms=30), b"tail", b"t"))
    assert len(log.segments) == 4
    return log, written


def cleaned_reference(tmp_path: Path) -> list[Row]:
    log, _written = build(Storage("memory", tmp_path))
    stats = LogCleaner().clean_log(log, NOW)
    assert stats.groups_swapped == 1 and stats.segments_cleaned == 3
    return rows(log)


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("kind", STORAGES)
def test_a_crash_during_a_swap_leaves_a_whole_log(tmp_path: Path, kind: str, point: str) -> None:
    storage = Storage(kind, tmp_path)
    log, written = build(storage)
    before, after = rows(log), cleaned_reference(tmp_path)
    assert after != before and fold(after) == fold(before)
    with pytest.raises(Crash):
        LogCleaner(fault=crash_at(point)).clean_log(log, NOW)
    for suffix in LEFTOVERS[point]:
        assert any(name.endswith(suffix) for name in storage.names())
    # The process is gone: no close, no flush, no snapshot. A restart opens what is stored.
    reopened = storage.open(ONE_GROUP, now_ms=NOW)
    assert not [n for n in storage.names() if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert rows(reopened) == (before if point == "cleaned" else after)
    assert reopened.log_end_offset == written[-1][0] + 1
    check_lookups(reopened)
    LogCleaner().clean_log(reopened, NOW)  # and cleaning picks up from there
    assert rows(reopened) == after
    reopened.close()
    assert rows(storage.open(ONE_GROUP, clean_shutdown=True)) == after


@pytest.mark.parametrize("kind", STORAGES)
def test_a_crash_in_the_second_group_keeps_the_first_groups_swap(tmp_path: Path, kind: str) -> None:
    storage = Storage(kind, tmp_path)
    log = storage.open(CONFIG.with_overrides(segment_bytes=700))
    for i in range(60):
        produce(log, [(b"k%d" % (i % 4), b"value-%d" % i)], now_ms=i)
    before = rows(log)
    swaps = 0

    def fault(name: str) -> None:
        nonlocal swaps
        if name == "swap":
            swaps += 1
            if swaps == 2:
                raise Crash(name)

    with pytest.raises(Crash):
        LogCleaner(fault=fault).clean_log(log, NOW)
    reopened = storage.open(CONFIG.with_overrides(segment_bytes=700), NOW)
    survivors = rows(reopened)
    assert len(survivors) < len(before) and set(survivors) <= set(before)
    assert fold(survivors) == fold(before)
    check_lookups(reopened)


def test_a_swap_above_a_cleaned_file_is_dropped_not_completed(tmp_path: Path) -> None:
    """Kafka's rule (KAFKA-6264): a .swap at or above a .cleaned file's offset is unfinished work."""
    storage = Storage("file", tmp_path)
    log, _written = build(storage)
    before = rows(log)
    log.close()
    directory = tmp_path / "t-0"
    (directory / "00000000000000000008.log.swap").write_bytes(b"")
    (directory / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    reopened = storage.open(ONE_GROUP)
    assert not [n for n in storage.names() if n.endswith((".cleaned", ".swap"))]
    assert rows(reopened) == before
