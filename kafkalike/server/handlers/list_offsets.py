"""ListOffsets (key 2): v1-11. Earliest (-2), latest (-1), max timestamp (-3, v7+), by timestamp.

Latest is the log end offset (last offset + 1, however many records the last batch holds);
by timestamp uses the records' own timestamps and returns the first offset whose timestamp
is at or after the target, or -1 when none is. Everything is bounded by what the isolation
level may read, as Kafka bounds it: the high watermark, or for read_committed (v2+) the last
stable offset, so "latest" is the LSO while a transaction is open. A negative timestamp that is
no special value of the request's version is UNSUPPORTED_VERSION, before anything else is looked
at, as Kafka answers it. Without remote storage, the tiered (-5) and pending-upload (-6) offsets
are -1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
# The first version each special timestamp may be asked at.
SPECIAL_SINCE_VERSION = {
    EARLIEST: 1,
    LATEST: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}
READ_COMMITTED = 1


@handles(2, 1, 11)
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
    target = part.timestamp
    if target < 0 and ctx.version < SPECIAL_SINCE_VERSION.get(target, ctx.version + 1):
        entry["error_code"] = ErrorCode.UNSUPPORTED_VERSION
        return entry
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
    if target == LATEST:
        entry.update(offset=fetchable, leader_epoch=state.leader_epoch)
    elif target in (EARLIEST, EARLIEST_LOCAL):
        entry.update(offset=plog.log_start_offset, leader_epoch=state.leader_epoch)
    elif target in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        entry.update(offset=-1)
    elif target == MAX_TIMESTAMP:
        found = plog.max_timestamp()
        if found is not None and found.offset < fetchable:
            timestamp, offset = found
            entry.update(timestamp=timestamp, offset=offset, leader_epoch=state.leader_epoch)
    else:
        hit = plog.offset_for_timestamp(target)
        if hit is not None and hit[0] < fetchable:
            offset, timestamp = hit
            entry.update(timestamp=timestamp, offset=offset, leader_epoch=state.leader_epoch)
    return entry
