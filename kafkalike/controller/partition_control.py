"""A partition leader's AlterPartition, an admin's ElectLeaders and the controller's own passes:
unclean elections for leaderless partitions, preferred elections to balance leadership (Kafka's
ReplicationControlManager.alterPartition, electLeaders, maybeElectUncleanLeaders and
maybeBalancePartitionLeaders, 4.x; checked byte for byte against Kafka 4.4.0's in
tests/unit/controller/test_partition_control_oracle.py).

AlterPartition (56, v2-3: Kafka 4.0 removed v0-1): the requester's broker epoch first
(STALE_BROKER_EPOCH for the whole request); then per topic, by id (UNKNOWN_TOPIC_ID); then per
partition, the first failing check answers:

- no such partition: UNKNOWN_TOPIC_OR_PARTITION;
- a leader epoch or partition epoch newer than the controller's: NOT_CONTROLLER (this controller
  is probably behind: the leader goes and finds the active one);
- an older leader epoch: FENCED_LEADER_EPOCH; a requester that is not the leader: INVALID_REQUEST;
  an older partition epoch: INVALID_UPDATE_VERSION;
- an ISR with a negative, repeated or non-replica id, or without the leader: INVALID_REQUEST;
  RECOVERING with more than one ISR member, or RECOVERED -> RECOVERING: INVALID_REQUEST;
- an ISR member not registered, fenced, in controlled shutdown, or (v3, epoch given) at another
  broker epoch: INELIGIBLE_REPLICA.

Otherwise the new ISR goes through PartitionChange (the ELR takes the members leaving an ISR
below min.insync.replicas), and the answer is the partition as the change leaves it. A change
that moves the leadership away from the requester answers NEW_LEADER_ELECTED instead, as Kafka
does when a reassignment completes.

ElectLeaders (43): PREFERRED (0) or UNCLEAN (1) per partition; ELECTION_NOT_NEEDED when the
preferred replica already leads (PREFERRED) or there is a leader (UNCLEAN); no record possible:
PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE; unknown topic or partition:
UNKNOWN_TOPIC_OR_PARTITION with Kafka's message. Null topics: every partition, without those
that needed no election. Another election type: INVALID_REQUEST for the whole request.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kafkalike.controller.api_error import ApiError, ControllerApiError
from kafkalike.controller.broker_partition_changes import (
    BrokerPartitionChanges,
    PartitionRef,
    acceptable_leader,
)
from kafkalike.controller.cluster_control import check_broker_epoch
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.image import NO_LEADER, NO_LEADER_CHANGE, MetadataImage, PartitionRegistration
from kafkalike.controller.partition_change import RECOVERING, Election
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import ApiMessageAndVersion

log = logging.getLogger("kafkalike.controller")
PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1
# Kafka's ApiError(Errors) carries the error's own message (Errors.java).
ELECTION_NOT_NEEDED = ApiError(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
PREFERRED_LEADER_NOT_AVAILABLE = ApiError(
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."
)
ELIGIBLE_LEADERS_NOT_AVAILABLE = ApiError(
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Eligible topic partition leaders are not available."
)
RECOVERED = 0
# Kafka's maxElectionsPerImbalance: elections one periodic pass makes before asking to run again.
MAX_ELECTIONS_PER_PASS = 1000


# -- AlterPartition --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    """One partition's answer: an error, or the partition as the change left it."""

    partition_index: int
    error: ErrorCode = ErrorCode.NONE
    partition: PartitionRegistration | None = None

    def to_response(self) -> dict[str, Any]:
        p = self.partition
        if p is None or self.error != ErrorCode.NONE:
            return {"partition_index": self.partition_index, "error_code": self.error}
        return {
            "partition_index": self.partition_index,
            "error_code": ErrorCode.NONE,
            "leader_id": p.leader,
            "leader_epoch": p.leader_epoch,
            "isr": list(p.isr),
            "leader_recovery_state": p.leader_recovery_state,
            "partition_epoch": p.partition_epoch,
        }


