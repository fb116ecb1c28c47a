"""The cluster metadata image: the whole cluster at one offset of the metadata log.

Kafka's ``MetadataImage`` in the same shape: features (metadata.version and the others), the
cluster (brokers with their epochs, listeners, rack, fenced), topics by id and by name (partitions
with replicas, ISR, leader, leader and partition epochs), configs by resource, and the next
producer id block. An image is immutable (frozen dataclasses, tuples, read-only mappings): it is
never changed in place; ``kafkalike.controller.delta`` makes the next one, sharing every unchanged
part. ``records()`` gives the records that rebuild an image, for a snapshot.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record

T = MetadataRecordType
METADATA_VERSION_FEATURE = "metadata.version"
NO_LEADER = -1
NO_LEADER_CHANGE = -2
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


def register_broker_record_version(metadata_version: int) -> int:
    """The RegisterBrokerRecord version Kafka writes at a metadata.version (its levels: 4.3-IV0
    30, 3.7-IV2 17, 3.4-IV0 8, 3.3-IV3 7; the controller's features module names them)."""
    if metadata_version >= 30:  # cordoned log directories
        return 4
    if metadata_version >= 17:  # log directories
        return 3
    if metadata_version >= 8:
        return 2
    return 1 if metadata_version >= 7 else 0


def frozen(d: dict[Any, Any]) -> Mapping[Any, Any]:
    """A read-only view of ``d``, which its caller no longer touches."""
    return MappingProxyType(d)


EMPTY: Mapping[Any, Any] = MappingProxyType({})


# -- the parts of an image ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class FeatureRange:
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker as the controller sees it (Kafka's BrokerRegistration)."""

    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    listeners: tuple[Endpoint, ...] = ()
    supported_features: Mapping[str, FeatureRange] = field(default_factory=lambda: EMPTY)
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    is_migrating_zk_broker: bool = False
    directories: tuple[uuid.UUID, ...] = ()
    # None until the broker first reports its cordoned directories (Kafka 4.3+ heartbeats).
    cordoned_directories: tuple[uuid.UUID, ...] | None = None

    @classmethod
    def from_record(cls, r: ApiMessageAndVersion) -> BrokerRegistration:
        return cls(
            broker_id=r.broker_id,
            epoch=r.broker_epoch,
            incarnation_id=r.incarnation_id,
            listeners=tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in r.end_points),
            supported_features=frozen(
                {f.name: FeatureRange(f.min_supported_version, f.max_supported_version) for f in r.features}
            ),
            rack=r.rack,
            fenced=r.fenced,
            in_controlled_shutdown=r.in_controlled_shutdown,
            is_migrating_zk_broker=r.is_migrating_zk_broker,
            directories=tuple(r.log_dirs),
            cordoned_directories=None if r.cordoned_log_dirs is None else tuple(r.cordoned_log_dirs),
        )

    def to_record(self, version: int | None = None) -> ApiMessageAndVersion:
        fields: dict[str, Any] = {}
        if self.cordoned_directories is not None:
            fields["cordoned_log_dirs"] = list(self.cordoned_directories)
        if version is not None and version < 4 and fields:
            raise ValueError(f"RegisterBrokerRecord v{version} cannot hold cordoned log directories")
        return metadata_record(
            T.REGISTER_BROKER_RECORD,
            version,
            broker_id=self.broker_id,
            broker_epoch=self.epoch,
            incarnation_id=self.incarnation_id,
            end_points=[
                {"name": e.name, "host": e.host, "port": e.port, "security_protocol": e.security_protocol}
                for e in self.listeners
            ],
            features=[
                {"name": n, "min_supported_version": f.min_version, "max_supported_version": f.max_version}
                for n, f in self.supported_features.items()
            ],
            rack=self.rack,
            fenced=self.fenced,
            in_controlled_shutdown=self.in_controlled_shutdown,
            is_migrating_zk_broker=self.is_migrating_zk_broker,
            log_dirs=list(self.directories),
            **fields,
        )


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition's replicas, ISR, leader and epochs (Kafka's PartitionRegistration)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0  # 1 while recovering from an unclean election
    directories: tuple[uuid.UUID, ...] = ()
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @classmethod
    def from_record(cls, r: ApiMessageAndVersion) -> PartitionRegistration:
        return cls(
            replicas=tuple(r.replicas),
            isr=tuple(r.isr),
            leader=r.leader,
            leader_epoch=r.leader_epoch,
            partition_epoch=r.partition_epoch,
            removing_replicas=tuple(r.removing_replicas),
            adding_replicas=tuple(r.adding_replicas),
            leader_recovery_state=r.leader_recovery_state,
            directories=tuple(r.directories),
            elr=tuple(r.eligible_leader_replicas or ()),
            last_known_elr=tuple(r.last_known_elr or ()),
        )

    def merge(self, change: ApiMessageAndVersion) -> PartitionRegistration:
        """This partition after a PartitionChangeRecord (Kafka's PartitionRegistration.merge)."""

        def pick(value: list[Any] | None, current: tuple[Any, ...]) -> tuple[Any, ...]:
            return current if value is None else tuple(value)

        leader, leader_epoch = self.leader, self.leader_epoch
        if change.leader != NO_LEADER_CHANGE:
            leader, leader_epoch = change.leader, self.leader_epoch + 1
        recovery = self.leader_recovery_state if change.leader_recovery_state == -1 else change.leader_recovery_state
        return PartitionRegistration(
            replicas=pick(change.replicas, self.replicas),
            isr=pick(change.isr, self.isr),
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            removing_replicas=pick(change.removing_replicas, self.removing_replicas),
            adding_replicas=pick(change.adding_replicas, self.adding_replicas),
            leader_recovery_state=recovery,
            directories=pick(change.directories, self.directories),
            elr=pick(change.eligible_leader_replicas, self.elr),
            last_known_elr=pick(change.last_known_elr, self.last_known_elr),
        )

    def to_record(self, topic_id: uuid.UUID, partition_id: int) -> ApiMessageAndVersion:
        return metadata_record(
            T.PARTITION_RECORD,
            partition_id=partition_id,
            topic_id=topic_id,
            replicas=list(self.replicas),
            isr=list(self.isr),
            removing_replicas=list(self.removing_replicas),
            adding_replicas=list(self.adding_replicas),
            leader=self.leader,
            leader_recovery_state=self.leader_recovery_state,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            directories=list(self.directories),
            # Tagged: written only when there is something, as Kafka does.
            eligible_leader_replicas=list(self.elr) or None,
            last_known_elr=list(self.last_known_elr) or None,
        )


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=lambda: EMPTY)


