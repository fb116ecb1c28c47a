"""SyncGroup (key 14): v0-5. The leader hands in the assignment; every member gets its share.

v3+ static membership (group instance id); v5 checks the protocol type and name against the
group's (INCONSISTENT_GROUP_PROTOCOL) and returns them. A follower's request is parked until
the leader's assignment is persisted (see kafkalike.group.membership).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.group import SyncRequest
from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(14, 0, 5)
async def handle_sync_group(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    v = ctx.version
    result = await ctx.groups.sync_group(
        SyncRequest(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id if v >= 3 else None,
            protocol_type=request.protocol_type if v >= 5 else None,
            protocol_name=request.protocol_name if v >= 5 else None,
            assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
        )
    )
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }
