"""When a node snapshots its metadata image, as Kafka's SnapshotGenerator decides.

After each committed batch is replayed, a snapshot is due when the bytes replayed since the last
snapshot reach ``metadata.log.max.record.bytes.between.snapshots`` (20 MiB), or else when
``metadata.log.max.snapshot.interval.ms`` (1 hour; 0 turns the time rule off) has passed since
the last snapshot. Time alone never triggers one: it is checked when records arrive, so an idle
log is not snapshotted again and again. Never in the middle of a metadata transaction, whose
records the image does not hold yet. Loading or writing a snapshot starts the count again.

A plain object driven by calls with ``now_ms``; it reads no clock.
"""

from __future__ import annotations

from kafkalike.configs import declared_int

MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS_DEFAULT = declared_int("metadata.log.max.record.bytes.between.snapshots")
MAX_SNAPSHOT_INTERVAL_MS_DEFAULT = declared_int("metadata.log.max.snapshot.interval.ms")


class SnapshotPolicy:
    def __init__(
        self,
        now_ms: int,
        *,
        max_record_bytes_between_snapshots: int = MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS_DEFAULT,
        max_snapshot_interval_ms: int = MAX_SNAPSHOT_INTERVAL_MS_DEFAULT,
    ) -> None:
        if max_record_bytes_between_snapshots < 1 or max_snapshot_interval_ms < 0:
            raise ValueError("snapshot limits: at least 1 byte, at least 0 ms")
        self.max_bytes = max_record_bytes_between_snapshots
        self.max_interval_ms = max_snapshot_interval_ms
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = now_ms

    def on_batch_replayed(self, size_bytes: int, now_ms: int, *, in_transaction: bool = False) -> str | None:
        """Count a replayed batch; the reason a snapshot of the new image is due, or None."""
        self.bytes_since_snapshot += size_bytes
        if in_transaction:
            return None
        if self.bytes_since_snapshot >= self.max_bytes:
            return f"we have replayed at least {self.max_bytes} bytes"
        if self.max_interval_ms and now_ms - self.last_snapshot_ms >= self.max_interval_ms:
            return f"we have waited at least {self.max_interval_ms} ms"
        return None

    def on_snapshot(self, now_ms: int) -> None:
        """A snapshot was written or loaded: count from zero again."""
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = now_ms
