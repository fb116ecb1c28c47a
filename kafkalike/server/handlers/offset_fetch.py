"""OffsetFetch (key 9): v1-9. A group's committed offsets; -1 where nothing was committed.

v1 names the partitions; v2+ may ask for every committed offset (null topics) and has a
top-level error; v5+ returns the committed leader epoch; v7+ ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT (offset -1) for a partition while a transactional offset commit of the
group is pending there (KIP-447; the consumer retries); v8+ fetches for several groups at once
(KIP-709); v9's member id and epoch are checked against a KIP-848 consumer group
(UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH for the group; a null member id with epoch -1 is an admin
client) and ignored for classic groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafkalike.group import FetchResult
from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


def _topics(topics: Any) -> list[tuple[str, Sequence[int]]] | None:
    return None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]


def _topic_entries(result: FetchResult) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "partitions": [
                {
                    "partition_index": f.partition,
                    "committed_offset": f.offset,
                    "committed_leader_epoch": f.leader_epoch,
                    "metadata": f.metadata,
                    "error_code": f.error,
                }
                for f in offsets
            ],
        }
        for name, offsets in result.topics
    ]


def _stable(ctx: RequestContext, request: Message, group_id: str, result: FetchResult) -> FetchResult:
    if ctx.version < 7 or not request.require_stable:
        return result
    return ctx.groups.mark_unstable(group_id, result)


@handles(9, 1, 9)
async def handle_offset_fetch(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    groups = ctx.groups
    if ctx.version >= 8:
        entries = []
        for group in request.groups:
            member = (group.member_id, group.member_epoch) if ctx.version >= 9 else (None, -1)
            result = await groups.fetch_offsets(group.group_id, _topics(group.topics), *member)
            result = _stable(ctx, request, group.group_id, result)
            entries.append({"group_id": group.group_id, "topics": _topic_entries(result), "error_code": result.error})
        return {"throttle_time_ms": 0, "groups": entries}
    result = await groups.fetch_offsets(request.group_id, _topics(request.topics))
    result = _stable(ctx, request, request.group_id, result)
    return {"throttle_time_ms": 0, "topics": _topic_entries(result), "error_code": result.error}
