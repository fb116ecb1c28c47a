"""The partition side of broker changes: which partitions a fenced, unfenced, shutting-down or
unregistered broker touches, and the PartitionChangeRecord each gets (Kafka's
``ReplicationControlManager.generateLeaderAndIsrUpdates`` and its ``BrokersToIsrs`` /
``BrokersToElrs`` indexes).

Membership comes from the image the operation runs against; the order comes from the indexes,
kept up by ``replay`` (so a batch lists its partitions as Kafka's does; partitions the indexes do
not know yet come last). A leader must be active (registered, unfenced, not shutting down; or the
broker being unfenced) and have the partition's directory online (Kafka's LeaderAcceptor).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from kafkalike.controller.broker_partitions import BrokersToPartitions
from kafkalike.controller.image import (
    BROKER_RESOURCE,
    EMPTY,
    NO_LEADER,
    NO_LEADER_CHANGE,
    ConfigResource,
    MetadataImage,
    PartitionRegistration,
)
from kafkalike.controller.partition_change import Election, PartitionChange
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType

T = MetadataRecordType
log = logging.getLogger("kafkalike.controller")
ELR_FEATURE = "eligible.leader.replicas.version"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
MIGRATING_DIRECTORY, UNASSIGNED_DIRECTORY, LOST_DIRECTORY = (uuid.UUID(int=i) for i in range(3))

# (topic id, topic name, partition id, registration)
PartitionRef = tuple[uuid.UUID, str, int, PartitionRegistration]


def replica_directory(partition: PartitionRegistration, replica: int) -> uuid.UUID:
    """The directory a replica is assigned to; MIGRATING when the partition names none."""
    if len(partition.directories) == len(partition.replicas):
        return partition.directories[partition.replicas.index(replica)]
    return MIGRATING_DIRECTORY


def directory_online(directory: uuid.UUID, online: tuple[uuid.UUID, ...]) -> bool:
    """Kafka's DirectoryId.isOnline: unassigned and migrating count as online, lost never; a
    broker that registered no directories (before 3.7-IV2) has all of them online."""
    if directory in (MIGRATING_DIRECTORY, UNASSIGNED_DIRECTORY):
        return True
    return directory != LOST_DIRECTORY and (not online or directory in online)


def acceptable_leader(
    image: MetadataImage, partition: PartitionRegistration, replica: int, add: int = NO_LEADER
) -> bool:
    """Kafka's LeaderAcceptor: an active broker (``add`` counts as one although still fenced: it is
    being unfenced) with the partition's directory online."""
    b = image.brokers.get(replica)
    if b is None or (replica != add and (b.fenced or b.in_controlled_shutdown)):
        return False
    return directory_online(replica_directory(partition, replica), b.directories)


def elr_enabled(image: MetadataImage) -> bool:
    return image.features.get(ELR_FEATURE, 0) >= 1


