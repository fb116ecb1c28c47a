"""Fetch (key 1): v4-17. Long-poll reads of record batches, served as the file's bytes.

The request waits up to max_wait_ms, but is answered as soon as min_bytes of new data have
arrived: every append wakes the waiting fetches of that partition. The first partition with
data always returns at least one whole batch, even past max_bytes (KIP-74). Fetch sessions
(KIP-227) are answered "sessionless" (session id 0), which every client accepts by sending
full requests. v9+ checks the client's current leader epoch; v12+ reports diverging epochs;
v13+ addresses topics by id.

isolation_level 1 (read_committed, v4+) reads only up to the last stable offset (the first
offset of the oldest open transaction) and lists the aborted transactions overlapping the
returned batches (producer id, first offset, from the segments' transaction indexes), so the
consumer can drop their records; read_uncommitted reads up to the high watermark. Every
answer carries the last stable offset.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kafkalike.log.errors import OffsetOutOfRange
from kafkalike.log.storage import FileSlices
from kafkalike.log.storage_errors import reporter
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.replica import Partition
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

READ_COMMITTED = 1


@handles(1, 4, 17)
async def handle_fetch(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    deadline = ctx.broker.clock.monotonic_s() + max(request.max_wait_ms, 0) / 1000
    while True:
        tps = [p.tp for p in _states(ctx, request)]
        responses, total = _read_all(ctx, request)
        if total >= request.min_bytes or ctx.broker.clock.monotonic_s() >= deadline or not tps:
            break
        # No await between the read and here: an append after the read wakes this wait.
        await ctx.broker.waiters.wait_for_progress(tps, deadline)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}


def _states(ctx: RequestContext, request: Message) -> list[Partition]:
    out = []
    for topic in request.topics:
        name = _topic_name(ctx, topic)
        for part in topic.partitions:
            state = ctx.broker.partitions.get((name, part.partition)) if name else None
            if state is not None:
                out.append(state)
    return out


def _topic_name(ctx: RequestContext, topic: Message) -> str | None:
    if ctx.version >= 13:
        return ctx.broker.controller.image.topic_names_by_id.get(topic.topic_id)
    return topic.topic  # type: ignore[no-any-return]


def _read_all(ctx: RequestContext, request: Message) -> tuple[list[dict[str, Any]], int]:
    budget = request.max_bytes if ctx.version >= 3 else math.inf
    total = 0
    responses = []
    for topic in request.topics:
        name = _topic_name(ctx, topic)
        partitions = []
        for part in topic.partitions:
            entry = _read_partition(ctx, request, name, part, max(budget - total, 0), first=total == 0)
            total += len(entry["records"] or b"")
            partitions.append(entry)
        responses.append({"topic": topic.topic, "topic_id": topic.topic_id, "partitions": partitions})
    return responses, total


def _read_partition(
    ctx: RequestContext, request: Message, name: str | None, part: Message, budget: float, first: bool
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "partition_index": part.partition,
        "error_code": 0,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": [] if request.isolation_level == READ_COMMITTED else None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    state = ctx.broker.partitions.get((name, part.partition)) if name else None
    if state is None:
        unknown_id = ctx.version >= 13 and name is None
        entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID if unknown_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        entry["aborted_transactions"] = []  # as Apache Kafka answers a partition it does not know: empty, not null
        return entry
    if ctx.broker.faults.is_paused(state.topic, state.index):
        entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return entry
    plog = state.log
    lso = plog.last_stable_offset
    entry.update(high_watermark=plog.high_watermark, last_stable_offset=lso, log_start_offset=plog.log_start_offset)
    epoch = part.current_leader_epoch
    if epoch >= 0 and epoch != state.leader_epoch:
        entry["error_code"] = (
            ErrorCode.FENCED_LEADER_EPOCH if epoch < state.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
        )
        return entry
    limit = min(part.partition_max_bytes, budget)
    if limit <= 0 and not first:
        return entry
    committed = request.isolation_level == READ_COMMITTED
    try:
        result = plog.read(
            part.fetch_offset,
            int(limit),
            max_offset=lso if committed else plog.high_watermark,
            min_one_batch=first,
        )
        entry["records"] = FileSlices(result.ranges)  # sent from the files, see server/connection.py
        if committed:
            entry["aborted_transactions"] = [
                {"producer_id": a.producer_id, "first_offset": a.first_offset}
                for a in plog.aborted_transactions(part.fetch_offset, result)
            ]
    except OffsetOutOfRange:
        # As Apache Kafka answers it: the offsets unknown (-1), the client asks ListOffsets.
        entry.update(
            error_code=ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1
        )
    except OSError as exc:  # EMFILE opening a cold segment, EIO: this partition only, logged once a minute
        reporter.report("read of", plog.directory.path, exc, ctx.broker.clock.wall_ms())
        entry.update(
            error_code=ErrorCode.KAFKA_STORAGE_ERROR, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1
        )
        entry["records"] = b""
    return entry
