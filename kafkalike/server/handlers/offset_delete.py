"""OffsetDelete (key 47): v0. Delete a group's offsets for topics it does not consume (KIP-496).

GROUP_ID_NOT_FOUND for an unknown group; NON_EMPTY_GROUP for a group with members that does
not use the "consumer" protocol; GROUP_SUBSCRIBED_TO_TOPIC per partition of a topic the
members subscribe to; UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.offset_requests import topics_answer
from kafkalike.server.registry import handles


@handles(47, 0, 0)
async def handle_offset_delete(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    errors: dict[tuple[str, int], ErrorCode] = {}
    valid = []
    for topic in request.topics:
        known = [p.partition_index for p in topic.partitions if (topic.name, p.partition_index) in ctx.replicas]
        for p in topic.partitions:
            if p.partition_index not in known:
                errors[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if known:
            valid.append((topic.name, known))
    error, results = await ctx.groups.delete_offsets(request.group_id, valid)
    if error is not ErrorCode.NONE:
        return {"error_code": error, "throttle_time_ms": 0, "topics": []}
    for topic_name, partition, partition_error in results:
        errors[(topic_name, partition)] = partition_error
    return {
        "error_code": ErrorCode.NONE,
        "throttle_time_ms": 0,
        "topics": topics_answer(request.topics, errors),
    }
