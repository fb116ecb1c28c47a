"""Where the transaction coordinator's records go: the partitions of ``__transaction_state``.

The append and the read-back are ``kafkalike.log.coordinator_log``'s, shared with the group
coordinator; this module names them for the transaction coordinator.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from kafkalike.log import PartitionLog
from kafkalike.log.coordinator_log import CoordinatorLogStore, CoordinatorStore
from kafkalike.log.coordinator_log import StoreError as StoreError
from kafkalike.log.coordinator_log import read_records as read_coordinator_records
from kafkalike.protocol.errors import ProtocolError
from kafkalike.protocol.records import RecordBatchHeader, decode_records
from kafkalike.txn.records import LoadedTxn, RecordError, TxnRecord, decode_record

log = logging.getLogger("kafkalike.txn")

TxnStore = CoordinatorStore
LogTxnStore = CoordinatorLogStore


def read_records(plog: PartitionLog) -> Iterator[TxnRecord]:
    """Every (key, value) of a partition, in log order; control batches are skipped."""
    for _, record in read_coordinator_records(plog, skip_transactional=False):
        yield record


class TxnLogScan:
    """One ``__transaction_state`` partition read back for a load, batch by batch in log order:
    each record decoded (None for a key version this broker does not know). Touches no
    coordinator, so it runs on a worker thread; ``replay_decoded`` applies what it gives."""

    def feed(self, blob: bytes, pos: int, header: RecordBatchHeader) -> list[LoadedTxn | None]:
        if header.is_control:
            return []
        try:
            records = decode_records(blob, pos, header)
        except ProtocolError as exc:
            log.warning("skipping an unreadable batch at offset %d: %s", header.base_offset, exc)
            return []
        loaded: list[LoadedTxn | None] = []
        for record in records:
            if record.key is None:
                continue
            try:
                loaded.append(decode_record(record.key, record.value))
            except RecordError as exc:
                log.warning("skipping an unreadable record in the transaction state topic: %s", exc)
        return loaded

    def finish(self) -> None:
        """Nothing but the records: a loaded shard finds what is half-way in its own state."""
