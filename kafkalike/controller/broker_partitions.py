"""Which partitions each broker is in the ISR / ELR of, in the order Kafka's controller visits them.

Kafka's ``BrokersToIsrs`` and ``BrokersToElrs``, kept up by replaying PartitionRecord,
PartitionChangeRecord and RemoveTopicRecord. The controller writes one PartitionChangeRecord per
partition it visits when a broker is fenced, unfenced, shut down or unregistered, so the order of
those records in a batch is the order of these indexes: per broker, its topics in the iteration
order of Kafka's ``TimelineHashMap`` (``BaseHashTable``: Fibonacci hashing of the topic id's
hash, chained slots, iterated slot by slot and each chain from its end), and each topic's
partitions in the order they joined. Partitions without a leader are also kept under the
pseudo-broker -1 (NO_LEADER), flagged as "led", so that ``no_leader`` finds them.

Membership is also in the image; these indexes only order it (``ClusterControlManager`` puts
partitions these do not know yet after the others).
"""

from __future__ import annotations

import uuid
from typing import Generic, TypeVar

NO_LEADER = -1
LEADER_FLAG = 0x8000_0000
REPLICA_MASK = 0x7FFF_FFFF
_FIBONACCI = -7046029254386353131
_K = TypeVar("_K")
_V = TypeVar("_V")


def java_uuid_hash(u: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode: the halves xor-ed, folded to a signed 32-bit int."""
    xor = (u.int >> 64) ^ (u.int & (2**64 - 1))
    folded = ((xor >> 32) ^ xor) & 0xFFFFFFFF
    return folded - (1 << 32) if folded >> 31 else folded


def _slot(hash_code: int, capacity: int) -> int:
    shift = 65 - capacity.bit_length()
    return ((hash_code * _FIBONACCI) & (2**64 - 1)) >> shift


class JavaTimelineMap(Generic[_K, _V]):
    """A map that iterates as Kafka's TimelineHashMap does at its latest epoch."""

    def __init__(self, hash_of: object = java_uuid_hash) -> None:
        self._hash = hash_of
        self._slots: list[list[_K]] = [[], []]
        self._values: dict[_K, _V] = {}

    def _index(self, key: _K) -> int:
        return _slot(self._hash(key), len(self._slots))  # type: ignore[operator]

    def get(self, key: _K) -> _V | None:
        return self._values.get(key)

    def put(self, key: _K, value: _V) -> None:
        # As BaseHashTable: the table grows before the lookup, so replacing a value can grow it too.
        if (len(self._values) + 1) * 0.75 > len(self._slots):
            self._rehash(len(self._slots) * 2)
        if key not in self._values:
            self._slots[self._index(key)].append(key)
        self._values[key] = value

    def remove(self, key: _K) -> None:
        if self._values.pop(key, None) is not None:
            self._slots[self._index(key)].remove(key)

    def _rehash(self, capacity: int) -> None:
        old, self._slots = self._slots, [[] for _ in range(capacity)]
        for chain in old:
            for key in chain:
                self._slots[self._index(key)].append(key)

    def __len__(self) -> int:
        return len(self._values)

    def items(self) -> list[tuple[_K, _V]]:
        return [(k, self._values[k]) for chain in self._slots for k in reversed(chain)]


class BrokersToPartitions:
    """Per broker, its partitions (of the ISR or of the ELR), as Kafka keeps them."""

    def __init__(self, *, with_leaders: bool) -> None:
        self.with_leaders = with_leaders
        self._members: dict[int, JavaTimelineMap[uuid.UUID, list[int]]] = {}

    def update(
        self,
        topic_id: uuid.UUID,
        partition_id: int,
        before: tuple[int, ...] | None,
        after: tuple[int, ...] | None,
        leader_before: int = NO_LEADER,
        leader_after: int = NO_LEADER,
    ) -> None:
        """A partition's members went from ``before`` to ``after`` (None: it did not / no longer exists)."""

        def entries(members: tuple[int, ...] | None, leader: int) -> list[int]:
            if members is None:
                return []
            if self.with_leaders and leader == NO_LEADER:
                return sorted([*members, NO_LEADER])
            return sorted(members)

        prev, nxt = entries(before, leader_before), entries(after, leader_after)
        for b in sorted(set(prev) | set(nxt)):
            was, now = b in prev, b in nxt
            if was and not now:
                self._remove(b, topic_id, self._flagged(partition_id, b == leader_before))
            elif now and not was:
                self._add(b, topic_id, self._flagged(partition_id, b == leader_after))
            elif was and self.with_leaders and (b == leader_before) != (b == leader_after):
                self._change(b, topic_id, partition_id, b == leader_before, b == leader_after)

    def _flagged(self, partition_id: int, leader: bool) -> int:
        return partition_id | LEADER_FLAG if leader and self.with_leaders else partition_id

    def _add(self, broker: int, topic_id: uuid.UUID, entry: int) -> None:
        topics = self._members.setdefault(broker, JavaTimelineMap())
        topics.put(topic_id, [*(topics.get(topic_id) or []), entry])

    def _change(self, broker: int, topic_id: uuid.UUID, partition_id: int, was: bool, now: bool) -> None:
        topics = self._members[broker]
        target = self._flagged(partition_id, was)
        topics.put(
            topic_id, [self._flagged(partition_id, now) if e == target else e for e in topics.get(topic_id) or []]
        )

    def _remove(self, broker: int, topic_id: uuid.UUID, entry: int) -> None:
        topics = self._members.get(broker)
        entries = topics.get(topic_id) if topics is not None else None
        if topics is None or entries is None:
            return
        rest = [e for e in entries if e != entry]
        if rest:
            topics.put(topic_id, rest)
            return
        topics.remove(topic_id)
        if not len(topics):
            del self._members[broker]

    def remove_topic(self, topic_id: uuid.UUID, broker: int) -> None:
        topics = self._members.get(broker)
        if topics is not None:
            topics.remove(topic_id)  # an emptied map stays, as in Kafka

    def partitions(self, broker: int, leaders_only: bool = False) -> list[tuple[uuid.UUID, int]]:
        topics = self._members.get(broker)
        if topics is None:
            return []
        return [
            (topic_id, e & REPLICA_MASK)
            for topic_id, entries in topics.items()
            for e in entries
            if not leaders_only or e & LEADER_FLAG
        ]
