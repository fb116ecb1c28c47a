"""DeleteGroups (key 42): v0-2. Delete empty groups together with their committed offsets.

NON_EMPTY_GROUP while a group (classic or KIP-848 consumer) has members; GROUP_ID_NOT_FOUND
for unknown groups. The group's and offsets' tombstones are written to ``__consumer_offsets``
before answering.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(42, 0, 2)
async def handle_delete_groups(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    results = await ctx.groups.delete_groups(list(request.groups_names))
    return {
        "throttle_time_ms": 0,
        "results": [{"group_id": group_id, "error_code": error} for group_id, error in results],
    }
