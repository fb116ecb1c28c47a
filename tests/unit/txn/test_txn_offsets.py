"""Transactional offset commits in the group coordinator: pending until the marker, visible on
commit, dropped on abort, superseded by a later plain commit, and rebuilt at start-up."""

from __future__ import annotations

import random

from kafkalike.group import (
    OFFSETS_TOPIC,
    CommitPartition,
    CommitRequest,
    GroupConfig,
    GroupCoordinator,
    LogGroupStore,
    read_records,
)
from kafkalike.group.classic import ClassicGroup, ClassicMember
from kafkalike.group.state import GroupState
from kafkalike.group.txn_offsets import (
    LogTxnOffsetWriter,
    TxnCommitRequest,
    commit_transactional_offsets,
    complete_transaction,
    replay_transactional_offsets,
)
from kafkalike.log import AppendOrigin, LogConfig, MemoryLogDirectory, PartitionLog
from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.protocol.records import build_end_txn_marker

PARTITIONS = 3
NOW = 1_000_000


class Offsets:
    """``__consumer_offsets`` in memory, a group coordinator on it, and the marker path."""

    def __init__(self) -> None:
        self.dirs = [MemoryLogDirectory(f"{OFFSETS_TOPIC}-{p}") for p in range(PARTITIONS)]
        self.logs = [PartitionLog.open(d, LogConfig(), NOW) for d in self.dirs]
        self.coordinator = self._coordinator()
        self.writer = LogTxnOffsetWriter(self._log_for)

    def _log_for(self, partition: int) -> tuple[PartitionLog, int]:
        return self.logs[partition], 0

    def _coordinator(self) -> GroupCoordinator:
        config = GroupConfig(offsets_topic_partitions=PARTITIONS)
        coordinator = GroupCoordinator(config, LogGroupStore(self._log_for), random.Random(1))
        coordinator.on_loaded(NOW)
        return coordinator

    def txn_commit(self, group: str, pid: int, epoch: int = 0, offset: int = 10, **extra: object) -> list[E]:
        request = TxnCommitRequest(
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=extra.get("generation_id", -1),  # type: ignore[arg-type]
            member_id=extra.get("member_id", ""),  # type: ignore[arg-type]
            group_instance_id=None,
            partitions=(CommitPartition("t", 0, offset, 3, "meta"), CommitPartition("t", 1, offset + 1)),
        )
        return [e for _, _, e in commit_transactional_offsets(self.coordinator, self.writer, request, NOW)]

    def plain_commit(self, group: str, offset: int) -> None:
        request = CommitRequest(group, -1, "", None, (CommitPartition("t", 0, offset),))
        assert [e for _, _, e in self.coordinator.commit_offsets(request, NOW)] == [E.NONE]

    def marker(self, group: str, pid: int, commit: bool, epoch: int = 0) -> None:
        partition = self.coordinator.partition_for(group)
        batch = build_end_txn_marker(
            commit=commit, producer_id=pid, producer_epoch=epoch, coordinator_epoch=0, timestamp=NOW
        )
        self.logs[partition].append(bytearray(batch), leader_epoch=0, now_ms=NOW, origin=AppendOrigin.COORDINATOR)
        complete_transaction(self.coordinator, partition, pid, commit, NOW)

    def committed(self, group: str) -> dict[int, int]:
        result = self.coordinator.fetch_offsets(group, [("t", [0, 1])])
        return {f.partition: f.offset for _, fs in result.topics for f in fs}

    def restart(self) -> None:
        for log in self.logs:
            log.close()
        self.logs = [PartitionLog.open(d, LogConfig(), NOW, clean_shutdown=True) for d in self.dirs]
        self.coordinator = self._coordinator()
        for log in self.logs:
            for _, (key, value) in read_records(log):
                self.coordinator.replay(key, value, NOW)
        for log in self.logs:
            replay_transactional_offsets(self.coordinator, log, NOW)


def test_pending_until_the_commit_marker() -> None:
    o = Offsets()
    assert o.txn_commit("g", pid=7) == [E.NONE, E.NONE]
    assert o.committed("g") == {0: -1, 1: -1}
    pending = o.coordinator.txn_offsets
    assert pending.has_pending("g", "t", 0) and not pending.has_pending("g", "t", 2)
    unstable = pending.mark_unstable("g", o.coordinator.fetch_offsets("g", [("t", [0, 2])]))
    assert [(f.partition, f.offset, f.error) for _, fs in unstable.topics for f in fs] == [
        (0, -1, E.UNSTABLE_OFFSET_COMMIT),
        (2, -1, E.NONE),
    ]
    o.marker("g", 7, commit=True)
    assert o.committed("g") == {0: 10, 1: 11}
    assert not pending.has_pending("g", "t", 0)
    fetched = o.coordinator.fetch_offsets("g", [("t", [0])]).topics[0][1][0]
    assert (fetched.leader_epoch, fetched.metadata) == (3, "meta")


