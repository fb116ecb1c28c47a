"""Committed offsets by group, topic and partition (Kafka's OffsetMetadataManager store).

Offsets live apart from group membership: a "simple" group that only commits offsets has no
members at all, and a group's members come and go while its offsets stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

NO_LEADER_EPOCH = -1


@dataclass(frozen=True)
class OffsetAndMetadata:
    committed_offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    # Only OffsetCommit v2-4 with an explicit retention time set one.
    expire_timestamp_ms: int | None = None

    def is_expired(self, now_ms: int, base_ms: int, retention_ms: int) -> bool:
        if self.expire_timestamp_ms is not None:
            return now_ms >= self.expire_timestamp_ms
        return now_ms - base_ms >= retention_ms


class OffsetStore:
    """group -> topic -> partition -> offset; empty levels are removed as they empty."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._groups.get(group_id, {}).get(topic, {}).get(partition)

    def put(self, group_id: str, topic: str, partition: int, offset: OffsetAndMetadata) -> None:
        self._groups.setdefault(group_id, {}).setdefault(topic, {})[partition] = offset

    def remove(self, group_id: str, topic: str, partition: int) -> bool:
        topics = self._groups.get(group_id)
        if topics is None or partition not in topics.get(topic, {}):
            return False
        del topics[topic][partition]
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self._groups[group_id]
        return True

    def has_offsets(self, group_id: str) -> bool:
        return group_id in self._groups

    def group_offsets(self, group_id: str) -> Iterator[tuple[str, int, OffsetAndMetadata]]:
        """Every offset of a group, topics and partitions in the order they were first committed."""
        for topic, partitions in list(self._groups.get(group_id, {}).items()):
            for partition, offset in list(partitions.items()):
                yield topic, partition, offset

    def topics(self, group_id: str) -> list[str]:
        return list(self._groups.get(group_id, {}))

    def partitions_of_topic(self, topic: str) -> Iterator[tuple[str, int]]:
        """(group, partition) for every offset committed on ``topic`` by any group."""
        for group_id, topics in list(self._groups.items()):
            for partition in list(topics.get(topic, {})):
                yield group_id, partition

    def drop_groups(self, doomed: Callable[[str], bool]) -> None:
        """Forget every offset of the groups ``doomed`` accepts."""
        for group_id in [g for g in self._groups if doomed(g)]:
            del self._groups[group_id]

    def count(self) -> int:
        return sum(len(p) for topics in self._groups.values() for p in topics.values())
