"""Produce (key 0): v0-12 advertised (v0-2 answered with UNSUPPORTED_VERSION, as Kafka 4.x does).

Per partition: the records are validated as Kafka's LogValidator does, every record read and
compressed batches decompressed as a stream (``protocol/validation.py``: Kafka's codes, its
error_message and RecordError entries, v8+); a refused batch stores nothing and the other
partitions of the request are appended all the same. Two faults fail the whole request, as in
Kafka, which reads every partition's first entry before anything else: an entry whose size or
magic is impossible, and (before v7) codecs 5-7 (every partition gets the code and a message).
The batch is then appended as received (or rebuilt, for a topic ``compression.type`` other than
the batch's) with offsets and leader epoch assigned in place. Idempotent producers' duplicates
are acknowledged with their original offsets without a second append. acks=0 gets no response;
acks=1 is answered once the batch is in the leader's log; acks=-1 (all) is refused with
NOT_ENOUGH_REPLICAS before anything is appended while the ISR is below the effective
min.insync.replicas, and otherwise answered once the high watermark passed the batch
(NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell below it meanwhile, REQUEST_TIMED_OUT after
the request's timeout_ms, NOT_LEADER_OR_FOLLOWER if the leadership moved), as Kafka's
DelayedProduce answers: every partition of the request waits together. v3+
accepts only message format v2 (INVALID_RECORD otherwise).

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
from collections.abc import Mapping, Sequence
from typing import Any

from kafkalike.log.config import LogConfig
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
from kafkalike.protocol.records import Buffer, RecordBatchHeader, read_batch_header
from kafkalike.protocol.validation import (
    RecordError,
    RecordsRefused,
    TopicSettings,
    check_request_records,
    request_fault,
    validate_produce_records,
)
from kafkalike.replica import Partition, PartitionError
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import AnswerLater, handles
from kafkalike.server.routing import LeaderHints, partition_or_error

log = logging.getLogger("kafkalike.produce")
# Kafka's Topic.isInternal names; only its own admin tools (this client id) may append to them.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
ADMIN_CLIENT_ID = "__admin_client"
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
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


class ProduceError(Exception):
    """``with_log_start``: the answer carries the partition's log start offset, as Apache Kafka's
    does for errors found while appending (its known request-level errors carry -1)."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        with_log_start: bool = False,
        error_message: str | None = None,
        record_errors: list[RecordError] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.with_log_start = with_log_start
        self.error_message = error_message
        self.record_errors = record_errors or []


