"""A leader's view of its followers, as Kafka's Partition/Replica keep it: the caught-up rule, the
high watermark over the maximal ISR (held under min.insync.replicas), ISR expansion and
shrinking proposed one at a time, the controller's answers, acks=all's checks, and the
diverging-epoch answer to a follower's fetch."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalike.log import LogConfig, LogManager
from kafkalike.log.storage import IMMEDIATE
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch
from kafkalike.replica import Isolation, LeaderAndIsr, Partition, PartitionError
from kafkalike.replica.follower_state import FollowerState, IsrChangeKind
from kafkalike.replica.partition import TopicPartition

TOPIC_ID = uuid.UUID(int=9)
LEADER, F2, F3 = 1, 2, 3
LAG_MS = 30_000


class Brokers:
    """Broker epochs as a test's metadata has them; a broker missing is fenced or shutting down."""

    def __init__(self) -> None:
        self.epochs: dict[int, int] = {LEADER: 10, F2: 20, F3: 30}

    def isr_eligible_epoch(self, broker_id: int) -> int | None:
        return self.epochs.get(broker_id)

    def local_broker_epoch(self) -> int:
        return self.epochs[LEADER]

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.epochs


def leader(
    tmp_path: Path,
    isr: tuple[int, ...] = (LEADER, F2, F3),
    min_isr: int = 1,
    brokers: Brokers | None = None,
    on_progress: Callable[[TopicPartition], None] = lambda tp: None,
) -> Partition:
    logs = LogManager([tmp_path], storage="memory")
    plog = logs.get_or_create("t", 0, LogConfig(min_insync_replicas=min_isr), 0, topic_id=TOPIC_ID)
    p = Partition("t", 0, TOPIC_ID, plog, local_broker_id=LEADER, brokers=brokers or Brokers(), on_progress=on_progress)
    p.make_leader(LeaderAndIsr(LEADER, 1, 1, (LEADER, F2, F3), isr), now_ms=0)
    return p


def append(p: Partition, count: int = 1, now_ms: int = 0) -> None:
    batch = bytearray(build_batch([Record(value=b"v%d" % i) for i in range(count)], base_timestamp=1))
    result = p.append_as_leader(batch, now_ms=now_ms, log_append_time=False, syncs=IMMEDIATE)
    p.complete_append(result, None, now_ms)


def fetch(p: Partition, replica: int, offset: int, now_ms: int, epoch: int | None = None, log_start: int = 0) -> object:
    broker_epoch = {F2: 20, F3: 30}[replica] if epoch is None else epoch
    return p.update_follower_fetch_state(
        replica,
        broker_epoch=broker_epoch,
        fetch_offset=offset,
        log_start_offset=log_start,
        leader_end_offset=p.log_end_offset,
        now_ms=now_ms,
    )


# -- the caught-up rule ---------------------------------------------------------------------------


def test_a_fetch_at_the_leaders_end_is_caught_up_at_that_time() -> None:
    f = FollowerState(F2)
    f.update_fetch_state(10, 0, fetch_time_ms=500, leader_end_offset=10, broker_epoch=20, registered_epoch=20)
    assert f.last_caught_up_time_ms == 500
    assert f.is_caught_up(12, now_ms=500 + LAG_MS, max_lag_ms=LAG_MS)
    assert not f.is_caught_up(12, now_ms=501 + LAG_MS, max_lag_ms=LAG_MS)
    assert f.is_caught_up(10, now_ms=10**9, max_lag_ms=LAG_MS)  # its end is the leader's


def test_reaching_what_the_leader_had_at_the_previous_fetch_counts_from_that_fetch() -> None:
    f = FollowerState(F2)
    f.update_fetch_state(5, 0, fetch_time_ms=100, leader_end_offset=10, broker_epoch=20, registered_epoch=20)
    assert f.last_caught_up_time_ms == 0  # behind at its first fetch
    f.update_fetch_state(10, 0, fetch_time_ms=300, leader_end_offset=20, broker_epoch=20, registered_epoch=20)
    assert f.last_caught_up_time_ms == 100  # it had at 300 what the leader had at 100
    f.update_fetch_state(15, 0, fetch_time_ms=400, leader_end_offset=25, broker_epoch=20, registered_epoch=20)
    assert f.last_caught_up_time_ms == 100  # not what the leader had at 300


