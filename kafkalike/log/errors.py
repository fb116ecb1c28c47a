"""Exceptions raised by the log layer.

Each carries the Kafka error code the server should answer with, so the server maps them without a
table of its own. Codes that the protocol layer's ``ErrorCode`` already names are taken from it; the
producer-state codes are written out here (Kafka's values) until that enum grows them.
"""

from __future__ import annotations

from kafkalike.protocol.errors import ErrorCode


class LogError(Exception):
    """Base of everything the log layer raises on purpose."""

    error_code: int = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRange(LogError):
    """A read or lookup below the log start offset or beyond the log end offset."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]",
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class CorruptLogError(LogError):
    """Bytes handed to ``append`` that are not a sequence of whole v2 batches."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class RecordBatchTooLarge(LogError):
    """A batch larger than ``max.message.bytes`` (Kafka's RecordTooLargeException); the base of
    every append refused for its size."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class AppendLargerThanSegment(RecordBatchTooLarge):
    """An append larger than ``segment.bytes``, which no segment could hold (Kafka's
    RecordBatchTooLargeException, checked after every batch passed ``max.message.bytes``)."""

    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class UnexpectedAppendOffset(LogError):
    """A follower append whose first offset is below the log end offset (Kafka's
    UnexpectedAppendOffsetException): the fetched batches overlap what the log holds.
    ``first_offset`` and ``last_offset`` are the append's, so the caller can tell a log that
    may restart at ``first_offset`` (empty, the leader's log start inside the batch)."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class OffsetsOutOfOrder(LogError):
    """A follower append whose batches' offsets do not rise (Kafka's OffsetsOutOfOrderException)."""


class InconsistentTopicId(LogError):
    """The partition directory belongs to another incarnation of the topic (partition.metadata)."""

    error_code = 103  # INCONSISTENT_TOPIC_ID


class KafkaStorageError(LogError):
    """A write the disk refused (ENOSPC, EIO, EMFILE, EROFS...): the request that needed it fails
    with KAFKA_STORAGE_ERROR, and the log is left as it was before the write (see
    ``PartitionLog.append``), so the next write after the cause is gone succeeds."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class LogClosed(LogError):
    """An operation on a log after ``close()`` or ``delete()``."""


class ProducerStateError(LogError):
    """An idempotent/transactional append refused by the producer-state checks."""


class OutOfOrderSequence(ProducerStateError):
    error_code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpoch(ProducerStateError):
    error_code = 47  # INVALID_PRODUCER_EPOCH


class InvalidTxnState(ProducerStateError):
    error_code = 48  # INVALID_TXN_STATE


class UnknownProducerId(ProducerStateError):
    error_code = 59  # UNKNOWN_PRODUCER_ID


class TransactionCoordinatorFenced(ProducerStateError):
    error_code = 52  # TRANSACTION_COORDINATOR_FENCED