@handles(0, 0, 12)
async def handle_produce(ctx: RequestContext, request: Message) -> Mapping[str, Any] | AnswerLater | None:
    acks = request.acks
    fault = _request_fault(ctx, request)
    if fault is not None:
        log.info("produce request rejected: %s", fault)
        answer = _answer_all(request, fault)
    else:
        responses = []
        hints = LeaderHints(ctx)
        waiting: list[tuple[dict[str, Any], Partition, int]] = []
        for topic in request.topic_data:
            partitions = []
            for part in topic.partition_data:
                result, replicated_by = await _produce_partition(
                    ctx, topic.name, part.index, part.records, acks, request.transactional_id
                )
                if replicated_by is not None:
                    waiting.append((result, *replicated_by))
                # KIP-951: where the leader is, so the producer need not wait for a metadata refresh.
                if ctx.version >= 10 and result["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    result["current_leader"] = hints.current_leader(topic.name, part.index)
                partitions.append(result)
            responses.append({"name": topic.name, "partition_responses": partitions})
        answer = {"responses": responses, "throttle_time_ms": 0}
        if endpoints := hints.node_endpoints():
            answer["node_endpoints"] = endpoints
        reached = [p.replicated_to(o) for _, p, o in waiting]
        if waiting and None not in reached:
            # Already there (a partition without followers): answered now, as Kafka's
            # DelayedProduce completes at once when it can.
            _answer_replicated(waiting, reached)
        elif waiting:
            # Kafka's DelayedProduce times out timeout_ms after the appends.
            deadline_s = ctx.clock.monotonic_s() + max(request.timeout_ms, 0) / 1000

            async def replicated() -> Mapping[str, Any]:
                await _until_replicated(ctx, waiting, deadline_s)
                return answer

            return AnswerLater(replicated)
    if acks != 0:
        return answer
    # No answer is expected, so an error closes the connection, as in Kafka: the producer learns
    # that something failed and refreshes its metadata.
    if any(p["error_code"] for t in answer["responses"] for p in t["partition_responses"]):
        raise ProtocolError("an acks=0 produce request had errors")
    return None


async def _until_replicated(
    ctx: RequestContext, waiting: list[tuple[dict[str, Any], Partition, int]], deadline_s: float
) -> None:
    """acks=all (Kafka's DelayedProduce): until every appended partition's high watermark passed
    its batch (or its leadership moved), at most until ``deadline_s``; each answer then as Kafka's
    checkEnoughReplicasReachOffset gives it, REQUEST_TIMED_OUT where it was not reached."""
    _answer_replicated(waiting, await ctx.waiters.until_replicated([(p, o) for _, p, o in waiting], deadline_s))


def _answer_replicated(waiting: list[tuple[dict[str, Any], Partition, int]], codes: Sequence[ErrorCode | None]) -> None:
    for (result, partition, _), code in zip(waiting, codes, strict=True):
        if code is not ErrorCode.NONE:
            assert code is not None
            log.info("acks=all produce to %s-%d answered %s", *partition.tp, code.name)
            result["error_code"] = code


def _request_fault(ctx: RequestContext, request: Message) -> RecordsRefused | None:
    """Kafka reads every partition's first batch before anything else; some faults there fail all."""
    if ctx.version < 3:
        return None
    for topic in request.topic_data:
        exists = ctx.metadata.image.topics.get(topic.name) is not None
        for part in topic.partition_data:
            fault = request_fault(part.records, api_version=ctx.version, topic_exists=exists)
            if fault is not None:
                return fault
    return None


def _answer_all(request: Message, fault: RecordsRefused) -> dict[str, Any]:
    """Kafka's error response for the whole request: every partition, the same code and message."""
    partition = {
        "error_code": fault.code,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": fault.error_message,
    }
    responses = [
        {"name": t.name, "partition_responses": [{"index": p.index, **partition} for p in t.partition_data]}
        for t in request.topic_data
    ]
    return {"responses": responses, "throttle_time_ms": 0}


async def _produce_partition(
    ctx: RequestContext, topic: str, index: int, records: bytes | None, acks: int, transactional_id: str | None
) -> tuple[dict[str, Any], tuple[Partition, int] | None]:
    """The partition's answer, and for an acks=all append the offset its high watermark must
    reach before it is given."""
    result: dict[str, Any] = {
        "index": index,
        "error_code": 0,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": None,
    }
    found = partition_or_error(ctx, topic, index)
    partition = found if isinstance(found, Partition) else None
    try:
        if ctx.version < 3:
            raise ProduceError(ErrorCode.UNSUPPORTED_VERSION, "Produce v0-2 are not supported")
        if found is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise ProduceError(found, "This server does not host this topic-partition.")
        # Kafka's order: the request's own check of the records, then acks, then the partition.
        checked = _check_request_records(records, ctx.version)
        if acks not in (0, 1, -1):
            raise ProduceError(ErrorCode.INVALID_REQUIRED_ACKS, f"Invalid required acks {acks}")
        if found is ErrorCode.KAFKA_STORAGE_ERROR:  # this broker's, its log not opened
            raise ProduceError(found, f"Partition {topic}-{index} is in an offline log directory")
        if partition is None:  # in the metadata, not hosted here (Kafka's getPartitionOrException)
            raise ProduceError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "This broker is not a replica of the partition.")
        if ctx.faults.is_paused(topic, index):
            raise ProduceError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "This partition's leader is paused.")
        if topic in INTERNAL_TOPICS and ctx.header.client_id != ADMIN_CLIENT_ID:
            raise ProduceError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
        _check_leader(partition)
        appended, next_offset = await _append(ctx, partition, checked, transactional_id, acks)
    except ProduceError as exc:
        log.info("produce to %s-%d rejected: %s", topic, index, exc)
        # Apache Kafka leaves error_message null except for per-record errors.
        result["error_code"] = exc.code
        result["error_message"] = exc.error_message
        result["record_errors"] = [
            {"batch_index": e.batch_index, "batch_index_error_message": e.message} for e in exc.record_errors
        ]
        if exc.with_log_start and partition is not None:
            result["log_start_offset"] = partition.log_start_offset
        return result, None
    result.update(appended)
    return result, ((partition, next_offset) if acks == -1 else None)


def _check_leader(partition: Partition) -> None:
    """Kafka's appendRecordsToLeader: refused before validation on a replica that does not lead."""
    try:
        partition.check_request()
    except PartitionError as exc:
        raise ProduceError(exc.code, str(exc)) from None


