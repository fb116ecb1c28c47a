"""Where the transaction coordinator's records go: the partitions of ``__transaction_state``.

The append and the read-back are ``kafkalike.log.coordinator_log``'s, shared with the group
coordinator; this module names them for the transaction coordinator.
"""

from __future__ import annotations

from collections.abc import Iterator

from kafkalike.log import PartitionLog
from kafkalike.log.coordinator_log import CoordinatorLogStore, CoordinatorStore
from kafkalike.log.coordinator_log import StoreError as StoreError
from kafkalike.log.coordinator_log import read_records as read_coordinator_records
from kafkalike.txn.records import TxnRecord

TxnStore = CoordinatorStore
LogTxnStore = CoordinatorLogStore


def read_records(plog: PartitionLog) -> Iterator[TxnRecord]:
    """Every (key, value) of a partition, in log order; control batches are skipped."""
    for _, record in read_coordinator_records(plog, skip_transactional=False):
        yield record
