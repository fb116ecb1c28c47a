"""What AlterConfigs (33) and IncrementalAlterConfigs (44) check on the broker before they are
forwarded (Kafka's ConfigAdminManager.preprocess): a broker resource names this broker or the
cluster default (""); another broker's configs are altered through that broker (the admin
client sends them there). The resources refused here are answered with the controller's answer
for the others, in the request's order."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from construct import Container

from kafkalike.controller.image import BROKER_RESOURCE
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext

_JAVA_INT = re.compile(r"[+-]?[0-9]+")  # what Java's String.toInt takes


def resource_name_problem(name: str, node_id: int) -> str | None:
    """Kafka's validateResourceNameIsCurrentNodeId, for a non-empty broker resource name."""
    if not _JAVA_INT.fullmatch(name) or not -(2**31) <= int(name) < 2**31:
        return f"Node id must be an integer, but it is: {name}"
    if int(name) != node_id:
        return f"Unexpected broker id, expected {node_id}, but received {name}"
    return None


async def forward_alter_configs(ctx: RequestContext, api_key: int, request: Message) -> Mapping[str, Any]:
    node_id = ctx.metadata.node_id
    refused: dict[int, dict[str, Any]] = {}
    for i, resource in enumerate(request.resources):
        if resource.resource_type == BROKER_RESOURCE and resource.resource_name:
            problem = resource_name_problem(resource.resource_name, node_id)
            if problem is not None:
                refused[i] = {
                    "error_code": ErrorCode.INVALID_REQUEST,
                    "error_message": problem,
                    "resource_type": resource.resource_type,
                    "resource_name": resource.resource_name,
                }
    if not refused:
        return await ctx.controller.forward(api_key, ctx.version, request)  # type: ignore[no-any-return]
    remaining = [r for i, r in enumerate(request.resources) if i not in refused]
    answered: list[Any] = []
    throttle_time_ms = 0
    if remaining:
        response = await ctx.controller.forward(api_key, ctx.version, Container({**request, "resources": remaining}))
        answered, throttle_time_ms = list(response.responses), response.throttle_time_ms
    others = iter(answered)
    responses = [refused[i] if i in refused else next(others) for i in range(len(request.resources))]
    return {"throttle_time_ms": throttle_time_ms, "responses": responses}