class ConfigResource(NamedTuple):
    """A config's owner: resource type 2 (topic) or 4 (broker; name "" is the cluster default)."""

    type: int
    name: str


@dataclass(frozen=True, slots=True)
class MetadataProvenance:
    """Where an image came from: the last offset and epoch it contains and that record's append time."""

    last_offset: int = -1
    last_epoch: int = -1
    last_append_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The whole cluster metadata at one offset of the log. Never mutated: deltas make new images."""

    provenance: MetadataProvenance = MetadataProvenance()
    metadata_version: int = 0  # the metadata.version feature level; 0 before any is finalized
    features: Mapping[str, int] = field(default_factory=lambda: EMPTY)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: EMPTY)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: EMPTY)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: EMPTY)
    configs: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=lambda: EMPTY)
    next_producer_id: int = -1  # -1 until a block of producer ids was handed out

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def partition(self, topic_id: uuid.UUID, partition_id: int) -> PartitionRegistration | None:
        topic = self.topics_by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def topic_configs(self, name: str) -> Mapping[str, str]:
        return self.configs.get(ConfigResource(TOPIC_RESOURCE, name), EMPTY)

    def unfenced_brokers(self) -> list[BrokerRegistration]:
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def records(self) -> list[ApiMessageAndVersion]:
        """The records that rebuild this image from nothing, in Kafka's snapshot order (features
        first, so that metadata.version leads; then brokers, topics, configs, producer ids)."""
        out: list[ApiMessageAndVersion] = []
        if self.metadata_version:
            out.append(
                metadata_record(
                    T.FEATURE_LEVEL_RECORD, name=METADATA_VERSION_FEATURE, feature_level=self.metadata_version
                )
            )
        out += [
            metadata_record(T.FEATURE_LEVEL_RECORD, name=n, feature_level=v) for n, v in sorted(self.features.items())
        ]
        version = register_broker_record_version(self.metadata_version) if self.metadata_version else None
        out += [b.to_record(version) for _, b in sorted(self.brokers.items())]
        for topic in sorted(self.topics_by_id.values(), key=lambda t: t.name):
            out.append(metadata_record(T.TOPIC_RECORD, name=topic.name, topic_id=topic.topic_id))
            out += [p.to_record(topic.topic_id, i) for i, p in sorted(topic.partitions.items())]
        for resource, values in sorted(self.configs.items()):
            out += [
                metadata_record(
                    T.CONFIG_RECORD, resource_type=resource.type, resource_name=resource.name, name=k, value=v
                )
                for k, v in sorted(values.items())
            ]
        if self.next_producer_id >= 0:
            out.append(
                metadata_record(
                    T.PRODUCER_IDS_RECORD, broker_id=-1, broker_epoch=-1, next_producer_id=self.next_producer_id
                )
            )
        return out


EMPTY_IMAGE = MetadataImage()