def test_dropped_on_the_abort_marker() -> None:
    o = Offsets()
    o.plain_commit("g", 5)
    o.txn_commit("g", pid=7)
    o.marker("g", 7, commit=False)
    assert o.committed("g") == {0: 5, 1: -1}
    assert o.coordinator.txn_offsets.count() == 0


def test_a_later_plain_commit_wins_over_a_pending_transactional_one() -> None:
    o = Offsets()
    o.txn_commit("g", pid=7, offset=10)
    o.plain_commit("g", 20)
    o.marker("g", 7, commit=True)
    assert o.committed("g") == {0: 20, 1: 11}


def test_a_marker_in_another_offsets_partition_leaves_other_groups_pending() -> None:
    o = Offsets()
    groups = {}
    for name in ("g1", "g2", "g3", "g4", "g5", "g6"):
        groups.setdefault(o.coordinator.partition_for(name), name)
    first, second = list(groups.values())[:2]
    o.txn_commit(first, pid=7)
    o.txn_commit(second, pid=7)
    o.marker(first, 7, commit=True)
    assert o.committed(first) == {0: 10, 1: 11}
    assert o.coordinator.txn_offsets.has_pending(second, "t", 0)
    o.marker(second, 7, commit=True)
    assert o.committed(second) == {0: 10, 1: 11}


def test_group_checks() -> None:
    o = Offsets()
    assert o.txn_commit("unknown", pid=7, generation_id=3) == [E.ILLEGAL_GENERATION] * 2
    group = ClassicGroup("members", GroupState.STABLE, NOW, generation_id=4)
    group.members["m1"] = ClassicMember("m1", None, "c", "h", 1000, 1000, "consumer", (("range", b""),))
    o.coordinator.groups["members"] = group
    assert o.txn_commit("members", pid=7, member_id="nobody", generation_id=4) == [E.UNKNOWN_MEMBER_ID] * 2
    assert o.txn_commit("members", pid=7, member_id="m1", generation_id=3) == [E.ILLEGAL_GENERATION] * 2
    assert o.txn_commit("members", pid=7, member_id="m1", generation_id=4) == [E.NONE] * 2
    # Without member information (generation -1) a group with members still accepts it, as Kafka.
    assert o.txn_commit("members", pid=8) == [E.NONE] * 2
    group.state = GroupState.COMPLETING_REBALANCE  # not a reason to refuse a transactional commit
    assert o.txn_commit("members", pid=9, member_id="m1", generation_id=4) == [E.NONE] * 2


def test_an_older_producer_epoch_is_fenced_by_the_log() -> None:
    o = Offsets()
    o.txn_commit("g", pid=7, epoch=2)
    o.marker("g", 7, commit=False, epoch=2)
    assert o.txn_commit("g", pid=7, epoch=1) == [E.INVALID_PRODUCER_EPOCH] * 2
    assert o.coordinator.txn_offsets.count() == 0


def test_restart_applies_committed_keeps_open_drops_aborted() -> None:
    o = Offsets()
    o.plain_commit("committed", 1)
    o.txn_commit("committed", pid=1, offset=10)
    o.marker("committed", 1, commit=True)
    o.txn_commit("aborted", pid=2, offset=20)
    o.marker("aborted", 2, commit=False)
    o.txn_commit("open", pid=3, offset=30)
    o.txn_commit("superseded", pid=4, offset=40)
    o.plain_commit("superseded", 41)
    o.marker("superseded", 4, commit=True)
    o.plain_commit("replaced-later", 50)
    o.txn_commit("replaced-later", pid=5, offset=51)
    o.marker("replaced-later", 5, commit=True)
    o.plain_commit("replaced-later", 52)
    o.restart()
    assert o.committed("committed") == {0: 10, 1: 11}
    assert o.committed("aborted") == {0: -1, 1: -1}
    assert o.committed("open") == {0: -1, 1: -1}
    assert o.coordinator.txn_offsets.has_pending("open", "t", 0)
    assert o.committed("superseded") == {0: 41, 1: 41}
    assert o.committed("replaced-later") == {0: 52, 1: 52}
    o.marker("open", 3, commit=True)
    assert o.committed("open") == {0: 30, 1: 31}
