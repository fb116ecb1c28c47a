"""What OffsetCommit, TxnOffsetCommit and OffsetDelete share: partitions of topics the broker does
not have are answered UNKNOWN_TOPIC_OR_PARTITION before the group sees the request, and the answer
lists every requested partition with its error code, in the request's order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafkalike.group import CommitPartition
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext

PartitionErrors = dict[tuple[str, int], ErrorCode]


def known_commits(
    ctx: RequestContext, topics: Iterable[Message], with_leader_epoch: bool
) -> tuple[list[CommitPartition], PartitionErrors]:
    """The commits of existing partitions, and UNKNOWN_TOPIC_OR_PARTITION for the others."""
    errors: PartitionErrors = {}
    valid = []
    for topic in topics:
        for part in topic.partitions:
            # In the metadata, whichever broker hosts it (Kafka's metadataCache.contains).
            if not ctx.metadata.routing.knows(topic.name, part.partition_index):
                errors[(topic.name, part.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            epoch = part.committed_leader_epoch if with_leader_epoch else -1
            valid.append(
                CommitPartition(topic.name, part.partition_index, part.committed_offset, epoch, part.committed_metadata)
            )
    return valid, errors


def topics_answer(topics: Iterable[Message], errors: PartitionErrors) -> list[Mapping[str, Any]]:
    return [
        {
            "name": topic.name,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": errors[(topic.name, p.partition_index)]}
                for p in topic.partitions
            ],
        }
        for topic in topics
    ]
