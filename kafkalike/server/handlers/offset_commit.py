"""OffsetCommit (key 8): v2-9. Commit a group's offsets, durably, before answering.

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and are not committed. Members
commit with their generation and member id (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
REBALANCE_IN_PROGRESS as in Kafka); generation -1 with no member id commits for a group
without members (a "simple" group, created if needed). v2-4 carry a retention time; v6+ the
committed leader epoch; v7+ the group instance id; v9 answers an unknown group with
GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION, and carries the member epoch of a KIP-848
consumer group member (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; older versions get
UNSUPPORTED_VERSION from a consumer group with members).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.group import CommitRequest
from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.offset_requests import known_commits, topics_answer
from kafkalike.server.registry import handles


@handles(8, 2, 9)
async def handle_offset_commit(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    v = ctx.version
    valid, errors = known_commits(ctx, request.topics, with_leader_epoch=v >= 6)
    if valid:
        commit = CommitRequest(
            group_id=request.group_id,
            generation_id=request.generation_id_or_member_epoch,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id if v >= 7 else None,
            partitions=tuple(valid),
            retention_time_ms=request.retention_time_ms if v <= 4 else -1,
            group_id_not_found_error=v >= 9,
            supports_member_epoch=v >= 9,
        )
        for topic_name, partition, error in await ctx.groups.commit_offsets(commit):
            errors[(topic_name, partition)] = error
    return {
        "throttle_time_ms": 0,
        "topics": topics_answer(request.topics, errors),
    }
