"""Where a new partition's replicas go: Kafka's StripedReplicaPlacer, and manual assignments.

The usable brokers are the registered ones not in controlled shutdown (Kafka's heartbeat
manager's ``usableBrokers``); fenced ones are usable but never lead, so a partition's first
replica (its leader) is always an unfenced broker, and a fenced one is chosen only for a later
replica when nothing else is left in its turn.

Striping, as Kafka does it: the brokers are grouped by rack (brokers without a rack form one
group of their own, first); each rack's brokers are sorted and start at a random offset, and
the racks start at a random one. Each partition takes its leader from the next rack in turn that
has an unfenced broker left in this round, then its other replicas from the following racks, one
per rack in turn, so that replicas spread over racks. Each partition is one step: a rack used
in a step starts one broker further on than in its last step; after as many steps as there are
unfenced brokers, racks and brokers are reshuffled, so that the same assignments do not repeat. Randomness comes from the
``random.Random`` the caller gives (seeded in tests), drawn in Kafka's order: given a Random
that draws as java.util.Random does, this places exactly as Kafka's class (tested so).

Refusals are Kafka's InvalidReplicationFactorException messages; the caller prefixes them with
"Unable to replicate the partition N time(s): " as ReplicationControlManager does.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafkalike.controller.api_error import ControllerApiError
from kafkalike.controller.image import BrokerRegistration
from kafkalike.protocol.errors import ErrorCode

# Kafka's DirectoryId values for a replica's log directory.
DIRECTORY_MIGRATING = uuid.UUID(int=0)  # the broker registered no directories
DIRECTORY_UNASSIGNED = uuid.UUID(int=1)  # several directories: the broker picks one and reports it


class PlacementError(ControllerApiError):
    """Kafka's InvalidReplicationFactorException: INVALID_REPLICATION_FACTOR with ``message``."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_REPLICATION_FACTOR, message)
        self.message = message


@dataclass(frozen=True, slots=True)
class UsableBroker:
    broker_id: int
    rack: str | None
    fenced: bool


def usable_brokers(brokers: Mapping[int, BrokerRegistration]) -> list[UsableBroker]:
    """The brokers a replica may be placed on: registered and not in controlled shutdown."""
    return [
        UsableBroker(b.broker_id, b.rack, b.fenced) for _, b in sorted(brokers.items()) if not b.in_controlled_shutdown
    ]


def is_active(brokers: Mapping[int, BrokerRegistration], broker_id: int) -> bool:
    """Registered, unfenced and not shutting down: may be in an ISR and lead (Kafka's isActive)."""
    b = brokers.get(broker_id)
    return b is not None and not b.fenced and not b.in_controlled_shutdown


def default_directory(brokers: Mapping[int, BrokerRegistration], broker_id: int) -> uuid.UUID:
    """The log directory a new replica on ``broker_id`` is recorded in (Kafka's defaultDir)."""
    b = brokers.get(broker_id)
    if b is None:
        return DIRECTORY_UNASSIGNED
    if not b.directories:
        return DIRECTORY_MIGRATING
    return b.directories[0] if len(b.directories) == 1 else DIRECTORY_UNASSIGNED


def _check_factor(replication_factor: int, total: int, unfenced: int) -> None:
    if replication_factor <= 0:
        raise PlacementError(
            f"Invalid replication factor {replication_factor}: the replication factor must be positive."
        )
    if unfenced == 0:
        raise PlacementError("All brokers are currently fenced, or have all their log directories cordoned.")
    if replication_factor > total:
        raise PlacementError(
            f"The target replication factor of {replication_factor} cannot be reached because only "
            f"{total} broker(s) are registered or some brokers have all their log directories cordoned."
        )


class _BrokerList:
    """One rack's fenced or unfenced brokers, walked from an offset that moves every round."""

    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.index = 0
        self.offset = 0
        self.epoch = 0

    def initialize(self, rng: random.Random) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.randrange(len(self.brokers))

    def next(self, epoch: int) -> int:
        """The next broker of this round, or -1 when every one has been taken in it."""
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            self.epoch, self.index = epoch, 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


class _Rack:
    def __init__(self) -> None:
        self.fenced = _BrokerList()
        self.unfenced = _BrokerList()

    def next(self, epoch: int) -> int:
        broker = self.unfenced.next(epoch)
        return broker if broker >= 0 else self.fenced.next(epoch)


