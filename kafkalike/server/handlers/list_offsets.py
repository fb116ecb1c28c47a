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
from kafkalike.replica import Isolation, PartitionError
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles
from kafkalike.server.routing import partition_or_error

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
    partition = partition_or_error(ctx, topic, part.partition_index)
    if isinstance(partition, ErrorCode):
        entry["error_code"] = partition
        return entry
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
