"""DeleteTopics (key 20): v1-6. By name, or by topic id (v6+). The data goes with the topic: the
request's topics are removed as one metadata operation and their directories on worker threads."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kafkalike.controller.metadata import ControllerError
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

ZERO_UUID = uuid.UUID(int=0)


@handles(20, 1, 6)
async def handle_delete_topics(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    if ctx.controller.forwarding:  # a node of a cluster: the active controller decides
        return await ctx.controller.forward(20, ctx.version, request)  # type: ignore[no-any-return]
    image = ctx.metadata.image
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    responses = []
    by_name: list[tuple[str, dict[str, Any]]] = []
    for name, topic_id in wanted:
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
        responses.append(entry)
        if name is None:
            name = image.topic_names_by_id.get(topic_id)
            if name is None:
                entry.update(
                    error_code=ErrorCode.UNKNOWN_TOPIC_ID, error_message="This server does not host this topic ID."
                )
                continue
            entry["name"] = name
        by_name.append((name, entry))
    # One operation for the whole request; the directories are removed on worker threads.
    outcomes = await ctx.controller.delete_topics([name for name, _ in by_name])
    for (_, entry), outcome in zip(by_name, outcomes, strict=True):
        if isinstance(outcome, ControllerError):
            entry.update(error_code=outcome.code, error_message=outcome.message)
        else:
            entry["topic_id"] = outcome.topic_id
    return {"throttle_time_ms": 0, "responses": responses}