def test_a_stale_broker_epoch_is_refused(tmp_path: Path) -> None:
    p = leader(tmp_path)
    with pytest.raises(PartitionError) as refused:
        fetch(p, F2, 0, now_ms=1, epoch=19)  # a previous incarnation of broker 2
    assert refused.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(PartitionError) as unknown:
        p.update_follower_fetch_state(
            7, broker_epoch=1, fetch_offset=0, log_start_offset=0, leader_end_offset=0, now_ms=1
        )
    assert unknown.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER


# -- the high watermark -----------------------------------------------------------------------------


def test_the_high_watermark_is_the_smallest_end_over_the_isr_and_never_falls(tmp_path: Path) -> None:
    p = leader(tmp_path)
    append(p, 5)
    assert p.high_watermark == 0  # the followers' positions are unknown at a new term
    fetch(p, F2, 5, now_ms=1)
    assert p.high_watermark == 0  # broker 3 has not fetched
    fetch(p, F3, 3, now_ms=1)
    assert p.high_watermark == 3
    fetch(p, F3, 5, now_ms=2)
    assert p.high_watermark == 5
    fetch(p, F2, 2, now_ms=3)  # a follower that truncated: the high watermark stays
    assert p.high_watermark == 5


def test_the_low_watermark_is_the_smallest_log_start_over_alive_replicas(tmp_path: Path) -> None:
    brokers = Brokers()
    moves: list[TopicPartition] = []
    p = leader(tmp_path, brokers=brokers, on_progress=moves.append)
    append(p, 10)
    fetch(p, F2, 10, now_ms=1)
    fetch(p, F3, 10, now_ms=1)
    assert p.delete_records_on_leader(6, now_ms=2, syncs=IMMEDIATE) == 0  # the followers are still at 0
    assert p.log_start_offset == 6
    fetch(p, F2, 10, now_ms=3, log_start=6)
    assert p.low_watermark == 0  # broker 3 has not moved yet
    moves.clear()
    fetch(p, F3, 10, now_ms=4, log_start=6)
    assert p.low_watermark == 6 and moves == [("t", 0)]  # the increase wakes the DeleteRecords waiting for it
    assert p.delete_records_on_leader(8, now_ms=5, syncs=IMMEDIATE) == 6
    del brokers.epochs[F3]  # fenced: no longer counted (Kafka's hasAliveBroker)
    fetch(p, F2, 10, now_ms=6, log_start=8)
    assert p.low_watermark == 8


def test_the_high_watermark_holds_while_the_isr_is_below_min_insync_replicas(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(LEADER,), min_isr=2)
    append(p, 3)
    assert p.is_under_min_isr and p.high_watermark == 0
    fetch(p, F2, 3, now_ms=1)  # caught up, not yet in the ISR: still held
    assert p.high_watermark == 0
    change = p.pending_isr
    assert change is not None and change.kind is IsrChangeKind.EXPAND
    # The expansion is pending: the maximal ISR counts it, the committed ISR does not yet.
    assert p.maximal_isr == (LEADER, F2) and p.isr == (LEADER,)
    p.isr_change_answered(change, ErrorCode.NONE, LeaderAndIsr(LEADER, 1, 2, p.replicas, (LEADER, F2)), now_ms=2)
    assert p.isr == (LEADER, F2) and p.partition_epoch == 2
    assert p.high_watermark == 3


def test_a_caught_up_eligible_follower_outside_the_isr_holds_the_high_watermark(tmp_path: Path) -> None:
    # Kafka's shouldWaitForReplicaToJoinIsr: otherwise it could never reach the high watermark.
    p = leader(tmp_path)
    append(p, 8)
    for follower in (F2, F3):
        fetch(p, follower, 4, now_ms=1)
    assert p.high_watermark == 4
    # A new term without broker 3 in the ISR: its epoch starts at 8, so broker 3 cannot join
    # before it reaches 8; meanwhile, caught up and eligible, it holds the high watermark.
    p.make_leader(LeaderAndIsr(LEADER, 2, 2, p.replicas, (LEADER, F2)), now_ms=2)
    fetch(p, F2, 8, now_ms=3)
    assert p.high_watermark == 4
    assert fetch(p, F3, 6, now_ms=3) is None  # below its epoch's start: no expansion
    assert p.high_watermark == 6
    # A fenced broker 3 does not hold it back.
    brokers = p.brokers
    assert isinstance(brokers, Brokers)
    del brokers.epochs[F3]
    fetch(p, F2, 8, now_ms=4)
    assert p.high_watermark == 8


