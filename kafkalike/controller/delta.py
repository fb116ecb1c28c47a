"""Deltas: committed records replayed on top of an image, giving the next image.

Kafka's ``MetadataDelta``: a delta starts from an image, ``replay``s committed records one by one,
and ``apply`` returns the next image, which shares every unchanged part with the old one. Every
node (active controller, standby, broker) moves its image through this same ``replay`` path, so
they all see the same cluster. A delta also tells one broker what it now leads, follows and no
longer hosts (``local_changes``), and what the controller returns for an operation is a
``ControllerResult``: its records (applied only once committed) and its reply.

Replay follows Kafka's rules (``ClusterDelta``, ``TopicsDelta``, ``PartitionRegistration.merge``...):

- RegisterBroker replaces a broker's registration; UnregisterBroker removes it. Fence, Unfence and
  BrokerRegistrationChange name the broker's epoch, and a record for another epoch (or an unknown
  broker) is an error: the log is not the one this image came from.
- A PartitionChange always bumps the partition epoch. Its leader field is -2 for "unchanged", -1
  for "no leader now", else the new leader; any leader other than -2 bumps the leader epoch. Null
  lists (ISR, replicas, ...) and leader recovery state -1 mean "unchanged".
- RemoveTopic removes the topic, its partitions and its configs.
- A ConfigRecord with a null value removes that config; a resource left with none disappears.
- FeatureLevel for ``metadata.version`` sets the metadata version; for other features level 0
  removes the feature.
- Records of types this project does not model (ACLs, quotas, SCRAM...) are skipped here; the
  metadata transaction records (KIP-868) are handled by whoever reads batches (a transaction's
  records are replayed only once its EndTransaction is committed).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from kafkalike.controller.image import (
    EMPTY,
    METADATA_VERSION_FEATURE,
    TOPIC_RESOURCE,
    BrokerRegistration,
    ConfigResource,
    MetadataImage,
    MetadataProvenance,
    PartitionRegistration,
    TopicImage,
    frozen,
)
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType

T = MetadataRecordType
_R = TypeVar("_R")


class MetadataReplayError(ValueError):
    """A record that cannot follow the image it is replayed onto (unknown broker, wrong epoch...)."""


@dataclass(frozen=True, slots=True)
class LocalPartition:
    """A partition as this broker's replica manager needs it: names for the log, the registration."""

    topic_name: str
    topic_id: uuid.UUID
    partition_id: int
    registration: PartitionRegistration


PartitionKey = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class LocalReplicaChanges:
    """What a delta asks of one broker (Kafka's LocalReplicaChanges), by (topic id, partition).

    ``deletes``: partitions it no longer hosts, as they were (their topic deleted or the broker
    removed from the replicas). ``leaders``: partitions it leads whose partition epoch moved (new,
    or ISR/replicas changed); ``elected_leaders`` the subset whose leader epoch moved (it has just
    become leader). ``followers``: partitions it replicates but does not lead, whose partition
    epoch moved (new, demoted, or without a leader).
    """

    deletes: Mapping[PartitionKey, LocalPartition]
    leaders: Mapping[PartitionKey, LocalPartition]
    elected_leaders: Mapping[PartitionKey, LocalPartition]
    followers: Mapping[PartitionKey, LocalPartition]

    def __bool__(self) -> bool:
        return bool(self.deletes or self.leaders or self.followers)

    def roles(self) -> LocalReplicaChanges:
        """The same without the deletes (what remains to do once they are done)."""
        return LocalReplicaChanges(EMPTY, self.leaders, self.elected_leaders, self.followers)

    def then(self, later: LocalReplicaChanges) -> LocalReplicaChanges:
        """These changes, not yet taken, followed by ``later``: one set of changes that leaves the
        broker where taking both in turn would. A partition ``later`` names takes its state from
        ``later``; one elected by either is elected if it is still led here."""
        touched = later.deletes.keys() | later.leaders.keys() | later.followers.keys()
        leaders = {k: v for k, v in self.leaders.items() if k not in touched} | dict(later.leaders)
        followers = {k: v for k, v in self.followers.items() if k not in touched} | dict(later.followers)
        elected = {k: leaders[k] for k in self.elected_leaders.keys() | later.elected_leaders.keys() if k in leaders}
        deletes = {k: v for k, v in self.deletes.items() if k not in touched} | dict(later.deletes)
        return LocalReplicaChanges(frozen(deletes), frozen(leaders), frozen(elected), frozen(followers))


