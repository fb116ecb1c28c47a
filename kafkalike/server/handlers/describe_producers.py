"""DescribeProducers (key 61): v0. The producers a partition keeps state for (KIP-664): epoch,
last sequence and timestamp, the coordinator epoch of their last marker, and the first offset
of their open transaction (-1 without one), which is how hanging transactions are found.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles
from kafkalike.server.routing import partition_or_error


def _partition(ctx: RequestContext, topic: str, index: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition_index": index, "error_code": 0, "error_message": None, "active_producers": []}
    # A follower answers too (its log has the producer state); only a partition not hosted here fails.
    partition = partition_or_error(ctx, topic, index)
    if isinstance(partition, ErrorCode):
        entry["error_code"] = partition
        return entry
    entry["active_producers"] = [
        {
            "producer_id": p.producer_id,
            "producer_epoch": p.epoch,
            "last_sequence": p.last_seq,
            "last_timestamp": p.last_timestamp,
            "coordinator_epoch": p.coordinator_epoch,
            "current_txn_start_offset": -1 if p.current_txn_first_offset is None else p.current_txn_first_offset,
        }
        for p in partition.producers()
    ]
    return entry


@handles(61, 0, 0)
async def handle_describe_producers(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t.name, "partitions": [_partition(ctx, t.name, i) for i in t.partition_indexes]}
            for t in request.topics
        ],
    }
