"""DescribeGroups (key 15): v0-6. State, protocol and members of classic groups.

A KIP-848 consumer group is not a classic group: as in Kafka it is described as Dead (from v6
with GROUP_ID_NOT_FOUND); ConsumerGroupDescribe describes it.

Member metadata and the protocol name are only shown while the group is Stable. An unknown
group is described as Dead with no error before v6, and with GROUP_ID_NOT_FOUND and a message
from v6 (KIP-1043). v3+ authorized operations: without an authorizer, every operation a group
supports (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS), when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

NOT_REQUESTED = -2147483648
# AclOperation codes READ 3, DELETE 6, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


@handles(15, 0, 6)
async def handle_describe_groups(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    operations = GROUP_OPERATIONS if ctx.version >= 3 and request.include_authorized_operations else NOT_REQUESTED
    groups = []
    for group in ctx.groups.describe_groups(list(request.groups)):
        entry: dict[str, Any] = {
            "error_code": group.error,
            "error_message": None,
            "group_id": group.group_id,
            "group_state": group.state,
            "protocol_type": group.protocol_type,
            "protocol_data": group.protocol_data,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata,
                    "member_assignment": m.assignment,
                }
                for m in group.members
            ],
            "authorized_operations": operations if group.found else NOT_REQUESTED,
        }
        if not group.found and ctx.version >= 6:
            entry.update(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group.group_id} not found.")
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}