@dataclass(frozen=True, slots=True)
class AlterPartitionTopicResult:
    topic_id: uuid.UUID
    partitions: tuple[AlterPartitionResult, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionReply:
    error: ApiError = ApiError.NONE
    topics: tuple[AlterPartitionTopicResult, ...] = ()

    def to_response(self) -> dict[str, Any]:
        topics = [
            {
                "topic_id": t.topic_id,
                "partitions": [p.to_response() for p in t.partitions],
            }
            for t in self.topics
        ]
        return {"throttle_time_ms": 0, "error_code": self.error.code, "topics": topics}


def _valid_isr(replicas: Iterable[int], isr: list[int]) -> bool:
    """Kafka's Replicas.validateIsr: distinct, non-negative replicas of the partition."""
    return len(set(isr)) == len(isr) and all(b >= 0 for b in isr) and set(isr) <= set(replicas)


def _ineligible(image: MetadataImage, members: list[tuple[int, int]]) -> list[str]:
    """The ISR members that may not be in an ISR, each with Kafka's reason."""
    out = []
    for broker_id, broker_epoch in members:
        b = image.brokers.get(broker_id)
        if b is None:
            out.append(f"{broker_id} (not registered)")
        elif b.in_controlled_shutdown:
            out.append(f"{broker_id} (shutting down)")
        elif b.fenced:
            out.append(f"{broker_id} (fenced)")
        elif broker_epoch != -1 and b.epoch != broker_epoch:
            out.append(f"{broker_id} (broker epoch mismatch: requested={broker_epoch} VS expected={b.epoch})")
    return out


def _check_alter(
    image: MetadataImage,
    requester: int,
    name: str,
    partition_id: int,
    partition: PartitionRegistration | None,
    asked: Message,
    members: list[tuple[int, int]],
) -> ErrorCode:
    """validateAlterPartitionData: the first failing check's code, NONE when it may go ahead."""
    where = f"AlterPartition from broker {requester} for {name}-{partition_id} refused"
    if partition is None:
        log.info("%s: no such partition", where)
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if asked.leader_epoch > partition.leader_epoch or asked.partition_epoch > partition.partition_epoch:
        log.debug("%s: its epochs are ahead of this controller's", where)
        return ErrorCode.NOT_CONTROLLER
    if asked.leader_epoch < partition.leader_epoch:
        log.debug("%s: leader epoch %d, not %d", where, asked.leader_epoch, partition.leader_epoch)
        return ErrorCode.FENCED_LEADER_EPOCH
    if requester != partition.leader:
        log.info("%s: the leader is %d", where, partition.leader)
        return ErrorCode.INVALID_REQUEST
    if asked.partition_epoch < partition.partition_epoch:
        log.info("%s: partition epoch %d, not %d", where, asked.partition_epoch, partition.partition_epoch)
        return ErrorCode.INVALID_UPDATE_VERSION
    isr = [b for b, _ in members]
    if not _valid_isr(partition.replicas, isr):
        log.error("%s: invalid ISR %s", where, isr)
        return ErrorCode.INVALID_REQUEST
    if partition.leader not in isr:
        log.error("%s: the ISR %s does not include the leader", where, isr)
        return ErrorCode.INVALID_REQUEST
    state = asked.get("leader_recovery_state", RECOVERED)
    if state == RECOVERING and len(isr) > 1:
        log.info("%s: ISR %s of more than one replica while the leader recovers", where, isr)
        return ErrorCode.INVALID_REQUEST
    if partition.leader_recovery_state == RECOVERED and state == RECOVERING:
        log.info("%s: the leader recovery state cannot go from RECOVERED to RECOVERING", where)
        return ErrorCode.INVALID_REQUEST
    ineligible = _ineligible(image, members)
    if ineligible:
        log.info("%s: ineligible replicas %s in the new ISR %s", where, ", ".join(ineligible), isr)
        return ErrorCode.INELIGIBLE_REPLICA
    return ErrorCode.NONE


def alter_partition(
    image: MetadataImage, changes: BrokerPartitionChanges, request: Message, version: int
) -> ControllerResult[AlterPartitionReply]:
    """An AlterPartition request of ``version`` (see the module doc)."""
    try:
        check_broker_epoch(image, request.broker_id, request.broker_epoch)
    except ControllerApiError as exc:
        log.info("AlterPartition from broker %d refused: %s", request.broker_id, exc.error.message)
        return ControllerResult.of((), AlterPartitionReply(exc.error))
    records: list[ApiMessageAndVersion] = []
    topics: list[AlterPartitionTopicResult] = []
    for asked_topic in request.topics:
        topic_id = asked_topic.topic_id
        topic = image.topics_by_id.get(topic_id)
        if topic is None:
            log.info("AlterPartition for unknown topic id %s refused", topic_id)
            unknown = ErrorCode.UNKNOWN_TOPIC_ID
            results = tuple(AlterPartitionResult(p.partition_index, unknown) for p in asked_topic.partitions)
            topics.append(AlterPartitionTopicResult(topic_id, results))
            continue
        answered = [
            _alter_one(image, changes, request.broker_id, topic.topic_id, topic.name, asked, version, records)
            for asked in asked_topic.partitions
        ]
        topics.append(AlterPartitionTopicResult(topic_id, tuple(answered)))
    return ControllerResult.of(records, AlterPartitionReply(topics=tuple(topics)))


def _alter_one(
    image: MetadataImage,
    changes: BrokerPartitionChanges,
    requester: int,
    topic_id: uuid.UUID,
    name: str,
    asked: Message,
    version: int,
    records: list[ApiMessageAndVersion],
) -> AlterPartitionResult:
    pid = asked.partition_index
    partition = image.partition(topic_id, pid)
    if version >= 3:
        members = [(b.broker_id, b.broker_epoch) for b in asked.new_isr_with_epochs]
    else:
        members = [(b, -1) for b in asked.new_isr]
    error = _check_alter(image, requester, name, pid, partition, asked, members)
    if error != ErrorCode.NONE:
        return AlterPartitionResult(pid, error)
    assert partition is not None
    current = partition
    ref: PartitionRef = (topic_id, name, pid, current)
    change = changes.change(
        image,
        ref,
        lambda r: acceptable_leader(image, current, r),
        Election.UNCLEAN if changes.unclean_enabled(image, name) else Election.ONLINE,
        target_isr=[b for b, _ in members],
        leader_recovery_state=asked.get("leader_recovery_state", RECOVERED),
    )
    record = changes.built(change, name)
    if record is not None:
        records.append(record)
        current = current.merge(record)
        log.debug("broker %d altered the ISR of %s-%d to %s", requester, name, pid, list(current.isr))
        if record.leader not in (requester, NO_LEADER_CHANGE):
            log.info("AlterPartition from broker %d for %s-%d moved the leadership", requester, name, pid)
            return AlterPartitionResult(pid, ErrorCode.NEW_LEADER_ELECTED)
    return AlterPartitionResult(pid, ErrorCode.NONE, current)


# -- Kafka's iteration order -----------------------------------------------------------------------


def java_string_hash(value: str) -> int:
    """Java's String.hashCode (as a signed 32-bit int)."""
    h = 0
    for unit in value.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def timeline_hash_order(keys: Iterable[Any], hash_code: Callable[[Any], int]) -> list[Any]:
    """``keys``, added in this order to one of Kafka's TimelineHashMaps made for 0 elements (a
    topic's partitions, the topics by name), in the order it iterates them: its BaseHashTable's
    slots in order, each slot's chain from its last arrival back (SnapshottableHashTable's
    CurrentIterator takes them from the end), rehashed by doubling at 3/4 full."""
    slots: list[list[Any]] = [[], []]

    def slot_of(key: Any, size: int) -> int:
        shift = 65 - size.bit_length()
        product = (hash_code(key) * -7046029254386353131) & 0xFFFFFFFFFFFFFFFF
        return product >> shift

    for count, key in enumerate(keys):
        if (count + 1) * 0.75 > len(slots):
            grown: list[list[Any]] = [[] for _ in range(len(slots) * 2)]
            for chain in slots:
                for k in chain:
                    grown[slot_of(k, len(grown))].append(k)
            slots = grown
        slots[slot_of(key, len(slots))].append(key)
    return [k for chain in slots for k in reversed(chain)]


# -- ElectLeaders ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ElectionResult:
    partition_id: int
    error: ApiError


@dataclass(frozen=True, slots=True)
class ElectLeadersReply:
    error: ApiError = ApiError.NONE
    topics: tuple[tuple[str, tuple[ElectionResult, ...]], ...] = field(default=())

    def to_response(self) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "error_code": self.error.code,
            "replica_election_results": [
                {
                    "topic": name,
                    "partition_result": [
                        {"partition_id": r.partition_id, "error_code": r.error.code, "error_message": r.error.message}
                        for r in results
                    ],
                }
                for name, results in self.topics
            ],
        }


