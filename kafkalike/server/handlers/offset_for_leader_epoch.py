"""OffsetForLeaderEpoch (key 23): v2-4. The end offset of a leader epoch, for consumers
validating their position after a leader change (KIP-320) and for follower truncation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.replica import PartitionError
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles
from kafkalike.server.routing import partition_or_error


@handles(23, 2, 4)
async def handle_offset_for_leader_epoch(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    topics = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            entry: dict[str, Any] = {"error_code": 0, "partition": part.partition, "leader_epoch": -1, "end_offset": -1}
            partition = partition_or_error(ctx, topic.topic, part.partition)
            if isinstance(partition, ErrorCode):
                entry["error_code"] = partition
            else:
                try:
                    epoch, end_offset = partition.last_offset_for_leader_epoch(
                        part.leader_epoch, part.current_leader_epoch
                    )
                    entry.update(leader_epoch=epoch, end_offset=end_offset)
                except PartitionError as exc:
                    entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
