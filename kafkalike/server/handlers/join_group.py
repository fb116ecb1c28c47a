"""JoinGroup (key 11): v0-9. A member joins a classic group; the answer waits for the rebalance.

v0 has no rebalance timeout (the session timeout serves as both); v4+ hands a new dynamic
member its id first with MEMBER_ID_REQUIRED (KIP-394); v5+ static membership (KIP-345); v7+
returns the protocol type and a nullable protocol name; v8 adds a join reason (accepted, unused); v9 lets a
restarted static leader skip the assignment (KIP-814). The response is parked in the
coordinator until the join phase completes (see kafkalike.group.membership).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.group import JoinRequest
from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(11, 0, 9)
async def handle_join_group(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    v = ctx.version
    result = await ctx.groups.join_group(
        JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id if v >= 5 else None,
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.client_host,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.session_timeout_ms if v == 0 else request.rebalance_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
            require_known_member_id=v >= 4,
            supports_skip_assignment=v >= 9,
            reason=request.reason,
        )
    )
    protocol_name = result.protocol_name
    if v < 7:
        protocol_name = protocol_name or ""  # not nullable before v7
    elif protocol_name == "":
        protocol_name = None
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in result.members
        ],
    }