def elect_leader(
    image: MetadataImage,
    changes: BrokerPartitionChanges,
    name: str,
    partition_id: int,
    election_type: int,
    records: list[ApiMessageAndVersion],
) -> ApiError:
    """Kafka's electLeader: one partition's election, its record appended to ``records``."""
    topic = image.topic(name)
    if topic is None:
        return ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}")
    partition = topic.partitions.get(partition_id)
    if partition is None:
        return ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{partition_id}")
    preferred = election_type == PREFERRED_ELECTION
    if (preferred and partition.leader == partition.replicas[0]) or (not preferred and partition.has_leader):
        return ELECTION_NOT_NEEDED
    change = changes.change(
        image,
        (topic.topic_id, name, partition_id, partition),
        lambda r: acceptable_leader(image, partition, r),
        Election.PREFERRED if preferred else Election.UNCLEAN,
    )
    record = changes.built(change, name)
    if record is None:
        return PREFERRED_LEADER_NOT_AVAILABLE if preferred else ELIGIBLE_LEADERS_NOT_AVAILABLE
    records.append(record)
    return ApiError.NONE


def elect_leaders(
    image: MetadataImage, changes: BrokerPartitionChanges, request: Message, version: int
) -> ControllerResult[ElectLeadersReply]:
    """An ElectLeaders request (see the module doc); v0 has no election type: PREFERRED."""
    election_type = request.election_type if version >= 1 else PREFERRED_ELECTION
    if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
        error = ApiError(ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}")
        return ControllerResult.of((), refused_elect_leaders(request, error))
    records: list[ApiMessageAndVersion] = []
    topics: list[tuple[str, tuple[ElectionResult, ...]]] = []
    if request.topic_partitions is None:
        # In Kafka's order: its maps of topics and partitions are hash tables (a partition's
        # own, created in id order; the topics in the image's order, which is creation order).
        for name in timeline_hash_order(image.topics_by_name, java_string_hash):
            topic = image.topics_by_name[name]
            results = [
                ElectionResult(pid, error)
                for pid in timeline_hash_order(sorted(topic.partitions), lambda i: i)
                if (error := elect_leader(image, changes, name, pid, election_type, records)).code
                != ErrorCode.ELECTION_NOT_NEEDED
            ]
            topics.append((name, tuple(results)))
    else:
        for asked in request.topic_partitions:
            results = [
                ElectionResult(pid, elect_leader(image, changes, asked.topic, pid, election_type, records))
                for pid in asked.partitions
            ]
            topics.append((asked.topic, tuple(results)))
    return ControllerResult.of(records, ElectLeadersReply(topics=tuple(topics)))


