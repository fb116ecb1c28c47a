"""DeleteTopics (key 20): v1-6. By name, or by topic id (v6+). The data goes with the topic."""

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
    image = ctx.broker.controller.image
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    responses = []
    for name, topic_id in wanted:
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
        if name is None:
            name = image.topic_names_by_id.get(topic_id)
            if name is None:
                entry.update(
                    error_code=ErrorCode.UNKNOWN_TOPIC_ID, error_message="This server does not host this topic ID."
                )
                responses.append(entry)
                continue
            entry["name"] = name
        try:
            topic = ctx.broker.delete_topic(name)
            entry["topic_id"] = topic.topic_id
        except ControllerError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}
