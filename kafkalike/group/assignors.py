"""Server-side partition assignors of KIP-848 consumer groups: "uniform" (the default) and "range".

The coordinator hands an assignor a ``GroupSpec``: every member with the topic ids it subscribes
to and its previous *target* assignment, and the partition count of every subscribed topic. The
assignor returns the new target assignment of every member. Rules every assignor keeps:

- every partition of a subscribed topic goes to exactly one member subscribed to that topic
  (when at least one is);
- the result depends only on the spec: members and topics are visited in sorted order, so a
  replay or a test gets the same answer;
- an assignment maps a topic id to a non-empty frozenset of partitions (no empty entries).

``UniformAssignor`` follows Kafka's UniformAssignor in spirit rather than line by line: it is
sticky (a member keeps the target partitions it still subscribes to), then hands unassigned
partitions to the least loaded subscribed member, then moves partitions from the most to the
least loaded member until no move between two members that share a topic would narrow the gap.
With identical subscriptions this gives counts that differ by at most one, moving as few
partitions as possible. ``RangeAssignor`` is Kafka's: per topic, subscribed members (static
members first, by instance id, then by member id) get contiguous ranges, the first ones one
partition more when the count does not divide evenly.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

Assignment = Mapping[uuid.UUID, frozenset[int]]
TopicPartition = tuple[uuid.UUID, int]

UNIFORM = "uniform"
RANGE = "range"
# group.consumer.assignors takes Kafka's class names as well as the short names.
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


class PartitionAssignorError(Exception):
    """The assignor could not compute an assignment (Kafka: PartitionAssignorException)."""


@dataclass(frozen=True)
class MemberSpec:
    instance_id: str | None
    topics: frozenset[uuid.UUID]
    # The member's previous target assignment, which a sticky assignor starts from.
    assignment: Assignment = field(default_factory=dict)


@dataclass(frozen=True)
class GroupSpec:
    members: Mapping[str, MemberSpec]
    # Topic id -> number of partitions, for every topic some member subscribes to.
    partitions: Mapping[uuid.UUID, int]


class Assignor(Protocol):
    name: str

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]: ...


def to_assignment(partitions: Iterable[TopicPartition]) -> dict[uuid.UUID, frozenset[int]]:
    grouped: dict[uuid.UUID, set[int]] = defaultdict(set)
    for topic_id, partition in partitions:
        grouped[topic_id].add(partition)
    return {topic_id: frozenset(parts) for topic_id, parts in sorted(grouped.items()) if parts}


def _topic_order(spec: GroupSpec) -> list[uuid.UUID]:
    return sorted(spec.partitions)


def _check_topics(spec: GroupSpec) -> None:
    for member_id, member in spec.members.items():
        missing = [t for t in member.topics if t not in spec.partitions]
        if missing:
            raise PartitionAssignorError(f"member {member_id} subscribes to topics without metadata: {missing}")


class UniformAssignor:
    """Balanced and sticky (see the module docstring)."""

    name = UNIFORM

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        _check_topics(spec)
        members = sorted(spec.members)
        owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
        taken: set[TopicPartition] = set()
        for member_id in members:
            member = spec.members[member_id]
            for topic_id, partitions in sorted(member.assignment.items()):
                if topic_id not in member.topics:
                    continue
                for partition in sorted(partitions):
                    tp = (topic_id, partition)
                    if partition < spec.partitions[topic_id] and tp not in taken:
                        owned[member_id].add(tp)
                        taken.add(tp)
        order = {m: i for i, m in enumerate(members)}
        subscribers = {t: [m for m in members if t in spec.members[m].topics] for t in _topic_order(spec)}
        # Topics with fewer candidates first: they have the least freedom.
        unassigned = sorted(
            ((t, p) for t in subscribers if subscribers[t] for p in range(spec.partitions[t]) if (t, p) not in taken),
            key=lambda tp: (len(subscribers[tp[0]]), tp[0], tp[1]),
        )
        for tp in unassigned:
            target = min(subscribers[tp[0]], key=lambda m: (len(owned[m]), order[m]))
            owned[target].add(tp)
        self._balance(spec, members, owned)
        return {m: to_assignment(owned[m]) for m in members}

    @staticmethod
    def _balance(spec: GroupSpec, members: Sequence[str], owned: dict[str, set[TopicPartition]]) -> None:
        """Move one partition at a time from a heavier to a lighter member until none helps."""
        moved = True
        while moved:
            moved = False
            by_load = sorted(members, key=lambda m: (-len(owned[m]), m))
            for heavy in by_load:
                for light in reversed(by_load):
                    if len(owned[heavy]) - len(owned[light]) < 2:
                        break
                    topics = spec.members[light].topics
                    candidates = sorted(tp for tp in owned[heavy] if tp[0] in topics)
                    if candidates:
                        tp = candidates[-1]
                        owned[heavy].remove(tp)
                        owned[light].add(tp)
                        moved = True
                        break
                if moved:
                    break


class RangeAssignor:
    """Contiguous ranges per topic, as Kafka's server-side RangeAssignor."""

    name = RANGE

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        _check_topics(spec)
        members = sorted(spec.members, key=lambda m: _range_order(m, spec.members[m]))
        owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
        for topic_id in _topic_order(spec):
            subscribed = [m for m in members if topic_id in spec.members[m].topics]
            if not subscribed:
                continue
            count = spec.partitions[topic_id]
            quota, extra = divmod(count, len(subscribed))
            start = 0
            for index, member_id in enumerate(subscribed):
                end = min(start + quota + (1 if index < extra else 0), count)
                owned[member_id].update((topic_id, p) for p in range(start, end))
                start = end
        return {m: to_assignment(owned[m]) for m in members}


def _range_order(member_id: str, member: MemberSpec) -> tuple[int, str]:
    if member.instance_id is not None:
        return (0, member.instance_id)
    return (1, member_id)


ASSIGNORS: dict[str, Assignor] = {UNIFORM: UniformAssignor(), RANGE: RangeAssignor()}


def assignors_from_config(names: Iterable[str]) -> tuple[str, ...]:
    """The assignor names of ``group.consumer.assignors``, the first being the default."""
    out: list[str] = []
    for raw in names:
        name = CLASS_NAMES.get(raw.strip(), raw.strip())
        if not name:
            continue
        if name not in ASSIGNORS:
            raise ValueError(f"unknown consumer group assignor {raw!r} (known: {', '.join(ASSIGNORS)})")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError("group.consumer.assignors names no assignor")
    return tuple(out)
