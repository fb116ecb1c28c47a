"""How much one controller operation may carry, as Apache Kafka's KRaft controller bounds it.

One request that changes metadata (CreateTopics, CreatePartitions) becomes one operation whose
records are written as one batch, and Kafka caps that batch at 10,000 records. Two checks follow
from it, in this order (Kafka 4.0's ReplicationControlManager):

1. CreateTopics first adds up the partitions the request asks for, over every topic in it once
   duplicates are set aside: ``num_partitions`` (the broker's ``num.partitions`` for -1, nothing
   for 0 or below -1) or the number of manual assignments. Above 10,000 the whole request is
   refused before any topic is looked at: ``PARTITIONS_OVER_LIMIT``.
2. Then the records themselves are counted: per topic that passed its own checks one topic
   record, one config record per distinct config name and one record per partition. More than
   10,000 and the operation cannot be written: CreateTopics refuses the whole request
   (``BATCH_TOO_LARGE``), validate_only included, and nothing is created. CreatePartitions
   answers UNKNOWN_SERVER_ERROR (no message) for the topic that overflows and for every later
   one that would add a record (Kafka's list is full by then); topics before it still grow.

Since Kafka 4.4 (4.0 does not) CreatePartitions first adds up the partitions the request adds:
per topic named once that exists, the new count less the current one (nothing for a count that
does not grow it). Above 10,000 every such topic is refused, validate_only too:
``ADDITIONAL_PARTITIONS_OVER_LIMIT`` (``additional_partitions``).

Kafka writes the records of the overflowing CreatePartitions topic that still fitted, so that
topic grows part of the way; here it does not grow at all (the answer is the same). Kafka takes
a CreatePartitions request's topics in the order a java.util.HashSet of their names iterates,
not the request's, which decides which topic overflows: ``java_hash_set_order`` reproduces it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_RECORDS_PER_USER_OP = 10_000
PARTITIONS_OVER_LIMIT = "Excessively large number of partitions per request."
BATCH_TOO_LARGE = "Unable to perform excessively large batch operation."
ADDITIONAL_PARTITIONS_OVER_LIMIT = "Excessively large number of additional partitions per request."


def additional_partitions(growths: Iterable[tuple[int, int]]) -> int:
    """The partitions a CreatePartitions request adds, as Kafka 4.4 counts them before anything
    else: ``growths`` gives each existing topic's (current count, requested count)."""
    return sum(max(0, requested - current) for current, requested in growths)


def java_hash_set_order(names: Iterable[str]) -> list[str]:
    """The distinct names in the order a ``java.util.HashSet<String>`` filled with them in this
    order iterates: by hash bucket (String.hashCode, spread as HashMap.hash does, masked by a
    table of 16 doubled while more than 3/4 full), in insertion order within a bucket."""
    distinct = list(dict.fromkeys(names))
    capacity = 16
    while len(distinct) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        units = name.encode("utf-16-be")
        h = 0
        for i in range(0, len(units), 2):
            h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(distinct, key=bucket)  # sorted is stable: insertion order within a bucket


def requested_partitions(topics: Iterable[tuple[int, int]], default_partitions: int) -> int:
    """The partitions a CreateTopics request asks for, counted as Kafka counts them before
    anything else: ``topics`` gives each topic's (num_partitions, number of manual assignments)."""
    total = 0
    for num_partitions, assignments in topics:
        if assignments:
            total += assignments
        elif num_partitions == -1:
            total += default_partitions
        elif num_partitions > 0:
            total += num_partitions
    return total


def topic_records(partitions: int, config_names: int) -> int:
    """Records one new topic takes: its topic record, its config records, its partitions."""
    return 1 + config_names + partitions


@dataclass
class RecordBudget:
    """The records left in one operation's batch. ``full`` once one addition did not fit: Kafka's
    bounded list has been filled to the brim by then, so nothing more fits."""

    left: int = MAX_RECORDS_PER_USER_OP
    full: bool = False

    def take(self, records: int) -> bool:
        """Reserve ``records``; False (and nothing reserved) if they do not fit."""
        if self.full or records > self.left:
            self.full = True
            return False
        self.left -= records
        return True
