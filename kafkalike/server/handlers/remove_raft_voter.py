"""RemoveRaftVoter (key 81): v0. Remove a controller from the metadata quorum's voters (KIP-853).

Forwarded to the active controller, as Kafka's broker does; answered once the voter set without it
is committed. A leader that removes itself resigns then. ``kafka-metadata-quorum --bootstrap-server
… remove-controller`` comes this way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(81, 0, 0)
async def handle_remove_raft_voter(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return await ctx.controller.forward_to_quorum(81, ctx.version, request)  # type: ignore[no-any-return]