# -- the ISR -------------------------------------------------------------------------------------------


def test_a_follower_joins_the_isr_at_the_high_watermark_and_the_epoch_start(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(LEADER, F2))
    append(p, 4)
    fetch(p, F2, 4, now_ms=1)
    assert fetch(p, F3, 2, now_ms=1) is None  # below the high watermark
    change = fetch(p, F3, 4, now_ms=2)
    assert change is not None and change is p.pending_isr
    assert change.new_isr == ((LEADER, 10), (F2, 20), (F3, 30))  # with broker epochs (KIP-903)
    assert (change.leader_epoch, change.partition_epoch) == (1, 1)
    assert fetch(p, F3, 4, now_ms=3) is None  # one change in flight at a time


def test_an_ineligible_follower_never_joins(tmp_path: Path) -> None:
    brokers = Brokers()
    p = leader(tmp_path, isr=(LEADER, F2), brokers=brokers)
    del brokers.epochs[F3]  # fenced, or in controlled shutdown (KIP-841)
    assert fetch(p, F3, 0, now_ms=1, epoch=30) is None
    brokers.epochs[F3] = 31  # registered again, while fetching with its old epoch
    with pytest.raises(PartitionError):
        fetch(p, F3, 0, now_ms=2, epoch=30)
    assert fetch(p, F3, 0, now_ms=3, epoch=31) is not None


def test_lagging_followers_leave_the_isr(tmp_path: Path) -> None:
    p = leader(tmp_path)
    append(p, 2)
    fetch(p, F2, 2, now_ms=1_000)
    fetch(p, F3, 1, now_ms=1_000)
    assert p.maybe_shrink_isr(now_ms=LAG_MS) is None  # reset at the new term, within the lag time
    append(p, 1, now_ms=LAG_MS)
    fetch(p, F2, 3, now_ms=LAG_MS + 1)
    change = p.maybe_shrink_isr(now_ms=LAG_MS + 1_001)
    assert change is not None and change.kind is IsrChangeKind.SHRINK
    assert change.new_isr_ids == (LEADER, F2)
    # Until it is committed, the removal is not applied: broker 3 still holds the high watermark.
    assert p.maximal_isr == (LEADER, F2, F3) and p.high_watermark == 1
    assert p.maybe_shrink_isr(now_ms=LAG_MS + 2_000) is None  # one in flight
    answer = LeaderAndIsr(LEADER, 1, 2, p.replicas, (LEADER, F2))
    p.isr_change_answered(change, ErrorCode.NONE, answer, now_ms=LAG_MS + 2_001)
    assert p.high_watermark == 3


def test_the_controllers_refusals(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(LEADER, F2))
    change = fetch(p, F3, 0, now_ms=1)
    assert change is not None
    # A stale answer (another leader epoch) changes nothing.
    stale = LeaderAndIsr(LEADER, 0, 5, p.replicas, (LEADER, F2, F3))
    assert not p.isr_change_answered(change, ErrorCode.NONE, stale, now_ms=2)  # type: ignore[arg-type]
    assert p.isr == (LEADER, F2)
    # INVALID_UPDATE_VERSION: the state is stale, the change stays pending until the metadata moves.
    p.isr_change_answered(change, ErrorCode.INVALID_UPDATE_VERSION, None, now_ms=2)  # type: ignore[arg-type]
    assert p.pending_isr is change
    p.make_leader(LeaderAndIsr(LEADER, 1, 3, p.replicas, (LEADER, F2)), now_ms=3)
    assert p.pending_isr is None and p.partition_epoch == 3
    # INELIGIBLE_REPLICA: nothing applied, the committed ISR stands, another may be proposed.
    again = fetch(p, F3, 0, now_ms=4)
    assert again is not None
    p.isr_change_answered(again, ErrorCode.INELIGIBLE_REPLICA, None, now_ms=5)  # type: ignore[arg-type]
    assert p.pending_isr is None and p.isr == (LEADER, F2)


