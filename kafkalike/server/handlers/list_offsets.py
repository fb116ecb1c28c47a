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
from kafkalike.replica import Isolation, PartitionError
from kafkalike.replica.partition import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles
from kafkalike.server.routing import partition_or_error

# The first version each special timestamp may be asked at.
SPECIAL_SINCE_VERSION = {
    EARLIEST_TIMESTAMP: 1,
    LATEST_TIMESTAMP: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11,
}
READ_COMMITTED = 1


@handles(2, 1, 11)
async def handle_list_offsets(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    topics = []
    for topic in request.topics:
        committed = ctx.version >= 2 and request.isolation_level == READ_COMMITTED
        from_replica = request.replica_id >= 0  # a follower asking its leader (Kafka: no isolation bound)
        partitions = [_one(ctx, topic.name, p, committed, from_replica) for p in topic.partitions]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def _one(ctx: RequestContext, topic: str, part: Message, committed: bool, from_replica: bool) -> dict[str, Any]:
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
    partition = partition_or_error(ctx, topic, part.partition_index)
    if isinstance(partition, ErrorCode):
        entry["error_code"] = partition
        return entry
    if from_replica:
        isolation = Isolation.LOG_END
    else:
        isolation = Isolation.TXN_COMMITTED if committed else Isolation.HIGH_WATERMARK
    try:
        found = partition.fetch_offset_for_timestamp(
            part.timestamp, isolation=isolation, current_leader_epoch=part.current_leader_epoch
        )
    except PartitionError as exc:
        entry["error_code"] = exc.code
        return entry
    if found is not None:
        entry.update(timestamp=found.timestamp, offset=found.offset, leader_epoch=found.leader_epoch)
    return entry
