"""DescribeQuorum (key 55): v0-2. The metadata quorum: ``__cluster_metadata`` partition 0.

As Apache Kafka's broker (``forwardToControllerOrFail``), a broker of a cluster forwards the
request to the active controller and answers what it answers: the quorum's leader, epoch and high
watermark, each voter's and observer's progress, and (v2) the voters' controller endpoints; no
controller within ``request.timeout.ms`` makes it REQUEST_TIMED_OUT. ``kafka-metadata-quorum
--bootstrap-server`` works against any broker so.

The single node is its own quorum's only voter: it answers from its own metadata log what Kafka's
KRaft leader gives for a single static voter in combined mode (leader and only voter this node, no
observers, the high watermark and the voter's log end offset both the log's end offset since every
metadata record is flushed before it is answered, fetch and caught-up timestamps "now", as Kafka
reports them for the leader itself; the epoch one past the newest in the log at start-up), and v2's
node is this node with its client listener.

The answer is shaped by ``server/quorum/describe.py`` in both cases, as on a controller listener:
a request that does not name exactly ``__cluster_metadata`` partition 0 gets
UNKNOWN_TOPIC_OR_PARTITION for every partition it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.raft.describe import describe_single_voter
from kafkalike.server.context import RequestContext
from kafkalike.server.quorum.describe import QuorumNode, describe_quorum_answer
from kafkalike.server.registry import handles


@handles(55, 0, 2)
async def handle_describe_quorum(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    if ctx.controller.forwarding:
        return await ctx.controller.forward_to_quorum(55, ctx.version, request)  # type: ignore[no-any-return]

    async def describe() -> dict[str, Any]:
        meta = ctx.metadata
        if meta.describe_quorum is not None:  # a single node on its one-voter quorum: that state
            return await meta.describe_quorum()
        return describe_single_voter(meta.node_id, meta.metadata_epoch, meta.metadata_end_offset, ctx.clock.wall_ms())

    host, port = ctx.metadata.advertised
    return await describe_quorum_answer(request, describe, [QuorumNode(ctx.metadata.node_id, ctx.listener, host, port)])