def _check_request_records(records: bytes | None, version: int) -> Buffer:
    try:
        return check_request_records(records, api_version=version)
    except RecordsRefused as exc:
        raise ProduceError(exc.code, str(exc), exc.with_log_start) from None


async def _append(
    ctx: RequestContext, partition: Partition, records: Buffer, transactional_id: str | None, acks: int
) -> tuple[dict[str, Any], int]:
    # Kafka verifies a transactional batch's partition before its log validates the records.
    if transactional_id is not None and ctx.txn.verification_enabled:
        header = _first_header(records)
        if header is not None and header.is_transactional and header.producer_id >= 0:
            await _verify_transaction(ctx, partition, header, transactional_id)
    if acks == -1:  # Kafka's appendRecordsToLeader: before the log validates or writes anything
        try:
            partition.check_min_isr_for_acks_all()
        except PartitionError as exc:
            raise ProduceError(exc.code, str(exc)) from None
    now = ctx.clock.wall_ms()
    try:
        valid = validate_produce_records(
            records,
            _topic_settings(partition.config),
            now_ms=now,
            api_version=ctx.version,
            topic_partition=f"{partition.topic}-{partition.index}",
            request_checked=True,  # by _check_request_records, before anything else
        )
    except RecordsRefused as exc:
        raise ProduceError(exc.code, str(exc), exc.with_log_start, exc.error_message, exc.record_errors) from None
    try:
        # Off the event loop for its fsync when flush.messages / flush.ms make it flush.
        appended = await ctx.writer.append(
            partition,
            valid.records,
            log_append_time=partition.config.message_timestamp_type == "LogAppendTime",
            known_header=valid.header,  # read by validation from these bytes
        )
    except PartitionError as exc:
        raise ProduceError(exc.code, str(exc)) from None
    except LogError as exc:
        code = next((c for t, c in _LOG_ERRORS.items() if isinstance(exc, t)), ErrorCode.UNKNOWN_SERVER_ERROR)
        raise ProduceError(code, str(exc), with_log_start=code not in _WITHOUT_LOG_START) from None
    answer = {
        "base_offset": appended.base_offset,
        "log_append_time_ms": appended.log_append_time_ms,
        "log_start_offset": appended.log_start_offset,
    }
    return answer, appended.last_offset + 1


def _first_header(records: Buffer) -> RecordBatchHeader | None:
    try:
        return read_batch_header(records)
    except ProtocolError:
        return None  # validation answers it


async def _verify_transaction(
    ctx: RequestContext, partition: Partition, header: RecordBatchHeader, transactional_id: str
) -> None:
    """Kafka's transaction verification, asked only for a producer's first transactional batch
    on the partition (later ones find its transaction open in the producer state)."""
    pid, epoch = header.producer_id, header.producer_epoch
    if partition.has_open_transaction(pid, epoch):
        return
    tp = partition.tp
    error = (await ctx.txn.verify_anywhere(transactional_id, pid, epoch, [tp]))[tp]
    if error is ErrorCode.NONE:
        return
    if error is ErrorCode.PRODUCER_FENCED:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    elif error is ErrorCode.TRANSACTION_ABORTABLE and ctx.version <= 10:
        error = ErrorCode.INVALID_TXN_STATE
    elif error in _RETRY_VERIFICATION:
        error = ErrorCode.NOT_ENOUGH_REPLICAS
    raise ProduceError(error, f"transactional batch of producer {pid} not verified: {error.name}")


_SETTINGS: dict[int, tuple[LogConfig, TopicSettings]] = {}


def _topic_settings(config: LogConfig) -> TopicSettings:
    """The validator's view of a log config, kept per config object (replaced whole when it changes)."""
    cached = _SETTINGS.get(id(config))
    if cached is not None and cached[0] is config:
        return cached[1]
    settings = TopicSettings(
        compacted=config.compacts,
        max_message_bytes=config.max_message_bytes,
        log_append_time=config.log_append_time,
        timestamp_before_max_ms=config.message_timestamp_before_max_ms,
        timestamp_after_max_ms=config.message_timestamp_after_max_ms,
        compression_type=config.compression_type,
    )
    if len(_SETTINGS) > 10_000:  # bounded: configs are few, but each AlterConfigs makes new ones
        _SETTINGS.clear()
    _SETTINGS[id(config)] = (config, settings)
    return settings