NO_LOCAL_CHANGES = LocalReplicaChanges(EMPTY, EMPTY, EMPTY, EMPTY)


# -- deltas -----------------------------------------------------------------------------------------


@dataclass
class _TopicChange:
    """A topic touched by the delta: its (possibly new) identity and its changed partitions."""

    name: str
    topic_id: uuid.UUID
    base: Mapping[int, PartitionRegistration]  # the partitions it had (empty when created in this delta)
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)
    created: bool = False


class MetadataDelta:
    """Records replayed on top of an image; ``apply`` gives the image after them.

    Besides the next image, a delta tells what changed (for the replica manager: which partitions
    to lead, follow or delete): ``changed_partitions``, ``created_topic_ids``, ``deleted_topics``,
    ``changed_brokers``.
    """

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._metadata_version: int | None = None
        self._features: dict[str, int | None] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics: dict[uuid.UUID, _TopicChange] = {}
        self._deleted: dict[uuid.UUID, TopicImage] = {}
        self._configs: dict[ConfigResource, dict[str, str | None]] = {}
        self._next_producer_id: int | None = None
        self._handlers: dict[MetadataRecordType, Callable[[ApiMessageAndVersion], None]] = {
            T.FEATURE_LEVEL_RECORD: self._feature_level,
            T.REGISTER_BROKER_RECORD: self._register_broker,
            T.UNREGISTER_BROKER_RECORD: self._unregister_broker,
            T.FENCE_BROKER_RECORD: self._fence_broker,
            T.UNFENCE_BROKER_RECORD: self._unfence_broker,
            T.BROKER_REGISTRATION_CHANGE_RECORD: self._broker_registration_change,
            T.TOPIC_RECORD: self._topic,
            T.PARTITION_RECORD: self._partition,
            T.PARTITION_CHANGE_RECORD: self._partition_change,
            T.REMOVE_TOPIC_RECORD: self._remove_topic,
            T.CONFIG_RECORD: self._config,
            T.PRODUCER_IDS_RECORD: self._producer_ids,
        }

    def replay(self, record: ApiMessageAndVersion) -> None:
        """Take one committed record into the delta (records of unmodelled types are skipped)."""
        handler = self._handlers.get(record.type)
        if handler is not None:
            handler(record)

    def replay_all(self, records: Iterable[ApiMessageAndVersion]) -> MetadataDelta:
        for r in records:
            self.replay(r)
        return self

    # -- features and producer ids

    def _feature_level(self, r: ApiMessageAndVersion) -> None:
        if r.name == METADATA_VERSION_FEATURE:
            self._metadata_version = r.feature_level
        else:
            self._features[r.name] = r.feature_level or None

    def _producer_ids(self, r: ApiMessageAndVersion) -> None:
        self._next_producer_id = r.next_producer_id

    # -- brokers

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        """The broker's registration as of the records replayed so far."""
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.image.brokers.get(broker_id)

    def _broker_of_epoch(self, broker_id: int, epoch: int, action: str) -> BrokerRegistration:
        broker = self.broker(broker_id)
        if broker is None:
            raise MetadataReplayError(f"tried to {action} broker {broker_id}, but that broker was not registered")
        if broker.epoch != epoch:
            raise MetadataReplayError(
                f"tried to {action} broker {broker_id}, but the given epoch, {epoch}, "
                f"did not match the current broker epoch, {broker.epoch}"
            )
        return broker

    def _register_broker(self, r: ApiMessageAndVersion) -> None:
        self._brokers[r.broker_id] = BrokerRegistration.from_record(r)

    def _unregister_broker(self, r: ApiMessageAndVersion) -> None:
        self._brokers[r.broker_id] = None

    def _fence_broker(self, r: ApiMessageAndVersion) -> None:
        self._brokers[r.id] = replace(self._broker_of_epoch(r.id, r.epoch, "fence"), fenced=True)

    def _unfence_broker(self, r: ApiMessageAndVersion) -> None:
        self._brokers[r.id] = replace(self._broker_of_epoch(r.id, r.epoch, "unfence"), fenced=False)

    def _broker_registration_change(self, r: ApiMessageAndVersion) -> None:
        broker = self._broker_of_epoch(r.broker_id, r.broker_epoch, "change")
        fencing = {-1: False, 0: broker.fenced, 1: True}.get(r.fenced)
        shutdown = {0: broker.in_controlled_shutdown, 1: True}.get(r.in_controlled_shutdown)
        if fencing is None or shutdown is None:
            raise MetadataReplayError(
                f"broker registration change with unknown fenced {r.fenced} or "
                f"in_controlled_shutdown {r.in_controlled_shutdown}"
            )
        directories = tuple(r.log_dirs) or broker.directories
        cordoned = broker.cordoned_directories if r.cordoned_log_dirs is None else tuple(r.cordoned_log_dirs)
        changed = replace(
            broker,
            fenced=fencing,
            in_controlled_shutdown=shutdown,
            directories=directories,
            cordoned_directories=cordoned,
        )
        if changed != broker:
            self._brokers[r.broker_id] = changed

    # -- topics and partitions

    def _topic_change(self, topic_id: uuid.UUID) -> _TopicChange:
        change = self._topics.get(topic_id)
        if change is None:
            topic = self.image.topics_by_id.get(topic_id)
            if topic is None:
                raise MetadataReplayError(f"no topic with id {topic_id}")
            change = self._topics[topic_id] = _TopicChange(topic.name, topic_id, topic.partitions)
        return change

    def _topic(self, r: ApiMessageAndVersion) -> None:
        self._topics[r.topic_id] = _TopicChange(r.name, r.topic_id, EMPTY, created=True)

    def _partition(self, r: ApiMessageAndVersion) -> None:
        self._topic_change(r.topic_id).partitions[r.partition_id] = PartitionRegistration.from_record(r)

    def _partition_change(self, r: ApiMessageAndVersion) -> None:
        change = self._topic_change(r.topic_id)
        current = change.partitions.get(r.partition_id) or change.base.get(r.partition_id)
        if current is None:
            raise MetadataReplayError(f"no partition {r.topic_id}:{r.partition_id}")
        change.partitions[r.partition_id] = current.merge(r)

    def _remove_topic(self, r: ApiMessageAndVersion) -> None:
        change = self._topics.pop(r.topic_id, None)
        existing = self.image.topics_by_id.get(r.topic_id)
        if change is None and existing is None:
            raise MetadataReplayError(f"unable to delete topic with id {r.topic_id}: no such topic found")
        name = change.name if change is not None else existing.name  # type: ignore[union-attr]
        if existing is not None:
            self._deleted[r.topic_id] = existing
        resource = ConfigResource(TOPIC_RESOURCE, name)
        self._configs[resource] = dict.fromkeys(self.image.configs.get(resource, EMPTY))

    # -- configs

    def _config(self, r: ApiMessageAndVersion) -> None:
        self._configs.setdefault(ConfigResource(r.resource_type, r.resource_name), {})[r.name] = r.value

    # -- what changed, and the next image

    @property
    def created_topic_ids(self) -> set[uuid.UUID]:
        return {i for i, c in self._topics.items() if c.created}

    @property
    def deleted_topics(self) -> Mapping[uuid.UUID, TopicImage]:
        """Topics of the old image that this delta deletes, as they were."""
        return frozen(dict(self._deleted))

    @property
    def changed_partitions(self) -> dict[tuple[uuid.UUID, int], PartitionRegistration]:
        """Every partition created or changed by this delta, as it is now, by (topic id, partition)."""
        return {(i, p): reg for i, c in self._topics.items() for p, reg in c.partitions.items()}

    @property
    def changed_brokers(self) -> dict[int, BrokerRegistration | None]:
        """Brokers registered, changed (or None: unregistered) by this delta."""
        return dict(self._brokers)

    def local_changes(self, broker_id: int) -> LocalReplicaChanges:
        """What this delta means for the replicas of ``broker_id`` (Kafka's TopicsDelta.localChanges)."""
        deletes: dict[PartitionKey, LocalPartition] = {}
        leaders: dict[PartitionKey, LocalPartition] = {}
        elected: dict[PartitionKey, LocalPartition] = {}
        followers: dict[PartitionKey, LocalPartition] = {}
        for topic_id, change in self._topics.items():
            for p, reg in change.partitions.items():
                key = (topic_id, p)
                before = change.base.get(p)
                if broker_id not in reg.replicas:
                    if before is not None and broker_id in before.replicas:
                        deletes[key] = LocalPartition(change.name, topic_id, p, before)
                    continue
                if before is not None and before.partition_epoch == reg.partition_epoch:
                    continue
                local = LocalPartition(change.name, topic_id, p, reg)
                if reg.leader == broker_id:
                    leaders[key] = local
                    if before is None or before.leader_epoch != reg.leader_epoch:
                        elected[key] = local
                else:
                    followers[key] = local
        for topic_id, topic in self._deleted.items():
            for p, reg in topic.partitions.items():
                if broker_id in reg.replicas:
                    deletes[(topic_id, p)] = LocalPartition(topic.name, topic_id, p, reg)
        return LocalReplicaChanges(frozen(deletes), frozen(leaders), frozen(elected), frozen(followers))

    def apply(self, provenance: MetadataProvenance | None = None) -> MetadataImage:
        """The image after every record replayed so far; the delta's image is left as it was."""
        old = self.image
        return MetadataImage(
            provenance=old.provenance if provenance is None else provenance,
            metadata_version=old.metadata_version if self._metadata_version is None else self._metadata_version,
            features=_merged(old.features, self._features),
            brokers=_merged(old.brokers, self._brokers),
            configs=self._apply_configs(),
            next_producer_id=old.next_producer_id if self._next_producer_id is None else self._next_producer_id,
            **self._apply_topics(),
        )

    def _apply_topics(self) -> dict[str, Mapping[Any, TopicImage]]:
        old = self.image
        if not self._topics and not self._deleted:
            return {"topics_by_id": old.topics_by_id, "topics_by_name": old.topics_by_name}
        by_id = {i: t for i, t in old.topics_by_id.items() if i not in self._deleted}
        for topic_id, change in self._topics.items():
            by_id[topic_id] = TopicImage(change.name, topic_id, _merged(change.base, change.partitions))
        by_name = {t.name: t for t in by_id.values()}
        return {"topics_by_id": frozen(by_id), "topics_by_name": frozen(by_name)}

    def _apply_configs(self) -> Mapping[ConfigResource, Mapping[str, str]]:
        if not self._configs:
            return self.image.configs
        configs = dict(self.image.configs)
        for resource, changes in self._configs.items():
            merged = _merged(configs.get(resource, EMPTY), changes)
            if merged:
                configs[resource] = merged
            else:
                configs.pop(resource, None)
        return frozen(configs)


def _merged(base: Mapping[Any, Any], changes: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """``base`` with ``changes`` laid over it, a None change removing the key; ``base`` if no change."""
    if not changes:
        return base
    out = dict(base)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return frozen(out)


def replay_records(image: MetadataImage, records: Iterable[ApiMessageAndVersion]) -> MetadataImage:
    """The image after ``records`` (one delta)."""
    return MetadataDelta(image).replay_all(records).apply()


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[_R]):
    """What a controller operation produces: the records to append (applied only once committed)
    and the reply to send once they are."""

    records: tuple[ApiMessageAndVersion, ...]
    reply: _R

    @classmethod
    def of(cls, records: Iterable[ApiMessageAndVersion], reply: _R) -> ControllerResult[_R]:
        return cls(tuple(records), reply)
