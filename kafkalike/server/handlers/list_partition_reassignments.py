"""ListPartitionReassignments (key 46): v0, forwarded to the active controller, which lists the
partitions still moving (all of them when topics is null) with their replicas and the adding and
removing ones, from its committed image."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(46, 0, 0)
async def handle_list_partition_reassignments(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return await ctx.controller.forward(46, ctx.version, request)  # type: ignore[no-any-return]
