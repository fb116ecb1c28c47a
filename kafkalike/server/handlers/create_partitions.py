"""CreatePartitions (key 37): v0-3, forwarded to the active controller, which decides.

Keys hash to partitions by count, so growing a topic moves where new records of a key land. The
controller's checks and limits are controller/replication_control.py's and controller/limits.py's;
answered once this broker's published image shows the new partitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(37, 0, 3)
async def handle_create_partitions(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return await ctx.controller.forward(37, ctx.version, request)  # type: ignore[no-any-return]
