"""ListOffsets (key 2): v1-10. Earliest (-2), latest (-1), max timestamp (-3, v7+), by timestamp.

Latest is the log end offset (last offset + 1, however many records the last batch holds);
by timestamp uses the records' own timestamps and returns the first offset whose timestamp
is at or after the target, or -1 when none is. Everything is bounded by what the isolation
level may read, as Kafka bounds it: the high watermark, or for read_committed (v2+) the last
stable offset, so "latest" is the LSO while a transaction is open.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
READ_COMMITTED = 1


@handles(2, 1, 10)
async def handle_list_offsets(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    topics = []
    for topic in request.topics:
        committed = ctx.version >= 2 and request.isolation_level == READ_COMMITTED
        partitions = [_one(ctx, topic.name, p, committed) for p in topic.partitions]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def _one(ctx: RequestContext, topic: str, part: Message, committed: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "partition_index": part.partition_index,
        "error_code": 0,
        "timestamp": -1,
        "offset": -1,
        "leader_epoch": -1,
        "old_style_offsets": [],
    }
    state = ctx.broker.partitions.get((topic, part.partition_index))
    if state is None:
        entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return entry
    epoch = part.current_leader_epoch
    if epoch >= 0 and epoch != state.leader_epoch:
        entry["error_code"] = (
            ErrorCode.FENCED_LEADER_EPOCH if epoch < state.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
        )
        return entry
    plog = state.log
    fetchable = plog.last_stable_offset if committed else plog.high_watermark
    target = part.timestamp
    if target == LATEST:
        entry.update(offset=fetchable, leader_epoch=state.leader_epoch)
    elif target in (EARLIEST, EARLIEST_LOCAL):
        entry.update(offset=plog.log_start_offset, leader_epoch=state.leader_epoch)
    elif target == LATEST_TIERED:
        entry.update(offset=-1)
    elif target == MAX_TIMESTAMP:
        found = plog.max_timestamp()
        if found is not None and found.offset < fetchable:
            timestamp, offset = found
            entry.update(timestamp=timestamp, offset=offset, leader_epoch=state.leader_epoch)
    elif target < 0:
        entry["error_code"] = ErrorCode.INVALID_REQUEST
    else:
        hit = plog.offset_for_timestamp(target)
        if hit is not None and hit[0] < fetchable:
            offset, timestamp = hit
            entry.update(timestamp=timestamp, offset=offset, leader_epoch=state.leader_epoch)
    return entry