def _java_string_hash(text: str) -> int:
    """Java's String.hashCode, as an unsigned 32-bit number."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_map_order(racks: Sequence[str | None]) -> list[str | None]:
    """The order a ``java.util.HashMap<Optional<String>, _>`` filled with these keys in this order
    iterates them: by bucket (the key's hash spread as HashMap.hash does, over a table of 16
    doubled while more than 3/4 full), insertion order within a bucket. Kafka's placer draws
    each rack's random start in this order, so the same seed places as Kafka places."""
    capacity = 16
    while len(racks) > capacity * 3 // 4:
        capacity *= 2

    def bucket(rack: str | None) -> int:
        h = 0 if rack is None else _java_string_hash(rack)  # Optional.hashCode
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(racks, key=bucket)  # stable: insertion order within a bucket


class StripedReplicaPlacer:
    """Places one topic's new partitions over a cluster's usable brokers (see the module doc)."""

    def __init__(self, brokers: Iterable[UsableBroker], rng: random.Random) -> None:
        self._rng = rng
        self._racks: dict[str | None, _Rack] = {}
        self._total = self._unfenced = 0
        for b in brokers:
            rack = self._racks.setdefault(b.rack, _Rack())
            (rack.fenced if b.fenced else rack.unfenced).brokers.append(b.broker_id)
            self._total += 1
            self._unfenced += not b.fenced
        self._rack_order = java_hash_map_order(list(self._racks))
        for name in self._rack_order:
            self._racks[name].fenced.initialize(rng)
            self._racks[name].unfenced.initialize(rng)
        # No rack first, then by name (Kafka's OptionalStringComparator).
        self._rack_names: list[str | None] = sorted(self._racks, key=lambda r: (r is not None, r or ""))
        self._epoch = 0
        self._offset = rng.randrange(len(self._rack_names)) if self._rack_names else 0

    def place(self, partitions: int, replication_factor: int) -> list[list[int]]:
        """The replicas of ``partitions`` new partitions, leader first; PlacementError if none."""
        _check_factor(replication_factor, self._total, self._unfenced)
        return [self._place_one(replication_factor) for _ in range(partitions)]

    def _shuffle(self) -> None:
        self._rng.shuffle(self._rack_names)
        for name in self._rack_order:
            self._rng.shuffle(self._racks[name].fenced.brokers)
            self._rng.shuffle(self._racks[name].unfenced.brokers)

    def _place_one(self, replication_factor: int) -> list[int]:
        _check_factor(replication_factor, self._total, self._unfenced)
        # A full round done: reshuffle so that the next does not repeat it (never for a single
        # unfenced broker, whose rounds are all alike anyway).
        if self._epoch == self._unfenced and self._unfenced > 1:
            self._shuffle()
            self._epoch = 0
        names = self._rack_names
        if self._offset == len(names):
            self._offset = 0
        first = self._offset
        while True:  # the leader: an unfenced broker, from the first rack that has one left
            leader = self._racks[names[first]].unfenced.next(self._epoch)
            if leader >= 0:
                break
            first = (first + 1) % len(names)
        replicas = [leader]
        index = self._offset
        for _ in range(1, replication_factor):
            broker = -1
            while broker < 0:  # bounded: the factor is at most the number of brokers
                if index == first:
                    first = -1  # the leader's rack: skipped once
                else:
                    broker = self._racks[names[index]].next(self._epoch)
                index = (index + 1) % len(names)
            replicas.append(broker)
        self._epoch += 1
        self._offset += 1
        return replicas


def check_manual_assignment(
    replicas: Sequence[int], brokers: Mapping[int, BrokerRegistration], replication_factor: int | None
) -> None:
    """Kafka's validateManualPartitionAssignment: a non-empty list of distinct registered
    brokers, as long as the partitions before it (``replication_factor``, None for the first)."""
    if not replicas:
        raise ControllerApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
        )
    previous = None
    for broker_id in sorted(replicas):
        if broker_id not in brokers:
            raise ControllerApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
            )
        if broker_id == previous:
            raise ControllerApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {previous} more than once.",
            )
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        raise ControllerApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is "
            f"not consistent with previous partitions, which have {replication_factor} replica(s).",
        )
