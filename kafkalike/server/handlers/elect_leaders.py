"""ElectLeaders (key 43): v0-2, forwarded to the active controller, which elects (Kafka's brokers
forward it too).

PREFERRED (0) gives each partition's leadership back to its first replica when that replica is
in the ISR and active; UNCLEAN (1) elects any active replica for a partition left without a
leader, at the risk of losing what it lacks. Null topics ask for every partition, and the answer
then leaves out those that needed no election. The rules and per-partition errors are
controller/partition_control.py's; answered once this broker's image has caught up with what
the controller committed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(43, 0, 2)
async def handle_elect_leaders(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return await ctx.controller.forward(43, ctx.version, request)  # type: ignore[no-any-return]
