"""The storage layer: partition logs on disk in Kafka's layout (segments, indexes, checkpoints).

No networking and no clock: callers pass ``now_ms``. The broker talks to ``LogManager`` and
``PartitionLog``; the rest is exported for tests and tools.
"""

from kafkalike.log.cleaner import CleanableLog, LogCleaner
from kafkalike.log.compaction import CleanerStats
from kafkalike.log.config import LogConfig
from kafkalike.log.epoch_cache import LeaderEpochCache
from kafkalike.log.errors import (
    AppendLargerThanSegment,
    CorruptLogError,
    InconsistentTopicId,
    InvalidProducerEpoch,
    InvalidTxnState,
    LogClosed,
    LogError,
    OffsetOutOfRange,
    OffsetsOutOfOrder,
    OutOfOrderSequence,
    ProducerStateError,
    RecordBatchTooLarge,
    TransactionCoordinatorFenced,
    UnexpectedAppendOffset,
    UnknownProducerId,
)
from kafkalike.log.manager import LogManager
from kafkalike.log.partition_log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendResult,
    FileRange,
    OffsetAndTimestamp,
    PartitionLog,
    ReadResult,
    TimestampAndOffset,
)
from kafkalike.log.producer_state import AppendOrigin, CheckResult, ProducerStateManager, Verdict
from kafkalike.log.storage import FileLogDirectory, LogDirectory, MemoryLogDirectory, SegmentFile
from kafkalike.log.txn_index import AbortedTxn, TransactionIndex

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AbortedTxn",
    "AppendLargerThanSegment",
    "AppendOrigin",
    "AppendResult",
    "CheckResult",
    "CleanableLog",
    "CleanerStats",
    "CorruptLogError",
    "FileLogDirectory",
    "FileRange",
    "InconsistentTopicId",
    "InvalidProducerEpoch",
    "InvalidTxnState",
    "LeaderEpochCache",
    "LogCleaner",
    "LogClosed",
    "LogConfig",
    "LogDirectory",
    "LogError",
    "LogManager",
    "MemoryLogDirectory",
    "OffsetAndTimestamp",
    "OffsetOutOfRange",
    "OffsetsOutOfOrder",
    "OutOfOrderSequence",
    "PartitionLog",
    "ProducerStateError",
    "ProducerStateManager",
    "ReadResult",
    "RecordBatchTooLarge",
    "SegmentFile",
    "TimestampAndOffset",
    "TransactionCoordinatorFenced",
    "TransactionIndex",
    "UnexpectedAppendOffset",
    "UnknownProducerId",
    "Verdict",
]
