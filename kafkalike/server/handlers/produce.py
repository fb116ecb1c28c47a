"""Produce (key 0): v0-12 advertised (v0-2 answered with UNSUPPORTED_VERSION, as Kafka 4.x does).

Per partition: every batch's header and CRC are checked (never its records), then the bytes
are appended as received with offsets and leader epoch assigned in place. Idempotent
producers' duplicates are acknowledged with their original offsets without a second append.
acks=0 gets no response; with one replica, acks=1 and acks=-1 are both answered once the
batch is in the log. v3+ accepts only message format v2 (INVALID_RECORD otherwise).

Transactional batches (KIP-890 part 1): the first batch of a transaction on a partition is only
accepted once the transaction coordinator confirms the partition joined the producer's ongoing
transaction (AddPartitionsToTxn); otherwise INVALID_TXN_STATE, or TRANSACTION_ABORTABLE for
v11+ clients, INVALID_PRODUCER_EPOCH for a fenced epoch, and NOT_ENOUGH_REPLICAS (which every
client retries) while the coordinator is still ending the previous transaction
(``transaction.partition.verification.enable=false`` turns this off, as in Kafka). v12 means
transactions v2, where that first batch would add the partition implicitly; this broker does
not run those (see end_txn.py), so v12 batches are verified like v11 ones.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kafkalike.log.compaction import batch_has_null_key
from kafkalike.log.errors import (
    AppendLargerThanSegment,
    InvalidProducerEpoch,
    InvalidTxnState,
    KafkaStorageError,
    LogError,
    OutOfOrderSequence,
    RecordBatchTooLarge,
    UnknownProducerId,
)
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode, ProtocolError
from kafkalike.protocol.records import RecordBatchHeader, batch_crc_ok, iter_batches
from kafkalike.server.broker import PartitionState
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

log = logging.getLogger("kafkalike.produce")
_LOG_ERRORS: dict[type[LogError], ErrorCode] = {
    OutOfOrderSequence: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    InvalidProducerEpoch: ErrorCode.INVALID_PRODUCER_EPOCH,
    UnknownProducerId: ErrorCode.UNKNOWN_PRODUCER_ID,
    InvalidTxnState: ErrorCode.INVALID_TXN_STATE,
    AppendLargerThanSegment: ErrorCode.RECORD_LIST_TOO_LARGE,  # before its base class: the first match wins
    RecordBatchTooLarge: ErrorCode.MESSAGE_TOO_LARGE,
    KafkaStorageError: ErrorCode.KAFKA_STORAGE_ERROR,  # the disk refused the write; logged by the log layer
}
# Kafka answers these with its unknown append info: log_start_offset -1.
_WITHOUT_LOG_START = frozenset(
    {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.KAFKA_STORAGE_ERROR}
)


# Verification failures an older client would not retry: answered as NOT_ENOUGH_REPLICAS, as Kafka does.
_RETRY_VERIFICATION = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


class ProduceError(Exception):
    """``with_log_start``: the answer carries the partition's log start offset, as Apache Kafka's
    does for errors found while appending (its known request-level errors carry -1)."""

    def __init__(self, code: ErrorCode, message: str, with_log_start: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.with_log_start = with_log_start


@handles(0, 0, 12)
async def handle_produce(ctx: RequestContext, request: Message) -> Mapping[str, Any] | None:
    acks = request.acks
    responses = []
    for topic in request.topic_data:
        partitions = []
        for part in topic.partition_data:
            partitions.append(
                await _produce_partition(ctx, topic.name, part.index, part.records, acks, request.transactional_id)
            )
        responses.append({"name": topic.name, "partition_responses": partitions})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


async def _produce_partition(
    ctx: RequestContext, topic: str, index: int, records: bytes | None, acks: int, transactional_id: str | None
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "index": index,
        "error_code": 0,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": None,
    }
    state = ctx.broker.partitions.get((topic, index))
    try:
        if ctx.version < 3:
            raise ProduceError(ErrorCode.UNSUPPORTED_VERSION, "Produce v0-2 are not supported")
        if acks not in (0, 1, -1):
            raise ProduceError(ErrorCode.INVALID_REQUIRED_ACKS, f"Invalid required acks {acks}")
        if state is None:
            raise ProduceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if ctx.broker.faults.is_paused(topic, index):
            raise ProduceError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "This partition's leader is paused.")
        if topic.startswith("__") and topic != "__consumer_offsets":
            raise ProduceError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
        appended = await _append(ctx, state, records, transactional_id)
    except ProduceError as exc:
        log.info("produce to %s-%d rejected: %s", topic, index, exc)
        # Apache Kafka leaves error_message null for these (it fills it for per-record errors only).
        result["error_code"] = exc.code
        if exc.with_log_start and state is not None:
            result["log_start_offset"] = state.log.log_start_offset
        return result
    result.update(appended)
    return result


async def _append(
    ctx: RequestContext, state: PartitionState, records: bytes | None, transactional_id: str | None
) -> dict[str, Any]:
    if not records:
        raise ProduceError(ErrorCode.INVALID_RECORD, "Produce request has no record batches")
    # A writable view of the request frame is stamped in place; anything else is copied once.
    buf = records if isinstance(records, memoryview) and not records.readonly else bytearray(records)
    max_bytes = state.log.config.max_message_bytes
    compacted = state.log.config.compacts
    transactional: RecordBatchHeader | None = None
    try:
        for pos, header in iter_batches(buf):
            _validate(buf, pos, header, max_bytes)
            if header.is_transactional and transactional is None:
                transactional = header
            # Only compacted topics pay for decoding: every record there needs a key.
            if compacted and batch_has_null_key(buf, pos, header):
                raise ProduceError(
                    ErrorCode.INVALID_RECORD,
                    f"Compacted topic cannot accept message without key in topic partition {state.topic}-{state.index}.",
                )
    except ProtocolError as exc:
        raise ProduceError(exc.error_code, str(exc)) from None
    if transactional is not None and transactional_id is not None and ctx.broker.txn.verification_enabled:
        _verify_transaction(ctx, state, transactional, transactional_id)
    try:
        # Off the event loop for its fsync when flush.messages / flush.ms make it flush.
        appended = await ctx.broker.append(
            state, buf, log_append_time=state.log.config.message_timestamp_type == "LogAppendTime"
        )
    except LogError as exc:
        code = next((c for t, c in _LOG_ERRORS.items() if isinstance(exc, t)), ErrorCode.UNKNOWN_SERVER_ERROR)
        raise ProduceError(code, str(exc), with_log_start=code not in _WITHOUT_LOG_START) from None
    return {
        "base_offset": appended.first_offset,
        "log_append_time_ms": appended.log_append_time_ms,
        "log_start_offset": appended.log_start_offset,
    }


def _verify_transaction(
    ctx: RequestContext, state: PartitionState, header: RecordBatchHeader, transactional_id: str
) -> None:
    """Kafka's transaction verification, asked only for a producer's first transactional batch
    on the partition (later ones find its transaction open in the producer state)."""
    pid, epoch = header.producer_id, header.producer_epoch
    entry = state.log.producer_state.producers.get(pid)
    if entry is not None and entry.current_txn_first_offset is not None and entry.epoch == epoch:
        return
    tp = (state.topic, state.index)
    error = ctx.broker.txn.verify(transactional_id, pid, epoch, [tp])[tp]
    if error is ErrorCode.NONE:
        return
    if error is ErrorCode.PRODUCER_FENCED:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    elif error is ErrorCode.TRANSACTION_ABORTABLE and ctx.version <= 10:
        error = ErrorCode.INVALID_TXN_STATE
    elif error in _RETRY_VERIFICATION:
        error = ErrorCode.NOT_ENOUGH_REPLICAS
    raise ProduceError(error, f"transactional batch of producer {pid} not verified: {error.name}")


def _validate(buf: bytearray, pos: int, header: Any, max_bytes: int) -> None:
    """What Kafka's LogValidator checks of a v2 batch from a producer, header-only."""
    if header.size > max_bytes:
        raise ProduceError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch size in the append is {header.size} bytes which exceeds the maximum configured value of {max_bytes}.",
        )
    if not batch_crc_ok(buf, pos, header):
        raise ProduceError(ErrorCode.CORRUPT_MESSAGE, "Record batch is corrupt (CRC mismatch)")
    if header.base_offset != 0:
        raise ProduceError(
            ErrorCode.INVALID_RECORD,
            f"The baseOffset of the record batch should be 0, but it is {header.base_offset}",
            with_log_start=True,
        )
    if header.records_count <= 0 or header.records_count != header.last_offset_delta + 1:
        raise ProduceError(ErrorCode.INVALID_RECORD, "Inconsistent batch offset range and record count", True)
    if header.is_control:
        raise ProduceError(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records", True)
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise ProduceError(ErrorCode.INVALID_RECORD, "Invalid sequence number for an idempotent batch", True)
