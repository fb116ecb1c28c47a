"""Every partition this broker holds (Kafka's ``ReplicaManager``, without its waiting).

The replica manager owns the ``Partition`` objects: found by topic-partition or by topic id,
opened, closed and deleted here, and moved between roles by the controller's decisions
(``LocalReplicaChanges`` from ``MetadataDelta.local_changes``: become leader, become follower,
stop, delete). No trio here: the file work of opening and removing partitions is handed back
to the caller in pieces it can run on a worker thread:

    plan = replicas.plan_changes(changes, config_for)    # on the event loop: deletes, places reserved
    plan.open_logs(now_ms)                                # anywhere: directories and files
    applied = replicas.complete_changes(plan)             # on the event loop: registered, roles set
    delete_directories(applied.removed_paths)             # anywhere: deleted partitions' files

(``apply_changes`` runs them in a row, for in-memory logs and tests; ``server/replica_files.py``
runs them with the file work on worker threads.)
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkalike.controller.delta import LocalPartition, LocalReplicaChanges
from kafkalike.log.config import LogConfig
from kafkalike.log.manager import LogManager, NewPartition
from kafkalike.log.partition_log import PartitionLog
from kafkalike.replica.partition import (
    ALL_ELIGIBLE,
    DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    BrokerEligibility,
    LeaderAndIsr,
    Partition,
    TopicPartition,
)

log = logging.getLogger("kafkalike.replica")


@dataclass
class NewReplica:
    """A partition about to get its log (``LogManager.plan_new``'s place), and what it will be."""

    planned: NewPartition
    topic_id: uuid.UUID
    config: LogConfig
    state: LeaderAndIsr | None = None  # None: led here at epoch 0 (today's single-node topics)
    log: PartitionLog | None = None  # set by ``open_log``

    @property
    def tp(self) -> TopicPartition:
        return self.planned.tp

    def open_log(self, now_ms: int) -> None:
        """Create or recover the partition's directory and files; safe on a worker thread."""
        self.log = LogManager.open_new(self.planned, self.config, now_ms, self.topic_id)


def open_logs(new: list[NewReplica], now_ms: int) -> Exception | None:
    """``open_log`` for each in turn, on a worker thread; the error that stopped it, if one did
    (returned, so the logs opened before it can be released)."""
    for replica in new:
        try:
            replica.open_log(now_ms)
        except Exception as exc:
            return exc
    return None


def delete_directories(paths: Iterable[Path]) -> None:
    """Delete directories ``rename_for_removal`` renamed; safe on a worker thread (errors are
    ignored: start-up finishes ``*-delete`` names)."""
    for path in paths:
        LogManager.remove_directory(path)


def rename_for_removal(paths: Iterable[Path]) -> list[Path]:
    """Detached partition directories renamed to ``*-delete`` names (a name start-up finishes
    deleting, should a crash come first), for ``delete_directories``; safe on a worker thread.
    Once it returned, the names may be reused. A directory that cannot be renamed stays: no
    topic names it any more, so start-up removes it (and a new topic of the name refuses its
    files by topic id)."""
    renamed = []
    for path in paths:
        try:
            target = LogManager.rename_for_removal(path)
        except OSError as exc:
            log.error("deleted partition's directory %s not renamed: %s", path, exc)
            continue
        if target is not None:
            renamed.append(target)
    return renamed


@dataclass
class AppliedChanges:
    became_leader: list[Partition] = field(default_factory=list)  # a new leader epoch led here
    became_follower: list[Partition] = field(default_factory=list)  # a new leader (or epoch) to follow
    removed: list[TopicPartition] = field(default_factory=list)
    removed_paths: list[Path] = field(default_factory=list)  # renamed; for ``delete_directories``, off the loop


@dataclass
class ReplicaChangePlan:
    """``plan_changes``' result: the deletes already applied (``applied.removed``), the new
    partitions to open (``open_logs``), the roles still to take (``complete_changes``)."""

    changes: LocalReplicaChanges
    new: list[NewReplica]
    applied: AppliedChanges
    error: Exception | None = None
    renamed: bool = False

    def rename_removed(self) -> None:
        """The deleted partitions' directories renamed to ``*-delete`` names, so new partitions
        of the same names (a topic made again) get fresh ones; ``applied.removed_paths`` then
        name the renamed directories. Safe on a worker thread; once only."""
        if not self.renamed:
            self.applied.removed_paths = rename_for_removal(self.applied.removed_paths)
            self.renamed = True

    def open_logs(self, now_ms: int) -> None:
        """The file work before ``complete_changes`` (``rename_removed``, then the new
        partitions' logs); safe on a worker thread."""
        self.rename_removed()
        self.error = open_logs(self.new, now_ms)


class ReplicaManager(Mapping[TopicPartition, Partition]):
    """The partitions, as a read-only mapping by (topic, partition); changed only by its methods."""

    def __init__(
        self,
        logs: LogManager,
        local_broker_id: int,
        on_progress: Callable[[TopicPartition], None] = lambda tp: None,
        brokers: BrokerEligibility = ALL_ELIGIBLE,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    ) -> None:
        self.logs = logs
        self.local_broker_id = local_broker_id
        self._on_progress = on_progress
        self.brokers = brokers  # replaced by the server once it has the cluster's metadata
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._partitions: dict[TopicPartition, Partition] = {}
        self._by_id: dict[tuple[uuid.UUID, int], Partition] = {}
        # Partitions the metadata gives this broker whose logs could not be opened (Kafka's
        # HostedPartition.Offline): requests for them answer KAFKA_STORAGE_ERROR.
        self._offline: frozenset[TopicPartition] = frozenset()

    # -- lookups --------------------------------------------------------------------------------

    def __getitem__(self, tp: TopicPartition) -> Partition:
        return self._partitions[tp]

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._partitions)

    def __len__(self) -> int:
        return len(self._partitions)

    def get_by_id(self, topic_id: uuid.UUID, index: int) -> Partition | None:
        return self._by_id.get((topic_id, index))

    def is_offline(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is this broker's to host but its log could not be opened."""
        return tp in self._offline

    def set_offline(self, tps: Iterable[TopicPartition]) -> None:
        """The partitions whose logs could not be opened now (replacing the previous set)."""
        self._offline = frozenset(tp for tp in tps if tp not in self._partitions)

    # -- opening --------------------------------------------------------------------------------

    def open_now(self, topic: str, index: int, topic_id: uuid.UUID, config: LogConfig, now_ms: int) -> Partition:
        """The partition, its log opened (or recovered) here and now if it has none yet: at
        start-up and for internal topics, where the caller's thread may do the file work."""
        existing = self._partitions.get((topic, index))
        if existing is not None:
            return existing
        plog = self.logs.get_or_create(topic, index, config, now_ms, topic_id=topic_id)
        return self._register(topic, index, topic_id, plog)

    def plan_new(self, wanted: Iterable[tuple[str, int, uuid.UUID, LogConfig]]) -> list[NewReplica]:
        """Places for new partitions (topic, index, topic id, config), reserved in one pass; give
        them back with ``unplan`` unless they are adopted."""
        wanted = list(wanted)
        planned = self.logs.plan_new([(topic, index) for topic, index, _, _ in wanted])
        return [
            NewReplica(new, topic_id, config) for new, (_, _, topic_id, config) in zip(planned, wanted, strict=True)
        ]

    def adopt(self, new: NewReplica, now_ms: int) -> Partition:
        """Register a partition whose log ``open_log`` made (back on the owning thread)."""
        assert new.log is not None
        self.logs.adopt(new.planned, new.log)
        return self._register(new.tp[0], new.tp[1], new.topic_id, new.log, new.state, now_ms)

    def unplan(self, new: NewReplica) -> None:
        """Give back a place ``plan_new`` reserved: its log released, if one was opened (its
        directory, if made, is the caller's to remove)."""
        if new.log is not None and new.tp not in self._partitions:
            new.log.release()
            new.log = None
        self.logs.unplan(new.planned)

    def _register(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID,
        plog: PartitionLog,
        state: LeaderAndIsr | None = None,
        now_ms: int = 0,
    ) -> Partition:
        """A partition over ``plog``, in the controller's ``state`` from the start (a follower
        must not first lead alone, which would move its high watermark to its log end)."""
        partition = Partition(
            topic,
            index,
            topic_id,
            plog,
            local_broker_id=self.local_broker_id,
            on_progress=self._on_progress,
            brokers=self.brokers,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            state=state,
            now_ms=now_ms,
        )
        self._partitions[partition.tp] = partition
        self._by_id[(topic_id, index)] = partition
        if state is not None:
            partition.notify_progress()  # its role is known now it can be found
        return partition

    # -- closing and deleting -------------------------------------------------------------------

    def detach(self, topic: str, index: int) -> Path | None:
        """Stop holding the partition: forgotten (its waiters told), its log closed; returns its
        directory for ``rename_for_removal`` and ``delete_directories`` (None when nothing is on disk)."""
        partition = self._partitions.pop((topic, index), None)
        if partition is not None:
            self._by_id.pop((partition.topic_id, index), None)
            partition.notify_progress()
        return self.logs.detach_partition(topic, index)

    def hosted(self) -> set[TopicPartition]:
        return set(self._partitions)

    # -- configs --------------------------------------------------------------------

    def apply_configs(self, config_for: Callable[[str], LogConfig | None]) -> None:
        """Each partition's log takes its topic's current config (None: the topic is unknown)."""
        for partition in self._partitions.values():
            config = config_for(partition.topic)
            if config is not None:
                partition.log.config = config

    # -- the controller's decisions -------------------------------------------------------------

    def plan_changes(self, changes: LocalReplicaChanges, config_for: Callable[[str], LogConfig]) -> ReplicaChangePlan:
        """The partitions ``changes`` no longer wants here detached at once, as Kafka stops them
        before anything else (their directories in ``applied.removed_paths``: ``open_logs``
        renames them, the caller deletes them); then places reserved for the ones it asks this
        broker to hold that have no log yet (see the module docstring for the steps that
        follow). A topic deleted and made again under one name in one delta is thus replaced,
        not mistaken for the old one."""
        applied = AppliedChanges()
        for key in changes.deletes:
            existing = self._by_id.get(key)
            if existing is None:
                continue
            path = self.detach(existing.topic, existing.index)
            applied.removed.append(existing.tp)
            if path is not None:
                applied.removed_paths.append(path)
        wanted: list[tuple[str, int, uuid.UUID, LogConfig]] = []
        states: list[LeaderAndIsr] = []
        for local in [*changes.leaders.values(), *changes.followers.values()]:
            if (local.topic_id, local.partition_id) in self._by_id:
                continue
            wanted.append((local.topic_name, local.partition_id, local.topic_id, config_for(local.topic_name)))
            states.append(_leader_and_isr(local))
        new = self.plan_new(wanted)
        for replica, state in zip(new, states, strict=True):
            replica.state = state
        return ReplicaChangePlan(changes, new, applied)

    def complete_changes(self, plan: ReplicaChangePlan, now_ms: int) -> AppliedChanges:
        """New partitions registered and roles taken, on the owning thread; with the deletes
        ``plan_changes`` made, what changed. If opening a new partition failed, no new partition
        and no role is applied, every place given back, and the error raised (the caller removes
        the new directories and deletes ``plan.applied.removed_paths``, and tries again)."""
        if plan.error is not None or any(r.log is None for r in plan.new):
            for replica in plan.new:
                self.unplan(replica)
            raise plan.error or RuntimeError("plan_changes' logs were not opened")
        applied = plan.applied
        new = {replica.tp for replica in plan.new}
        for replica in plan.new:
            partition = self.adopt(replica, now_ms)
            (applied.became_leader if partition.is_leader else applied.became_follower).append(partition)
        for local in plan.changes.leaders.values():
            partition = self._partitions[(local.topic_name, local.partition_id)]
            if partition.tp not in new and partition.make_leader(_leader_and_isr(local), now_ms=now_ms):
                applied.became_leader.append(partition)
        for local in plan.changes.followers.values():
            partition = self._partitions[(local.topic_name, local.partition_id)]
            if partition.tp not in new and partition.make_follower(_leader_and_isr(local), now_ms=now_ms):
                applied.became_follower.append(partition)
        return applied

    def apply_changes(
        self, changes: LocalReplicaChanges, config_for: Callable[[str], LogConfig], now_ms: int
    ) -> AppliedChanges:
        """Every step here and now, the removed directories deleted too (in-memory logs, tests)."""
        plan = self.plan_changes(changes, config_for)
        plan.open_logs(now_ms)
        applied = self.complete_changes(plan, now_ms)
        delete_directories(applied.removed_paths)
        return applied


def _leader_and_isr(local: LocalPartition) -> LeaderAndIsr:
    reg = local.registration
    return LeaderAndIsr(
        reg.leader, reg.leader_epoch, reg.partition_epoch, reg.replicas, reg.isr, reg.leader_recovery_state
    )
