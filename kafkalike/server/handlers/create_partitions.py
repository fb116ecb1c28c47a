"""CreatePartitions (key 37): v0-3. Grows a topic's partition count; validate_only supported.
Keys hash to partitions by count, so growing a topic moves where new records of a key land."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.controller.metadata import ControllerError
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(37, 0, 3)
async def handle_create_partitions(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    results = []
    for topic in request.topics:
        entry: dict[str, Any] = {"name": topic.name, "error_code": 0, "error_message": None}
        try:
            if topic.assignments and any(b != ctx.broker.node_id for a in topic.assignments for b in a.broker_ids):
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Replica assignment names an unknown broker."
                )
            ctx.broker.create_partitions(topic.name, topic.count, request.validate_only)
        except ControllerError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    return {"throttle_time_ms": 0, "results": results}