class BrokerPartitionChanges:
    """Partition changes for broker events, and the indexes that order them."""

    def __init__(
        self,
        *,
        default_min_insync_replicas: int = 1,
        default_unclean_leader_election: bool = False,
        node_id: int | None = None,
    ) -> None:
        """``node_id``: the controller's own, whose broker-resource configs count before the
        cluster-wide defaults (Kafka's currentControllerConfig)."""
        self.node_id = node_id
        self.default_min_isr = default_min_insync_replicas
        self.default_unclean = default_unclean_leader_election
        self.isr_index = BrokersToPartitions(with_leaders=True)
        self.elr_index = BrokersToPartitions(with_leaders=False)
        self.unclean_elections = 0  # leaders this controller elected from outside the ISR
        self._replayed: dict[tuple[uuid.UUID, int], tuple[tuple[int, ...], int, tuple[int, ...]]] = {}
        # Kafka's imbalancedPartitions: partitions not led by their first replica (the preferred one).
        self._preferred: dict[tuple[uuid.UUID, int], int] = {}
        self.imbalanced: dict[tuple[uuid.UUID, int], None] = {}  # in the order they became so

    def replay(self, record: ApiMessageAndVersion) -> None:
        """Follow a replayed PartitionRecord, PartitionChangeRecord or RemoveTopicRecord."""
        if record.type == T.REMOVE_TOPIC_RECORD:
            for key in [k for k in self._replayed if k[0] == record.topic_id]:
                isr, _, elr = self._replayed.pop(key)
                self._preferred.pop(key, None)
                self.imbalanced.pop(key, None)
                for b in isr:
                    self.isr_index.remove_topic(record.topic_id, b)
                for b in elr:
                    self.elr_index.remove_topic(record.topic_id, b)
            self.isr_index.remove_topic(record.topic_id, NO_LEADER)
            return
        key = (record.topic_id, record.partition_id)
        before = self._replayed.get(key)
        if record.type == T.PARTITION_RECORD:
            after = (tuple(record.isr), record.leader, tuple(record.eligible_leader_replicas or ()))
        elif before is None:
            return  # a change to a partition this manager never saw: the image replay will refuse it
        else:
            after = (
                before[0] if record.isr is None else tuple(record.isr),
                before[1] if record.leader == NO_LEADER_CHANGE else record.leader,
                before[2] if record.eligible_leader_replicas is None else tuple(record.eligible_leader_replicas),
            )
        self._replayed[key] = after
        if record.replicas:  # a PartitionRecord; a PartitionChangeRecord moving replicas
            self._preferred[key] = record.replicas[0]
        if after[1] == self._preferred.get(key):
            self.imbalanced.pop(key, None)
        else:
            self.imbalanced.setdefault(key, None)
        tid, pid = key
        if before is None:
            self.isr_index.update(tid, pid, None, after[0], NO_LEADER, after[1])
            self.elr_index.update(tid, pid, None, after[2])
        else:
            self.isr_index.update(tid, pid, before[0], after[0], before[1], after[1])
            self.elr_index.update(tid, pid, before[2], after[2])

    @staticmethod
    def partitions(image: MetadataImage) -> Iterator[PartitionRef]:
        for topic in image.topics_by_id.values():
            for pid, p in sorted(topic.partitions.items()):
                yield topic.topic_id, topic.name, pid, p

    @staticmethod
    def _in_order(refs: list[PartitionRef], order: list[tuple[uuid.UUID, int]]) -> list[PartitionRef]:
        """``refs`` (the image's members) in the index's order; ones it does not know last."""
        rank = {key: i for i, key in enumerate(order)}
        return sorted(refs, key=lambda ref: rank.get((ref[0], ref[2]), len(rank)))

    def in_isr(self, image: MetadataImage, broker_id: int) -> list[PartitionRef]:
        refs = [ref for ref in self.partitions(image) if broker_id in ref[3].isr]
        return self._in_order(refs, self.isr_index.partitions(broker_id))

    def in_elr(self, image: MetadataImage, broker_id: int) -> list[PartitionRef]:
        refs = [ref for ref in self.partitions(image) if broker_id in ref[3].elr]
        return self._in_order(refs, self.elr_index.partitions(broker_id))

    def leaderless(self, image: MetadataImage) -> list[PartitionRef]:
        refs = [ref for ref in self.partitions(image) if ref[3].leader == NO_LEADER]
        return self._in_order(refs, self.isr_index.partitions(NO_LEADER, leaders_only=True))

    def has_leaderless(self) -> bool:
        """Whether some partition has no leader (from the index: no scan of the image)."""
        return bool(self.isr_index.partitions(NO_LEADER, leaders_only=True))

    def led_by(self, image: MetadataImage, broker_id: int) -> Iterator[PartitionRef]:
        return (ref for ref in self.partitions(image) if ref[3].leader == broker_id)

    def _topic_or_cluster_config(self, image: MetadataImage, topic: str, name: str) -> str | None:
        """A topic's value, else this controller node's dynamic one, else the cluster-wide dynamic
        default (the broker resource ""), as Kafka's ConfigurationControlManager.getTopicConfig
        looks them up before the static one."""
        configured = image.topic_configs(topic).get(name)
        if configured is None and self.node_id is not None:
            configured = image.configs.get(ConfigResource(BROKER_RESOURCE, str(self.node_id)), EMPTY).get(name)
        if configured is None:
            configured = image.configs.get(ConfigResource(BROKER_RESOURCE, ""), EMPTY).get(name)
        return configured

    def min_isr(self, image: MetadataImage, topic: str, partition: PartitionRegistration) -> int:
        """Kafka's getTopicEffectiveMinIsr: min.insync.replicas capped by the replication factor."""
        configured = self._topic_or_cluster_config(image, topic, MIN_INSYNC_REPLICAS)
        value = int(configured) if configured is not None else self.default_min_isr
        return min(value, len(partition.replicas))

    def unclean_enabled(self, image: MetadataImage, topic: str) -> bool:
        configured = self._topic_or_cluster_config(image, topic, UNCLEAN_LEADER_ELECTION)
        return self.default_unclean if configured is None else configured.lower() == "true"

    def change(
        self,
        image: MetadataImage,
        ref: PartitionRef,
        acceptable: Callable[[int], bool],
        election: Election,
        **options: Any,
    ) -> PartitionChange:
        """A PartitionChange of ``ref`` with the image's metadata version, the topic's effective
        min ISR and whether ELR is on (Kafka's PartitionChangeBuilder as the controller makes one)."""
        topic_id, name, pid, p = ref
        return PartitionChange(
            p,
            topic_id,
            pid,
            acceptable,
            metadata_version=image.metadata_version,
            min_isr=self.min_isr(image, name, p),
            elr_enabled=elr_enabled(image),
            election=election,
            **options,
        )

    def built(self, change: PartitionChange, name: str) -> ApiMessageAndVersion | None:
        """``change``'s record; an unclean election it made is logged and counted."""
        record = change.build()
        if record is not None and change.unclean_election:
            self.unclean_elections += 1
            log.warning(
                "unclean leader election for %s-%d: %d leads, chosen outside the ISR; records it lacks are lost",
                name,
                change.partition_id,
                record.leader,
            )
        return record

    def updates(
        self,
        image: MetadataImage,
        partitions: list[PartitionRef],
        records: list[ApiMessageAndVersion],
        *,
        remove: int = NO_LEADER,
        add: int = NO_LEADER,
        unclean: int = NO_LEADER,
    ) -> None:
        """Kafka's generateLeaderAndIsrUpdates: ``remove`` leaves the ISR and may not lead,
        ``add`` may lead although still fenced (it is being unfenced), ``unclean`` shut down
        uncleanly and leaves the ISR and ELR. A topic with unclean.leader.election.enable elects
        any acceptable replica when no ISR or ELR member can lead."""

        def acceptable(r: int, p: PartitionRegistration) -> bool:
            return r not in (remove, unclean) and acceptable_leader(image, p, r, add)

        for ref in partitions:
            p = ref[3]
            change = self.change(
                image,
                ref,
                lambda r, p=p: acceptable(r, p),  # type: ignore[misc]
                Election.UNCLEAN if self.unclean_enabled(image, ref[1]) else Election.ONLINE,
                target_isr=[r for r in p.isr if r not in (remove, unclean)],
                unclean_shutdown_replicas=[unclean] if unclean != NO_LEADER else (),
            )
            record = self.built(change, ref[1])
            if record is not None:
                records.append(record)
