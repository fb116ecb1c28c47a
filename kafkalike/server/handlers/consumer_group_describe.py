"""ConsumerGroupDescribe (key 69): v0. Members, epochs and assignments of KIP-848 groups.

Kafka 4.0 advertises v0-1; our spec has v0 only (v1 adds nothing a v0 client reads), so v0 is
advertised. Unknown groups, and classic groups, get GROUP_ID_NOT_FOUND (the Java admin client
then falls back to DescribeGroups). Authorized operations, when asked for: without an
authorizer, every operation a group supports. Assignments name topics by id and name; a
partition of a topic deleted since is left out, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.group.consumer_api import DescribedPartitions
from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.handlers.describe_groups import GROUP_OPERATIONS, NOT_REQUESTED
from kafkalike.server.registry import handles


def _assignment(partitions: tuple[DescribedPartitions, ...]) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": p.topic_id, "topic_name": p.topic_name, "partitions": list(p.partitions)} for p in partitions
        ]
    }


@handles(69, 0, 0)
async def handle_consumer_group_describe(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    operations = GROUP_OPERATIONS if request.include_authorized_operations else NOT_REQUESTED
    groups = []
    for group in ctx.groups.consumer_group_describe(list(request.group_ids)):
        groups.append(
            {
                "error_code": group.error,
                "error_message": group.error_message,
                "group_id": group.group_id,
                "group_state": group.state,
                "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "assignor_name": group.assignor_name,
                "members": [
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": list(m.subscribed_topic_names),
                        "subscribed_topic_regex": m.subscribed_topic_regex,
                        "assignment": _assignment(m.assignment),
                        "target_assignment": _assignment(m.target_assignment),
                    }
                    for m in group.members
                ],
                "authorized_operations": operations if group.error == 0 else NOT_REQUESTED,
            }
        )
    return {"throttle_time_ms": 0, "groups": groups}
