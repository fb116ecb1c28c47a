"""OffsetFetch (key 9): v1-9. A group's committed offsets; -1 where nothing was committed.

v1 names the partitions; v2+ may ask for every committed offset (null topics) and has a
top-level error; v5+ returns the committed leader epoch; v7 ``require_stable`` is accepted
and changes nothing, since no commit is ever pending here (there are no transactional
commits yet); v8+ fetches for several groups at once (KIP-709); v9's member id and epoch are
for KIP-848 groups, which this coordinator does not run yet.
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


@handles(9, 1, 9)
async def handle_offset_fetch(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    groups = ctx.broker.groups
    if ctx.version >= 8:
        entries = []
        for group in request.groups:
            result = groups.fetch_offsets(group.group_id, _topics(group.topics))
            entries.append({"group_id": group.group_id, "topics": _topic_entries(result), "error_code": result.error})
        return {"throttle_time_ms": 0, "groups": entries}
    result = groups.fetch_offsets(request.group_id, _topics(request.topics))
    return {"throttle_time_ms": 0, "topics": _topic_entries(result), "error_code": result.error}
