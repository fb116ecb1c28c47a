"""Topics and partitions as records: CreateTopics, CreatePartitions, DeleteTopics (Kafka's
ReplicationControlManager, with the request-level checks of its ControllerApis).

Every operation is checked against an image, the latest one the controller knows (committed
records and those appended but not yet committed, so that a topic whose creation is still on
its way already exists), and gives a ``ControllerResult``: the records, and per topic the answer.
Nothing here changes the image: the records do once committed and replayed.

CreateTopics, per topic in this order (the first failing check answers):
- a name given twice: INVALID_REQUEST "Duplicate topic name." (once per name, after the others);
  ``__cluster_metadata``: INVALID_REQUEST (Kafka's words), also after the others;
- the name (Kafka's Topic.validate) INVALID_TOPIC_EXCEPTION; a name that differs from an existing
  topic's (or one created earlier in the request) only by '.' and '_' collides with it:
  INVALID_TOPIC_EXCEPTION naming it; an existing name TOPIC_ALREADY_EXISTS;
- configs: a null value, an unknown name, a value its declaration refuses, a set a log cannot
  run with: INVALID_CONFIG;
- manual assignments (replication factor and partition count must then be -1, INVALID_REQUEST):
  each partition once, a non-empty list of distinct registered brokers, all of one length, at
  least one of them active, partitions 0..n-1: INVALID_REPLICA_ASSIGNMENT;
- otherwise replication factor 0 or below -1 INVALID_REPLICATION_FACTOR, partition count 0 or
  below -1 INVALID_PARTITIONS (-1: the broker defaults), then placement (``placement.py``):
  INVALID_REPLICATION_FACTOR "Unable to replicate the partition N time(s): ..." with Kafka's
  reason (no unfenced broker, fewer brokers than the factor);
The whole request is refused (POLICY_VIOLATION for every topic, nothing created) when it asks
for more than 10,000 partitions, or when its records would exceed one operation's 10,000
(``limits.py``); CreatePartitions refuses every topic when they add more than 10,000 partitions in
all (Kafka 4.4). validate_only answers the same and gives no records.

A new partition's ISR is its active replicas (in replica order), its leader the first of them, leader and partition
epoch 0 (Kafka's PartitionRecord for a new partition). The records of a topic: TopicRecord, its
ConfigRecords (in the order of Kafka's HashMap of them), then its PartitionRecords.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import random
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafkalike.controller.api_error import ApiError, ControllerApiError
from kafkalike.controller.configuration_control import ConfigDefaults, topic_configs_problem
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.features import LEVELS_BY_NAME
from kafkalike.controller.image import TOPIC_RESOURCE, MetadataImage, PartitionRegistration
from kafkalike.controller.limits import (
    ADDITIONAL_PARTITIONS_OVER_LIMIT,
    BATCH_TOO_LARGE,
    MAX_RECORDS_PER_USER_OP,
    PARTITIONS_OVER_LIMIT,
    RecordBudget,
    additional_partitions,
    java_hash_set_order,
    requested_partitions,
    topic_records,
)
from kafkalike.controller.placement import (
    PlacementError,
    StripedReplicaPlacer,
    check_manual_assignment,
    default_directory,
    is_active,
    usable_brokers,
)
from kafkalike.controller.topic_names import (
    CLUSTER_METADATA_TOPIC,
    check_topic_name,
    collision_key,
    has_collision_chars,
)
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record

T = MetadataRecordType
log = logging.getLogger("kafkalike.controller")
ZERO_UUID = uuid.UUID(int=0)
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID, never a topic's
UNKNOWN_TOPIC = "This server does not host this topic-partition."
UNKNOWN_TOPIC_ID = "This server does not host this topic ID."
DUPLICATE_TOPIC = "Duplicate topic name."
DIRECTORIES_LEVEL = LEVELS_BY_NAME["3.7-IV2"]  # PartitionRecord v1: each replica's directory
ELR_LEVEL = LEVELS_BY_NAME["4.0-IV1"]  # PartitionRecord v2: eligible leader replicas


def partition_record_version(metadata_version: int) -> int:
    """The PartitionRecord version a metadata.version writes (0 when none is set yet: the latest)."""
    if metadata_version == 0 or metadata_version >= ELR_LEVEL:
        return 2
    return 1 if metadata_version >= DIRECTORIES_LEVEL else 0


def partition_record(
    partition: PartitionRegistration, topic_id: uuid.UUID, partition_id: int, metadata_version: int
) -> ApiMessageAndVersion:
    """A new partition's record, at the version the cluster's metadata.version writes."""
    version = partition_record_version(metadata_version)
    if version == 0:
        partition = dataclasses.replace(partition, directories=())
    return dataclasses.replace(partition.to_record(topic_id, partition_id), version=version)


def partition_records(
    partitions: Sequence[PartitionRegistration], topic_id: uuid.UUID, first_id: int, metadata_version: int
) -> list[ApiMessageAndVersion]:
    """The records of new partitions ``first_id``, ``first_id + 1``...: built once per distinct
    registration (a topic's partitions share a few) and copied with their partition id, since
    building a record costs far more than copying one."""
    built: dict[PartitionRegistration, ApiMessageAndVersion] = {}
    out = []
    for offset, partition in enumerate(partitions):
        template = built.get(partition)
        if template is None:
            template = built[partition] = partition_record(partition, topic_id, first_id + offset, metadata_version)
        message = type(template.message)(template.message)
        message["partition_id"] = first_id + offset
        out.append(dataclasses.replace(template, message=message))
    return out


def random_topic_id(rng: random.Random, taken: Mapping[uuid.UUID, object] | None = None) -> uuid.UUID:
    """A new topic id as Kafka's Uuid.randomUuid makes one: never the zero or metadata topic id,
    and never one whose text starts with '-' (a command line would read it as an option); nor
    one of ``taken`` (two controllers seeded alike must not reuse a topic's id)."""
    while True:
        candidate = uuid.UUID(int=rng.getrandbits(128))
        if candidate in (ZERO_UUID, METADATA_TOPIC_ID) or (taken is not None and candidate in taken):
            continue
        if not base64.urlsafe_b64encode(candidate.bytes).startswith(b"-"):
            return candidate


@dataclass(frozen=True, slots=True)
class CreatableTopicResult:
    """One topic's answer; a created (or validated) topic has its id, partition count and factor."""

    name: str
    error: ApiError
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopicResult:
    name: str
    error: ApiError


@dataclass(frozen=True, slots=True)
class DeletableTopicResult:
    name: str | None
    topic_id: uuid.UUID
    error: ApiError


@dataclass(frozen=True)
class TopicDefaults:
    """The brokers' ``num.partitions`` and ``default.replication.factor``, for -1 in a request."""

    num_partitions: int = 1
    replication_factor: int = 1


class ReplicationControl:
    """Creates, grows and deletes topics as records (see the module doc)."""

    def __init__(
        self,
        rng: random.Random,
        topic_defaults: TopicDefaults | None = None,
        config_defaults: ConfigDefaults | None = None,
        delete_topic_enable: bool = True,
    ) -> None:
        self.rng = rng
        self.delete_topic_enable = delete_topic_enable  # the brokers' delete.topic.enable
        self.topic_defaults = topic_defaults or TopicDefaults()
        self.config_defaults = config_defaults or ConfigDefaults()

    # -- CreateTopics ----------------------------------------------------------------------

    def create_topics(self, image: MetadataImage, request: Message) -> ControllerResult[list[CreatableTopicResult]]:
        counts = Counter(t.name for t in request.topics)
        unique = [t for t in request.topics if counts[t.name] == 1]
        asked = requested_partitions(
            ((t.num_partitions, len(t.assignments)) for t in unique), self.topic_defaults.num_partitions
        )
        if asked > MAX_RECORDS_PER_USER_OP:
            return self._refuse_all(request, PARTITIONS_OVER_LIMIT)
        results: list[CreatableTopicResult] = []
        records: list[ApiMessageAndVersion] = []
        budget = RecordBudget()
        collisions = {collision_key(n): n for n in image.topics_by_name if has_collision_chars(n)}
        config_problems: dict[tuple[tuple[str, str | None], ...], str | None] = {}
        for topic in unique:
            if topic.name == CLUSTER_METADATA_TOPIC:
                continue
            try:
                result, topic_records_ = self._create_topic(image, topic, collisions, config_problems)
            except ControllerApiError as exc:
                results.append(CreatableTopicResult(topic.name, exc.error))
                continue
            if not budget.take(len(topic_records_)):
                return self._refuse_all(request, BATCH_TOO_LARGE)
            results.append(result)
            records += topic_records_
            if has_collision_chars(topic.name):
                collisions.setdefault(collision_key(topic.name), topic.name)
        results += [
            CreatableTopicResult(name, ApiError(ErrorCode.INVALID_REQUEST, DUPLICATE_TOPIC))
            for name in sorted(n for n, c in counts.items() if c > 1)
        ]
        if counts.get(CLUSTER_METADATA_TOPIC) == 1:
            message = f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."
            results.append(CreatableTopicResult(CLUSTER_METADATA_TOPIC, ApiError(ErrorCode.INVALID_REQUEST, message)))
        return ControllerResult.of([] if request.validate_only else records, results)

    @staticmethod
    def _refuse_all(request: Message, message: str) -> ControllerResult[list[CreatableTopicResult]]:
        error = ApiError(ErrorCode.POLICY_VIOLATION, message)
        return ControllerResult.of([], [CreatableTopicResult(t.name, error) for t in request.topics])

    def _create_topic(
        self,
        image: MetadataImage,
        topic: Message,
        collisions: Mapping[str, str],
        config_problems: dict[tuple[tuple[str, str | None], ...], str | None],
    ) -> tuple[CreatableTopicResult, list[ApiMessageAndVersion]]:
        name = topic.name
        check_topic_name(name)
        if image.topic(name) is not None:
            raise ControllerApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if has_collision_chars(name) and collision_key(name) in collisions:
            raise ControllerApiError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {collisions[collision_key(name)]}",
            )
        configs = {c.name: c.value for c in topic.configs}
        self._check_configs(configs, config_problems)
        if topic.assignments:
            partitions = self._manual_partitions(image, topic)
        else:
            partitions = self._placed_partitions(image, topic)
        topic_id = random_topic_id(self.rng, image.topics_by_id)
        records = [metadata_record(T.TOPIC_RECORD, name=name, topic_id=topic_id)]
        records += [
            metadata_record(T.CONFIG_RECORD, resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=v)
            for k, v in ((k, configs[k]) for k in java_hash_set_order(configs))
        ]
        records += partition_records(partitions, topic_id, 0, image.metadata_version)
        assert len(records) == topic_records(len(partitions), len(configs))
        result = CreatableTopicResult(name, ApiError.NONE, topic_id, len(partitions), len(partitions[0].replicas))
        return result, records

    def _check_configs(
        self, configs: Mapping[str, str | None], problems: dict[tuple[tuple[str, str | None], ...], str | None]
    ) -> None:
        """Refuse bad topic configs; checked once per distinct set in a request (many topics of
        a big request share theirs)."""
        if any(v is None for v in configs.values()):
            raise ControllerApiError(ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs.")
        key = tuple(sorted(configs.items()))
        if key not in problems:
            values = {k: v for k, v in configs.items() if v is not None}  # all of them, checked above
            problems[key] = topic_configs_problem(values, self.config_defaults)
        problem = problems[key]
        if problem is not None:
            raise ControllerApiError(ErrorCode.INVALID_CONFIG, problem)

    def _manual_partitions(self, image: MetadataImage, topic: Message) -> list[PartitionRegistration]:
        if topic.replication_factor != -1:
            raise ControllerApiError(
                ErrorCode.INVALID_REQUEST,
                "A manual partition assignment was specified, but replication factor was not set to -1.",
            )
        if topic.num_partitions != -1:
            raise ControllerApiError(
                ErrorCode.INVALID_REQUEST,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        partitions: dict[int, PartitionRegistration] = {}
        factor: int | None = None
        for assignment in topic.assignments:
            index = assignment.partition_index
            if index in partitions:
                raise ControllerApiError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Found multiple manual partition assignments for partition {index}",
                )
            partitions[index] = self._manual_partition(image, list(assignment.broker_ids), factor, index)
            factor = len(assignment.broker_ids)
        if any(i not in partitions for i in range(len(partitions))):
            raise ControllerApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"
            )
        return [partitions[i] for i in range(len(partitions))]

    def _manual_partition(
        self, image: MetadataImage, replicas: Sequence[int], factor: int | None, index: int
    ) -> PartitionRegistration:
        check_manual_assignment(replicas, image.brokers, factor)
        isr = [b for b in replicas if is_active(image.brokers, b)]
        if not isr:
            raise ControllerApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition {index} "
                "are fenced or in controlled shutdown.",
            )
        return self._new_partition(image, replicas, isr)

    def _placed_partitions(self, image: MetadataImage, topic: Message) -> list[PartitionRegistration]:
        if topic.replication_factor < -1 or topic.replication_factor == 0:
            raise ControllerApiError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if topic.num_partitions < -1 or topic.num_partitions == 0:
            raise ControllerApiError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            )
        count = self.topic_defaults.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        factor = self.topic_defaults.replication_factor if topic.replication_factor == -1 else topic.replication_factor
        return self._place(image, count, factor)

    def _place(self, image: MetadataImage, count: int, factor: int) -> list[PartitionRegistration]:
        try:
            placed = StripedReplicaPlacer(usable_brokers(image.brokers), self.rng).place(count, factor)
        except PlacementError as exc:
            raise ControllerApiError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {factor} time(s): {exc.message}",
            ) from None
        out = []
        for replicas in placed:
            isr = [b for b in replicas if is_active(image.brokers, b)]
            if not isr:  # cannot happen with a leader chosen among unfenced brokers; as Kafka checks
                raise ControllerApiError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {factor} time(s): "
                    "All brokers are currently fenced or in controlled shutdown.",
                )
            out.append(self._new_partition(image, replicas, isr))
        return out

    @staticmethod
    def _new_partition(image: MetadataImage, replicas: Sequence[int], isr: Sequence[int]) -> PartitionRegistration:
        return PartitionRegistration(
            replicas=tuple(replicas),
            isr=tuple(isr),
            leader=isr[0],
            leader_epoch=0,
            partition_epoch=0,
            directories=tuple(default_directory(image.brokers, b) for b in replicas),
        )

    # -- CreatePartitions --------------------------------------------------------------------

    def create_partitions(
        self, image: MetadataImage, request: Message
    ) -> ControllerResult[list[CreatePartitionsTopicResult]]:
        """Grow topics; taken (and answered) in the order Kafka takes them (``limits.py``)."""
        counts = Counter(t.name for t in request.topics)
        results = [
            CreatePartitionsTopicResult(name, ApiError(ErrorCode.INVALID_REQUEST, DUPLICATE_TOPIC))
            for name, n in counts.items()
            if n > 1
        ]
        by_name = {t.name: t for t in request.topics}
        once = [name for name in java_hash_set_order(by_name) if counts[name] == 1]
        growths = [(len(t.partitions), by_name[name].count) for name in once if (t := image.topic(name)) is not None]
        if additional_partitions(growths) > MAX_RECORDS_PER_USER_OP:
            # Kafka 4.4 adds up the new partitions first: above the limit no topic grows.
            refused = ApiError(ErrorCode.POLICY_VIOLATION, ADDITIONAL_PARTITIONS_OVER_LIMIT)
            return ControllerResult.of([], results + [CreatePartitionsTopicResult(name, refused) for name in once])
        records: list[ApiMessageAndVersion] = []
        budget = RecordBudget()
        for name in java_hash_set_order(by_name):
            if counts[name] > 1:
                continue
            try:
                grown = self._grow(image, by_name[name], budget)
            except ControllerApiError as exc:
                results.append(CreatePartitionsTopicResult(name, exc.error))
                continue
            budget.take(len(grown))
            results.append(CreatePartitionsTopicResult(name, ApiError.NONE))
            records += grown
        return ControllerResult.of([] if request.validate_only else records, results)

    def _grow(self, image: MetadataImage, wanted: Message, budget: RecordBudget) -> list[ApiMessageAndVersion]:
        topic = image.topic(wanted.name)
        if topic is None:
            raise ControllerApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC)
        have = len(topic.partitions)
        if wanted.count == have:
            raise ControllerApiError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {have} partition(s).")
        if wanted.count < have:
            raise ControllerApiError(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {wanted.name} currently has {have} partition(s); {wanted.count} would not be an increase.",
            )
        additional = wanted.count - have
        if wanted.assignments is not None and len(wanted.assignments) != additional:
            raise ControllerApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {additional} additional partition(s), but only {len(wanted.assignments)} "
                "assignment(s) were specified.",
            )
        if not topic.partitions:
            raise ControllerApiError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Invalid state: topic {wanted.name} appears to have no partitions."
            )
        factor = len(next(iter(topic.partitions.values())).replicas)
        if budget.full or additional > budget.left:
            # Kafka's bounded record list overflows: an exception with no message. Checked
            # before placing anything, so that a count of 2**31 - 1 costs nothing.
            budget.full = True
            log.warning("CreatePartitions for %s refused: %s", wanted.name, BATCH_TOO_LARGE)
            raise ControllerApiError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
        if wanted.assignments is not None:
            partitions = [
                self._manual_partition(image, list(a.broker_ids), factor, have + i)
                for i, a in enumerate(wanted.assignments)
            ]
        else:
            partitions = self._place(image, additional, factor)
        return partition_records(partitions, topic.topic_id, have, image.metadata_version)

    # -- DeleteTopics ------------------------------------------------------------------------

    def delete_topics(
        self, image: MetadataImage, request: Message, version: int
    ) -> ControllerResult[list[DeletableTopicResult]]:
        """Delete topics by name (every version) or by id (v6+), as Kafka's ControllerApis sorts
        them out: a name or id given twice, both or neither given, a name naming a topic also
        given by id: INVALID_REQUEST; an unknown name UNKNOWN_TOPIC_OR_PARTITION, an unknown id
        UNKNOWN_TOPIC_ID. Answered in the request's order (a repeated entry answered once).
        With ``delete.topic.enable=false`` every entry is refused: TOPIC_DELETION_DISABLED, or
        INVALID_REQUEST before v3, which has no such code."""
        wanted: list[tuple[str | None, uuid.UUID]]
        if version >= 6:
            wanted = [(t.name, t.topic_id) for t in request.topics]
        else:
            wanted = [(name, ZERO_UUID) for name in request.topic_names]
        if not self.delete_topic_enable:
            if version < 3:
                disabled = ApiError(ErrorCode.INVALID_REQUEST, "Topic deletion is disabled.")
            else:
                disabled = ApiError(ErrorCode.TOPIC_DELETION_DISABLED)
            return ControllerResult.of([], [DeletableTopicResult(n, i, disabled) for n, i in wanted])
        names = Counter(n for n, i in wanted if n is not None and i == ZERO_UUID)
        ids = Counter(i for n, i in wanted if n is None and i != ZERO_UUID)
        by_id = {i for n, i in wanted if n is None and ids[i] == 1}
        named_ids = {t.topic_id for n in names if (t := image.topic(n)) is not None}
        results: list[DeletableTopicResult] = []
        doomed: list[uuid.UUID] = []
        answered: set[tuple[str | None, uuid.UUID]] = set()
        for name, topic_id in wanted:
            if (name, topic_id) in answered:
                continue
            answered.add((name, topic_id))
            error, deleted = self._delete_one(image, name, topic_id, names, ids, by_id, named_ids)
            if deleted is not None:
                doomed.append(deleted.topic_id)
                results.append(deleted)
            else:
                results.append(DeletableTopicResult(name, topic_id, error))
        records = [metadata_record(T.REMOVE_TOPIC_RECORD, topic_id=i) for i in doomed]
        return ControllerResult.of(records, results)

    @staticmethod
    def _delete_one(
        image: MetadataImage,
        name: str | None,
        topic_id: uuid.UUID,
        names: Counter[str],
        ids: Counter[uuid.UUID],
        by_id: set[uuid.UUID],
        named_ids: set[uuid.UUID],
    ) -> tuple[ApiError, DeletableTopicResult | None]:

        def invalid(message: str) -> tuple[ApiError, None]:
            return ApiError(ErrorCode.INVALID_REQUEST, message), None

        if name is None and topic_id == ZERO_UUID:
            return invalid("Neither topic name nor id were specified.")
        if name is not None and topic_id != ZERO_UUID:
            return invalid("You may not specify both topic name and topic id.")
        both = "The provided topic name maps to an ID that was already supplied."
        if name is None:
            if ids[topic_id] > 1:
                return invalid("Duplicate topic id.")
            if topic_id in named_ids:
                return invalid(both)
            by_id_topic = image.topics_by_id.get(topic_id)
            if by_id_topic is None:
                return ApiError(ErrorCode.UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_ID), None
            return ApiError.NONE, DeletableTopicResult(by_id_topic.name, topic_id, ApiError.NONE)
        if names[name] > 1:
            return invalid(DUPLICATE_TOPIC)
        by_name_topic = image.topic(name)
        if by_name_topic is None:
            return ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC), None
        if by_name_topic.topic_id in by_id:
            return invalid(both)
        return ApiError.NONE, DeletableTopicResult(name, by_name_topic.topic_id, ApiError.NONE)
