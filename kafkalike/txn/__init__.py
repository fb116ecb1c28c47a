"""The transaction coordinator: transactional ids, producer epochs and fencing, and the two-phase
end of a transaction (no I/O, no clock).

``TransactionCoordinator`` is a synchronous state machine driven by requests and
``poll(now_ms)``; its durable state goes through a ``TxnStore`` into ``__transaction_state`` in
Kafka's record layout and comes back with ``replay``. The markers that end a transaction leave as
``MarkerJob``s for the server to write through WriteTxnMarkers. The server wraps it in a trio
adapter.
"""

from kafkalike.txn.api import DescribedTxn, InitResult, ListedTxn, ListResult, MarkerJob, ProducerIdUnavailable
from kafkalike.txn.config import TxnConfig
from kafkalike.txn.coordinator import TransactionCoordinator
from kafkalike.txn.metadata import TopicPartition, TxnMetadata, TxnTransit
from kafkalike.txn.records import TRANSACTION_STATE_TOPIC, partition_for
from kafkalike.txn.state import TxnState
from kafkalike.txn.store import LogTxnStore, StoreError, TxnLogScan, TxnStore, read_records

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "DescribedTxn",
    "InitResult",
    "ListResult",
    "ListedTxn",
    "LogTxnStore",
    "MarkerJob",
    "ProducerIdUnavailable",
    "StoreError",
    "TopicPartition",
    "TransactionCoordinator",
    "TxnConfig",
    "TxnLogScan",
    "TxnMetadata",
    "TxnState",
    "TxnStore",
    "TxnTransit",
    "partition_for",
    "read_records",
]
