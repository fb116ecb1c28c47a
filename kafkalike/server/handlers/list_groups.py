"""ListGroups (key 16): v0-5. Every group this coordinator knows, with its protocol type.

v4+ filter by and report the group state (KIP-518); v5+ by and the group type (KIP-848):
"classic" or "consumer" (whose states are Empty, Assigning, Reconciling and Stable). Filters
are case-insensitive; an empty filter matches all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(16, 0, 5)
async def handle_list_groups(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    states = list(request.states_filter) if ctx.version >= 4 else []
    types = list(request.types_filter) if ctx.version >= 5 else []
    return {
        "throttle_time_ms": 0,
        "error_code": ctx.groups.list_groups_error(),
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": g.group_type,
            }
            for g in ctx.groups.list_groups(states, types)
        ],
    }
