"""LeaveGroup (key 13): v0-5. Members leave a classic group, which then rebalances.

v0-2 name one member and answer with one error; v3+ remove several members at once, by member
id or, for an admin removing static members, by group instance id alone (KIP-345), with an
error per member; v5 carries a reason per member (logged).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.group import LeavingMember
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(13, 0, 5)
async def handle_leave_group(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    if ctx.version < 3:
        leaving = [LeavingMember(request.member_id)]
    else:
        leaving = [LeavingMember(m.member_id, m.group_instance_id, m.reason) for m in request.members]
    result = await ctx.groups.leave_group(request.group_id, leaving)
    if ctx.version < 3:
        # One error: the group's, else the member's.
        error = result.error
        if error is ErrorCode.NONE:
            error = next((e for _, e in result.members if e is not ErrorCode.NONE), ErrorCode.NONE)
        return {"throttle_time_ms": 0, "error_code": error}
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": error}
            for m, error in result.members
        ],
    }
