"""One partition's next registration: leader election, ISR and ELR, as a PartitionChangeRecord.

Kafka's ``PartitionChangeBuilder`` rules (4.4):

- The target ISR is given by the caller (the current ISR without a fenced or shutting-down
  broker, for instance). ``is_acceptable_leader`` says which brokers may lead (active ones).
- With ELR (KIP-966, feature ``eligible.leader.replicas.version`` >= 1): when the target ISR
  is below ``min_isr``, the members leaving it join the ELR (never a broker that shut down
  uncleanly); at or above ``min_isr`` the ELR and last-known ELR are cleared. The ISR may
  become empty; the last leader is remembered in ``last_known_elr`` when the partition loses
  its leader and has none remembered, and forgotten once a leader is elected.
- Without ELR an ISR is never written empty: the last member stays in it (RF=1: the fenced
  broker stays the ISR and the partition has no leader).
- Election (``ONLINE``): the current leader if still valid, else the first replica (in
  replica order) that is in the target ISR (or, with an empty ISR, in the ELR) and
  acceptable; else, with ELR and nothing else, the last known leader if acceptable (balanced
  recovery, an unclean election); else with ``UNCLEAN`` any acceptable replica (ISR forced to it, leader
  recovery state RECOVERING); else no leader (-1). ``PREFERRED`` tries the first replica first.
- A leader elected from the ELR becomes the whole ISR. Any leader change bumps the leader
  epoch (the record's leader field is then set); metadata versions before 3.6-IV0 also bump it
  when the ISR shrinks.
- A leader recovery state given (AlterPartition's) that differs from the partition's is written
  as given, after the election (a recovered leader reports RECOVERED).
- Reassignment (``target_replicas`` / ``target_adding`` / ``target_removing``, see
  ``reassignment.py``): a reassignment completes first, when the target ISR holds every replica
  that remains (the removed ones then leave the replicas and the ISR, before the election); a
  change whose replicas lose one that was there bumps the leader epoch. The replicas, adding and
  removing fields are written when they differ, and from 3.7-IV2 the directories of the target
  replicas (a replica's current one, else ``default_directory``'s).
- Nothing to change -> no record.

Set-valued fields come out in the order Kafka's ``HashSet`` iterates, so the bytes match.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from enum import Enum
from typing import Any

from kafkalike.controller.features import MV_3_2_IV0, MV_3_6_IV0, MV_3_7_IV2, MV_4_0_IV1
from kafkalike.controller.image import NO_LEADER, NO_LEADER_CHANGE, PartitionRegistration
from kafkalike.controller.reassignment import ReassignmentReplicas
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record

RECOVERING = 1  # LeaderRecoveryState.RECOVERING: the leader came from an unclean election
MIGRATING_DIRECTORY = uuid.UUID(int=0)  # Kafka's DirectoryId.MIGRATING


class Election(Enum):
    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


def partition_change_record_version(metadata_version: int) -> int:
    if metadata_version >= MV_4_0_IV1:
        return 2
    return 1 if metadata_version >= MV_3_7_IV2 else 0


def java_hash_set_order(values: Iterable[int], initial: int = 0) -> list[int]:
    """``values`` (duplicates dropped) in the order a Java ``HashSet<Integer>`` iterates them,
    the set built with room for ``initial`` elements and filled in this order."""
    members: list[int] = []
    for v in values:
        if v not in members:
            members.append(v)
    capacity = 16
    wanted = int(initial / 0.75) + 1 if initial else 16
    while capacity < wanted:
        capacity *= 2
    while len(members) > capacity * 0.75:
        capacity *= 2

    def bucket(v: int) -> int:
        h = v & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(members, key=lambda v: (bucket(v), members.index(v)))


class PartitionChange:
    """Builds the change for one partition; ``build()`` gives the record or None."""

    def __init__(
        self,
        partition: PartitionRegistration,
        topic_id: uuid.UUID,
        partition_id: int,
        is_acceptable_leader: Callable[[int], bool],
        *,
        metadata_version: int,
        min_isr: int,
        elr_enabled: bool = False,
        election: Election = Election.ONLINE,
        target_isr: Sequence[int] | None = None,
        unclean_shutdown_replicas: Sequence[int] = (),
        use_last_known_leader: bool = True,
        leader_recovery_state: int | None = None,
        target_replicas: Sequence[int] | None = None,
        target_adding: Sequence[int] | None = None,
        target_removing: Sequence[int] | None = None,
        default_directory: Callable[[int], uuid.UUID] | None = None,
    ) -> None:
        """``leader_recovery_state``: the one the partition's leader reports (AlterPartition);
        None keeps the partition's. The ``target_*`` replica lists: None keeps the partition's.
        ``default_directory``: the directory recorded for a replica new to the partition."""
        self.partition = partition
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.is_acceptable_leader = is_acceptable_leader
        self.metadata_version = metadata_version
        self.min_isr = min_isr
        self.elr_enabled = elr_enabled
        self.election = election
        self.target_isr = list(partition.isr if target_isr is None else target_isr)
        self.target_replicas = list(partition.replicas if target_replicas is None else target_replicas)
        self.target_adding = list(partition.adding_replicas if target_adding is None else target_adding)
        self.target_removing = list(partition.removing_replicas if target_removing is None else target_removing)
        self.default_directory = default_directory
        self.target_elr = list(partition.elr)
        self.target_last_known_elr = list(partition.last_known_elr)
        self.unclean_shutdown = list(unclean_shutdown_replicas)
        self.use_last_known_leader = use_last_known_leader
        self.target_leader_recovery_state = (
            partition.leader_recovery_state if leader_recovery_state is None else leader_recovery_state
        )
        self.unclean_election = False  # set by build(): the leader it elected came from outside the ISR

    # -- election

    def _valid_new_leader(self, replica: int) -> bool:
        in_isr = replica in self.target_isr or (not self.target_isr and replica in self.target_elr)
        return in_isr and self.is_acceptable_leader(replica)

    def _can_elect_last_known_leader(self) -> bool:
        if not self.elr_enabled or not self.use_last_known_leader:
            return False
        if self.target_elr or self.target_isr:
            return False
        # Kafka 4.0 elected it even when not acceptable; 4.1+ (the reference) does not.
        return len(self.partition.last_known_elr) == 1 and self.is_acceptable_leader(self.partition.last_known_elr[0])

    def elect(self) -> tuple[int, bool]:
        """(new leader, whether the election is unclean)."""
        p = self.partition
        if self.election == Election.PREFERRED and self._valid_new_leader(self.target_replicas[0]):
            return self.target_replicas[0], False
        if self._valid_new_leader(p.leader):
            return p.leader, False
        for r in self.target_replicas:
            if self._valid_new_leader(r):
                return r, False
        if self._can_elect_last_known_leader():
            return p.last_known_elr[0], True
        if self.election == Election.UNCLEAN:
            for r in self.target_replicas:
                if self.is_acceptable_leader(r):
                    return r, True
        return NO_LEADER, False

    def _try_election(self, record: dict[str, Any]) -> None:
        leader, unclean = self.elect()
        if leader == self.partition.leader:
            return
        if leader in self.target_elr:
            self.target_isr = [leader]
            self.target_elr = [r for r in self.target_elr if r != leader]
        record["leader"] = leader
        if unclean:
            self.unclean_election = True
            record["isr"] = [leader]
            if self.partition.leader_recovery_state != RECOVERING and self.metadata_version >= MV_3_2_IV0:
                record["leader_recovery_state"] = RECOVERING

    # -- ELR

    def _populate_target_elr(self) -> None:
        if not self.elr_enabled:
            return
        if len(self.target_isr) >= self.min_isr:
            self.target_elr, self.target_last_known_elr = [], []
            return
        # Kafka: candidates = HashSet(current ELR) + current ISR; minus target ISR and unclean ones.
        inserted = [*self.target_elr, *self.partition.isr]
        candidates = java_hash_set_order(inserted, initial=len(self.target_elr))
        widened = java_hash_set_order([*inserted, *self.target_last_known_elr], initial=len(self.target_elr))
        self.target_elr = [r for r in candidates if r not in self.target_isr and r not in self.unclean_shutdown]
        self.target_last_known_elr = [r for r in widened if r not in self.target_isr and r not in self.target_elr]

    def _update_record_elr(self, record: dict[str, Any]) -> None:
        clean = "isr" not in record
        if not clean or not self.elr_enabled:
            self.target_elr, self.target_last_known_elr = [], []
        if self.target_elr != list(self.partition.elr):
            record["eligible_leader_replicas"] = list(self.target_elr)
        if not self.use_last_known_leader and self.target_last_known_elr != list(self.partition.last_known_elr):
            record["last_known_elr"] = list(self.target_last_known_elr)

    def _update_last_known_leader(self, record: dict[str, Any]) -> None:
        if not self.use_last_known_leader or not self.elr_enabled:
            return
        p = self.partition
        leader = record.get("leader", NO_LEADER_CHANGE)
        # Kafka 4.1+: keyed on the leader being lost / elected (4.0 keyed on the ISR emptying).
        if leader == NO_LEADER and not p.last_known_elr:
            record["last_known_elr"] = [p.leader]
        elif leader >= 0 and p.last_known_elr:
            record["last_known_elr"] = []

    # -- the record

    def build(self) -> ApiMessageAndVersion | None:
        record: dict[str, Any] = {}
        self._complete_reassignment()
        self._populate_target_elr()
        self._try_election(record)
        self._bump_epoch_on_replica_removal(record)
        self._update_record_elr(record)
        if (
            "isr" not in record
            and (self.target_isr or self.elr_enabled)
            and self.target_isr != list(self.partition.isr)
        ):
            record["isr"] = list(self.target_isr)
        self._bump_epoch_on_isr_shrink(record)
        self._update_last_known_leader(record)
        self._set_assignment_changes(record)
        if self.target_leader_recovery_state != self.partition.leader_recovery_state:
            record["leader_recovery_state"] = self.target_leader_recovery_state
        if not record:
            return None
        return metadata_record(
            MetadataRecordType.PARTITION_CHANGE_RECORD,
            partition_change_record_version(self.metadata_version),
            topic_id=self.topic_id,
            partition_id=self.partition_id,
            **record,
        )

    def _bump_epoch_on_isr_shrink(self, record: dict[str, Any]) -> None:
        if self.metadata_version >= MV_3_6_IV0 or "leader" in record or "isr" not in record:
            return
        if not set(self.partition.isr) <= set(record["isr"]):
            record["leader"] = self.partition.leader

    # -- reassignment

    def _complete_reassignment(self) -> None:
        moving = ReassignmentReplicas(
            tuple(self.target_removing), tuple(self.target_adding), tuple(self.target_replicas)
        )
        completed = moving.completed(self.target_isr)
        if completed is not None:
            self.target_replicas, self.target_isr = completed
            self.target_removing, self.target_adding = [], []

    def _bump_epoch_on_replica_removal(self, record: dict[str, Any]) -> None:
        # A replica that leaves must not keep following under the epoch it knew.
        if "leader" not in record and not set(self.partition.replicas) <= set(self.target_replicas):
            record["leader"] = self.partition.leader

    def _set_assignment_changes(self, record: dict[str, Any]) -> None:
        p = self.partition
        if self.target_replicas:
            if self.metadata_version >= MV_3_7_IV2:
                current = dict(zip(p.replicas, _directories(p), strict=True))
                directories = [current[r] if r in current else self._default_directory(r) for r in self.target_replicas]
                if directories != _directories(p):
                    record["directories"] = directories
            if self.target_replicas != list(p.replicas):
                record["replicas"] = list(self.target_replicas)
        if self.target_removing != list(p.removing_replicas):
            record["removing_replicas"] = list(self.target_removing)
        if self.target_adding != list(p.adding_replicas):
            record["adding_replicas"] = list(self.target_adding)

    def _default_directory(self, replica: int) -> uuid.UUID:
        if self.default_directory is None:
            raise ValueError(f"no directory for replica {replica}, new to the partition")
        return self.default_directory(replica)


def _directories(p: PartitionRegistration) -> list[uuid.UUID]:
    """The partition's directories, one per replica: a registration from a record that had none
    (before 3.7-IV2) reads as all migrating, as Kafka's does."""
    if len(p.directories) == len(p.replicas):
        return list(p.directories)
    return [MIGRATING_DIRECTORY] * len(p.replicas)
