"""Heartbeat (key 12): v0-4. A classic member proves it is alive and learns of rebalances.

REBALANCE_IN_PROGRESS while the group prepares a rebalance (the member must rejoin),
ILLEGAL_GENERATION for a stale generation, UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID for members
the group does not know (v3+ static members are checked by instance id too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(12, 0, 4)
async def handle_heartbeat(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    instance_id = request.group_instance_id if ctx.version >= 3 else None
    error = await ctx.groups.heartbeat(request.group_id, request.member_id, instance_id, request.generation_id)
    return {"throttle_time_ms": 0, "error_code": error}
