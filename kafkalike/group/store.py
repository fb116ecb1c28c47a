"""Where the coordinator's records go: the partitions of ``__consumer_offsets``.

The coordinator sees one narrow interface, ``GroupStore.append(partition, records, now_ms)``,
which returns once the records are durable (flushed: acks=all on a single node) or raises
``StoreError``. ``LogGroupStore`` writes them as one v2 batch per call into a ``PartitionLog``;
``read_records`` reads a partition back for the replay at start-up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from kafkalike.group.records import CoordinatorRecord
from kafkalike.log import AppendOrigin, LogError, PartitionLog, RecordBatchTooLarge
from kafkalike.protocol.errors import ProtocolError
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches

log = logging.getLogger("kafkalike.group.store")
READ_CHUNK_BYTES = 1 << 20


class StoreError(Exception):
    """Records that could not be made durable; ``too_large`` when the batch was refused for size."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


class GroupStore(Protocol):
    def append(self, partition: int, records: Sequence[CoordinatorRecord], now_ms: int) -> None: ...


class LogGroupStore:
    """Appends to partition logs that ``log_for(partition)`` returns with their leader epoch.

    ``on_append(partition)`` runs after each durable append (the server moves the high
    watermark and wakes fetchers there).
    """

    def __init__(
        self,
        log_for: Callable[[int], tuple[PartitionLog, int]],
        on_append: Callable[[int], None] | None = None,
    ) -> None:
        self._log_for = log_for
        self._on_append = on_append

    def append(self, partition: int, records: Sequence[CoordinatorRecord], now_ms: int) -> None:
        if not records:
            return
        batch = build_batch([Record(key=k, value=v) for k, v in records], base_timestamp=now_ms)
        try:
            plog, epoch = self._log_for(partition)
            plog.append(bytearray(batch), leader_epoch=epoch, now_ms=now_ms, origin=AppendOrigin.COORDINATOR)
            plog.flush(now_ms)
        except RecordBatchTooLarge as exc:
            raise StoreError(str(exc), too_large=True) from exc
        except (LogError, OSError) as exc:
            raise StoreError(f"cannot append to partition {partition}: {exc}") from exc
        if self._on_append is not None:
            self._on_append(partition)


def read_records(plog: PartitionLog) -> Iterator[tuple[int, CoordinatorRecord]]:
    """Every (offset, (key, value)) of a partition, in order; control and transactional batches
    are skipped (the latter are replayed by ``txn_offsets``, which knows their fate)."""
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        blob = plog.read_bytes(offset, READ_CHUNK_BYTES, min_one_batch=True)
        if not blob:
            return
        start = offset
        for pos, header in iter_batches(blob):
            offset = header.last_offset + 1
            if header.is_control or header.is_transactional:
                continue  # transactional offset commits: txn_offsets.replay_transactional_offsets
            try:
                records = decode_records(blob, pos, header)
            except ProtocolError as exc:
                log.warning("skipping an unreadable batch at offset %d: %s", header.base_offset, exc)
                continue
            for record in records:
                if record.key is not None:
                    yield record.offset(header), (record.key, record.value)
        if offset <= start:
            return
