"""AlterPartitionReassignments (45, v0-1) and ListPartitionReassignments (46, v0) on the
controller (Kafka's ReplicationControlManager.alterPartitionReassignments, 4.4).

Per partition, the first failing check answers (the others of the request go on):

- no topic of that name, or no such partition: UNKNOWN_TOPIC_OR_PARTITION with Kafka's message;
- replicas null (a cancel) while nothing moves: NO_REASSIGNMENT_IN_PROGRESS; a cancel whose
  ISR would hold only replicas the reassignment added, unless unclean leader election is on
  for the topic: INVALID_REPLICA_ASSIGNMENT;
- target replicas empty, repeated or not registered: INVALID_REPLICA_ASSIGNMENT (as CreateTopics'
  manual assignments); with v1's ``allow_replication_factor_change`` false, a target whose
  length is not the partition's replication factor before any ongoing reassignment:
  INVALID_REPLICATION_FACTOR (KIP-860).

A target is applied from the partition's current replicas (an ongoing reassignment's included),
so a new target overrides the one in progress. A reassignment that only reorders the replicas,
or only removes some while the ISR keeps one of the others, completes in the same record; one
that adds replicas writes them as adding (and the removed ones as removing) and completes
later, in the AlterPartition that brings the added replicas into the ISR (see
``reassignment.py``). All the request's records are written in one batch.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from kafkalike.controller.api_error import ApiError, ControllerApiError
from kafkalike.controller.broker_partition_changes import BrokerPartitionChanges, PartitionRef, acceptable_leader
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.image import MetadataImage
from kafkalike.controller.partition_change import Election
from kafkalike.controller.placement import check_manual_assignment, default_directory
from kafkalike.controller.reassignment import ReassignmentReplicas
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import ApiMessageAndVersion

log = logging.getLogger("kafkalike.controller")
NO_REASSIGNMENT_IN_PROGRESS = ApiError(
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
)


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    partition_index: int
    error: ApiError = ApiError.NONE


@dataclass(frozen=True, slots=True)
class AlterReassignmentsReply:
    topics: tuple[tuple[str, tuple[ReassignmentResult, ...]], ...] = field(default=())
    allow_replication_factor_change: bool = True

    def to_response(self) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "allow_replication_factor_change": self.allow_replication_factor_change,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "responses": [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": r.partition_index,
                            "error_code": r.error.code,
                            "error_message": r.error.message,
                        }
                        for r in results
                    ],
                }
                for name, results in self.topics
            ],
        }


def alter_partition_reassignments(
    image: MetadataImage, changes: BrokerPartitionChanges, request: Message, version: int
) -> ControllerResult[AlterReassignmentsReply]:
    """An AlterPartitionReassignments request of ``version`` (see the module doc)."""
    allow_rf_change = bool(request.get("allow_replication_factor_change", True)) if version >= 1 else True
    records: list[ApiMessageAndVersion] = []
    topics: list[tuple[str, tuple[ReassignmentResult, ...]]] = []
    altered = total = 0
    for topic in request.topics:
        results = []
        for asked in topic.partitions:
            total += 1
            try:
                record = _alter_one(image, changes, topic.name, asked, allow_rf_change)
            except ControllerApiError as exc:
                log.info(
                    "Unable to alter partition reassignment for %s:%d because of %s: %s",
                    topic.name,
                    asked.partition_index,
                    exc.error.code.name,
                    exc.error.message,
                )
                results.append(ReassignmentResult(asked.partition_index, exc.error))
                continue
            altered += 1
            if record is not None:
                records.append(record)
            results.append(ReassignmentResult(asked.partition_index))
        topics.append((topic.name, tuple(results)))
    log.info("Successfully altered %d out of %d partition reassignment(s).", altered, total)
    return ControllerResult.of(records, AlterReassignmentsReply(tuple(topics), allow_rf_change))


def _alter_one(
    image: MetadataImage, changes: BrokerPartitionChanges, name: str, asked: Message, allow_rf_change: bool
) -> ApiMessageAndVersion | None:
    topic = image.topic(name)
    if topic is None:
        raise ControllerApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
    pid = asked.partition_index
    partition = topic.partitions.get(pid)
    if partition is None:
        raise ControllerApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{pid}.")
    ref: PartitionRef = (topic.topic_id, name, pid, partition)
    if asked.replicas is None:
        return _cancel(image, changes, ref)
    return _change(image, changes, ref, list(asked.replicas), allow_rf_change)


def _change(
    image: MetadataImage, changes: BrokerPartitionChanges, ref: PartitionRef, target: list[int], allow_rf_change: bool
) -> ApiMessageAndVersion | None:
    _, name, _, partition = ref
    check_manual_assignment(target, image.brokers, None)
    if not allow_rf_change:
        original = len(ReassignmentReplicas.of(partition).original_replicas)
        if len(target) != original:
            raise ControllerApiError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"The replication factor is changed from {original} to {len(target)}",
            )
    moving = ReassignmentReplicas.between(partition.replicas, target)
    options: dict[str, Any] = {}
    # As Kafka: a set left empty is not named, and the partition's own stays the target.
    if list(moving.replicas) != list(partition.replicas):
        options["target_replicas"] = list(moving.replicas)
    if moving.removing:
        options["target_removing"] = list(moving.removing)
    if moving.adding:
        options["target_adding"] = list(moving.adding)
    change = changes.change(
        image,
        ref,
        lambda r: acceptable_leader(image, partition, r),
        Election.ONLINE,
        default_directory=lambda broker: default_directory(image.brokers, broker),
        **options,
    )
    return changes.built(change, name)


def _cancel(image: MetadataImage, changes: BrokerPartitionChanges, ref: PartitionRef) -> ApiMessageAndVersion | None:
    """Kafka's cancelPartitionReassignment (PartitionReassignmentRevert): back to the original
    replicas, the added ones out of the ISR; an ISR left empty takes the first original
    replica, which is an unclean election."""
    _, name, pid, partition = ref
    moving = ReassignmentReplicas.of(partition)
    if not moving.in_progress:
        raise ControllerApiError(NO_REASSIGNMENT_IN_PROGRESS.code, NO_REASSIGNMENT_IN_PROGRESS.message)
    replicas = moving.original_replicas
    isr = [r for r in partition.isr if r not in moving.adding]
    unclean_enabled = changes.unclean_enabled(image, name)
    if not isr:
        if not replicas:
            raise ControllerApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Invalid replica assignment: addingReplicas contains all replicas.",
            )
        isr = [replicas[0]]
        if not unclean_enabled:
            raise ControllerApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Unable to revert partition assignment for {name}:{pid} because it would require an unclean "
                "leader election.",
            )
    change = changes.change(
        image,
        ref,
        lambda r: acceptable_leader(image, partition, r),
        Election.UNCLEAN if unclean_enabled else Election.ONLINE,
        target_isr=isr,
        target_replicas=replicas,
        target_removing=[],
        target_adding=[],
        default_directory=lambda broker: default_directory(image.brokers, broker),
    )
    return changes.built(change, name)


def list_partition_reassignments(image: MetadataImage, request: Message) -> dict[str, Any]:
    """ListPartitionReassignments: the named partitions (or, topics null, every partition) that
    are moving, with their replicas and the adding and removing ones; unknown ones left out."""
    wanted: list[tuple[uuid.UUID, list[int]]] = []
    if request.topics is None:
        for topic in image.topics_by_id.values():
            moving = [pid for pid, p in topic.partitions.items() if ReassignmentReplicas.of(p).in_progress]
            if moving:
                wanted.append((topic.topic_id, moving))
    else:
        for asked in request.topics:
            known = image.topic(asked.name)
            if known is not None:
                wanted.append((known.topic_id, list(asked.partition_indexes)))
    topics = []
    for topic_id, pids in wanted:
        topic = image.topics_by_id[topic_id]
        partitions = [
            {
                "partition_index": pid,
                "replicas": list(p.replicas),
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas),
            }
            for pid in pids
            if (p := topic.partitions.get(pid)) is not None and ReassignmentReplicas.of(p).in_progress
        ]
        if partitions:
            topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "topics": topics}
