"""Snapshots by size and by time, as Kafka's SnapshotGenerator takes them."""

from __future__ import annotations

import pytest

from kafkalike.controller.snapshot_policy import (
    MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS_DEFAULT,
    MAX_SNAPSHOT_INTERVAL_MS_DEFAULT,
    SnapshotPolicy,
)


def test_kafkas_defaults() -> None:
    policy = SnapshotPolicy(0)
    assert (policy.max_bytes, policy.max_interval_ms) == (20 * 1024 * 1024, 3_600_000)
    assert (MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS_DEFAULT, MAX_SNAPSHOT_INTERVAL_MS_DEFAULT) == (20971520, 3600000)


def test_due_once_enough_bytes_were_replayed_then_counted_again() -> None:
    policy = SnapshotPolicy(0, max_record_bytes_between_snapshots=100, max_snapshot_interval_ms=0)
    assert policy.on_batch_replayed(60, 1) is None
    assert policy.on_batch_replayed(40, 2) == "we have replayed at least 100 bytes"
    policy.on_snapshot(2)
    assert policy.on_batch_replayed(99, 3) is None


def test_due_by_time_only_when_records_arrive() -> None:
    policy = SnapshotPolicy(1000, max_record_bytes_between_snapshots=10**9, max_snapshot_interval_ms=500)
    assert policy.on_batch_replayed(1, 1499) is None
    assert policy.on_batch_replayed(1, 1500) == "we have waited at least 500 ms"
    policy.on_snapshot(1500)
    assert policy.on_batch_replayed(1, 1999) is None


def test_never_inside_a_metadata_transaction() -> None:
    policy = SnapshotPolicy(0, max_record_bytes_between_snapshots=10, max_snapshot_interval_ms=1)
    assert policy.on_batch_replayed(50, 100, in_transaction=True) is None
    assert policy.on_batch_replayed(1, 101) is not None  # the bytes counted meanwhile still count


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        SnapshotPolicy(0, max_record_bytes_between_snapshots=0)
    with pytest.raises(ValueError):
        SnapshotPolicy(0, max_snapshot_interval_ms=-1)
