"""What goes into the transaction coordinator and what comes out: plain frozen dataclasses.

Handlers translate wire messages into calls and these back into wire messages; the coordinator
never sees a wire message nor an API version. Version-dependent error mapping (PRODUCER_FENCED
for old clients, TRANSACTION_ABORTABLE) stays in the handlers.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalike.protocol.errors import ErrorCode
from kafkalike.txn.metadata import TopicPartition


class ProducerIdUnavailable(Exception):
    """What ``allocate_producer_id`` raises when no id can be handed out now; ``code`` is the
    answer InitProducerId gives (COORDINATOR_LOAD_IN_PROGRESS while a block is on its way)."""

    code: ErrorCode


@dataclass(frozen=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class MarkerJob:
    """One WriteTxnMarkers entry the coordinator needs written: the end of one transaction on
    some of its partitions. The answer goes back through ``on_markers_written``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class DescribedTxn:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class ListedTxn:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class ListResult:
    error: ErrorCode
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[ListedTxn, ...] = ()