def refused_elect_leaders(request: Message, error: ApiError) -> ElectLeadersReply:
    """Kafka's ElectLeadersRequest.getErrorResponse: the error at the top and for every partition asked."""
    topics = tuple(
        (t.topic, tuple(ElectionResult(pid, error) for pid in t.partitions)) for t in request.topic_partitions or ()
    )
    return ElectLeadersReply(error, topics)


# -- the controller's own elections ----------------------------------------------------------------


def elect_unclean_leaders(
    image: MetadataImage, changes: BrokerPartitionChanges, max_elections: int = MAX_ELECTIONS_PER_PASS
) -> ControllerResult[bool]:
    """Kafka's maybeElectUncleanLeaders: an unclean election for each leaderless partition of a
    topic with unclean.leader.election.enable; the reply says whether to run again at once."""
    records: list[ApiMessageAndVersion] = []
    for _, name, pid, _ in changes.leaderless(image):
        if len(records) >= max_elections:
            break
        if not changes.unclean_enabled(image, name):
            continue
        error = elect_leader(image, changes, name, pid, UNCLEAN_ELECTION, records)
        if not error.ok:
            log.warning(
                "no unclean leader election possible for offline partition %s-%d: %s", name, pid, error.code.name
            )
    return ControllerResult.of(records, len(records) >= max_elections)


def has_leaderless_partitions(image: MetadataImage) -> bool:
    """Kafka's areSomePartitionsLeaderless."""
    return any(p.leader == NO_LEADER for t in image.topics_by_id.values() for p in t.partitions.values())


def balance_partition_leaders(
    image: MetadataImage, changes: BrokerPartitionChanges, max_elections: int = MAX_ELECTIONS_PER_PASS
) -> ControllerResult[bool]:
    """Kafka's maybeBalancePartitionLeaders (auto.leader.rebalance.enable): a preferred election
    for each partition its first replica does not lead; the reply says whether to run again at
    once. Kafka 4 has no leader.imbalance.per.broker.percentage: any such partition counts."""
    records: list[ApiMessageAndVersion] = []
    for topic_id, pid in list(changes.imbalanced):
        if len(records) >= max_elections:
            break
        topic = image.topics_by_id.get(topic_id)
        partition = None if topic is None else topic.partitions.get(pid)
        if topic is None or partition is None:
            log.error("skipping unknown imbalanced partition %s-%d", topic_id, pid)
            continue
        change = changes.change(
            image,
            (topic_id, topic.name, pid, partition),
            lambda r, p=partition: acceptable_leader(image, p, r),  # type: ignore[misc]
            Election.PREFERRED,
        )
        record = changes.built(change, topic.name)
        if record is not None:
            records.append(record)
    return ControllerResult.of(records, len(records) >= max_elections)