# -- acks=all ---------------------------------------------------------------------------------------


def test_acks_all_checks(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(LEADER, F2), min_isr=2)
    p.check_min_isr_for_acks_all()
    append(p, 2)
    assert p.replicated_to(2) is None  # not yet replicated
    fetch(p, F2, 2, now_ms=1)
    assert p.replicated_to(2) is ErrorCode.NONE
    append(p, 1, now_ms=2)  # broker 2 never fetches it
    shrink = p.maybe_shrink_isr(now_ms=10 * LAG_MS)
    assert shrink is not None
    p.isr_change_answered(shrink, ErrorCode.NONE, LeaderAndIsr(LEADER, 1, 2, p.replicas, (LEADER,)), now_ms=1)
    with pytest.raises(PartitionError) as refused:
        p.check_min_isr_for_acks_all()
    assert refused.value.code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.replicated_to(2) is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    p.make_follower(LeaderAndIsr(F2, 2, 3, p.replicas, (F2,)), now_ms=2)
    assert p.replicated_to(2) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_min_insync_replicas_is_capped_by_the_replication_factor(tmp_path: Path) -> None:
    logs = LogManager([tmp_path], storage="memory")
    plog = logs.get_or_create("t", 0, LogConfig(min_insync_replicas=3), 0, topic_id=TOPIC_ID)
    p = Partition("t", 0, TOPIC_ID, plog, local_broker_id=LEADER, brokers=Brokers())
    p.make_leader(LeaderAndIsr(LEADER, 1, 1, (LEADER, F2), (LEADER, F2)), now_ms=0)
    assert p.effective_min_isr == 2
    p.check_min_isr_for_acks_all()


# -- a follower's fetch that diverged -------------------------------------------------------------


def test_a_fetch_from_a_diverged_log_gets_the_epoch_to_truncate_by(tmp_path: Path) -> None:
    p = leader(tmp_path)
    append(p, 3)  # epoch 1: offsets 0-2
    p.make_leader(LeaderAndIsr(LEADER, 4, 2, p.replicas, p.isr), now_ms=1)
    append(p, 2)  # epoch 4: offsets 3-4
    # A follower that wrote offsets 3-5 in epoch 2 of a leader that lost them.
    read = p.read(6, 1 << 20, isolation=Isolation.LOG_END, replica_id=F2, last_fetched_epoch=2)
    assert read.diverging is not None and (read.diverging.epoch, read.diverging.end_offset) == (1, 3)
    assert read.ranges == []
    # In step with the leader: no divergence.
    same = p.read(3, 1 << 20, isolation=Isolation.LOG_END, replica_id=F2, last_fetched_epoch=1)
    assert same.diverging is None and same.size_bytes > 0


def test_a_follower_at_the_leaders_end_diverges_unless_its_last_epoch_is_the_leaders(tmp_path: Path) -> None:
    p = leader(tmp_path)
    append(p, 3)  # epoch 1: offsets 0-2
    p.make_leader(LeaderAndIsr(LEADER, 4, 2, p.replicas, p.isr), now_ms=1)
    append(p, 2)  # epoch 4: offsets 3-4, the log end 5
    # Caught up in epoch 4: nothing to read, no divergence, the leader's offsets.
    caught_up = p.read(5, 1 << 20, isolation=Isolation.LOG_END, replica_id=F2, last_fetched_epoch=4)
    assert caught_up.diverging is None and caught_up.ranges == [] and caught_up.size_bytes == 0
    assert (caught_up.high_watermark, caught_up.log_start_offset, caught_up.log_end_offset) == (
        p.high_watermark,
        0,
        5,
    )
    # At the same end offset, but written in epoch 2 of a leader that lost it: truncate to 3.
    parted = p.read(5, 1 << 20, isolation=Isolation.LOG_END, replica_id=F2, last_fetched_epoch=2)
    assert parted.diverging is not None and (parted.diverging.epoch, parted.diverging.end_offset) == (1, 3)
