"""The transaction coordinator, scripted: every state transition, fencing, timeouts, failed
writes and restarts at each step of a commit."""

from __future__ import annotations

import pytest
from txntest_harness import Harness

from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.txn import TxnState as S
from kafkalike.txn.metadata import SHORT_MAX

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def states(h: Harness, tid: str) -> list[S | None]:
    return [None if t is None else t.state for t in h.store.transits(tid)]


# -- InitProducerId -----------------------------------------------------------------------------


def test_init_allocates_an_id_at_epoch_zero_and_persists_empty() -> None:
    h = Harness()
    result = h.init("t1")
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, 1000, 0)
    assert states(h, "t1") == [S.EMPTY]
    assert h.txn("t1").timeout_ms == 60_000


def test_init_again_bumps_the_epoch_of_the_same_id() -> None:
    h = Harness()
    h.init("t1")
    again = h.init("t1", timeout_ms=5000)
    assert (again.producer_id, again.producer_epoch) == (1000, 1)
    assert h.txn("t1").timeout_ms == 5000
    assert states(h, "t1") == [S.EMPTY, S.EMPTY]


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_timeout_outside_the_allowed_range_is_refused(timeout_ms: int) -> None:
    h = Harness()
    assert h.init("t1", timeout_ms=timeout_ms).error is E.INVALID_TRANSACTION_TIMEOUT
    assert "t1" not in h.coordinator.txns


def test_empty_transactional_id_and_half_given_producer_are_invalid_requests() -> None:
    h = Harness()
    assert h.init("").error is E.INVALID_REQUEST
    assert h.init("t1", pid=5, epoch=-1).error is E.INVALID_REQUEST


def test_init_with_the_current_epoch_bumps_and_a_retry_with_the_previous_gets_the_same() -> None:
    h = Harness()
    pid, epoch = h.begin("t1")
    bumped = h.init("t1", pid=pid, epoch=epoch)
    assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
    retried = h.init("t1", pid=pid, epoch=epoch)  # the answer to the first was lost
    assert (retried.error, retried.producer_epoch) == (E.NONE, epoch + 1)


def test_init_with_a_stale_epoch_or_another_producer_id_is_fenced() -> None:
    h = Harness()
    pid, _ = h.begin("t1")
    h.init("t1")  # another instance: epoch 1, last epoch forgotten
    h.init("t1")  # epoch 2
    assert h.init("t1", pid=pid, epoch=0).error is E.PRODUCER_FENCED
    assert h.init("t1", pid=pid + 77, epoch=2).error is E.PRODUCER_FENCED


def test_exhausted_epochs_rotate_to_a_new_producer_id() -> None:
    h = Harness()
    pid, _ = h.begin("t1")
    h.txn("t1").producer_epoch = SHORT_MAX - 1
    rotated = h.init("t1")
    assert rotated.error is E.NONE and rotated.producer_id != pid and rotated.producer_epoch == 0
    assert h.txn("t1").prev_producer_id == pid


# -- AddPartitionsToTxn ---------------------------------------------------------------------------


def test_add_partitions_starts_the_transaction() -> None:
    h = Harness()
    pid, epoch = h.begin("t1")
    h.now += 10
    assert h.add("t1", pid, epoch, A0, A1) is E.NONE
    txn = h.txn("t1")
    assert (txn.state, txn.partitions, txn.start_ms) == (S.ONGOING, {A0, A1}, h.now)
    written = len(h.store.transits("t1"))
    assert h.add("t1", pid, epoch, A0) is E.NONE  # already in: answered without a write
    assert len(h.store.transits("t1")) == written
    h.now += 10
    assert h.add("t1", pid, epoch, B0) is E.NONE
    assert txn.partitions == {A0, A1, B0} and txn.start_ms == h.now - 10


def test_add_partitions_checks_the_producer() -> None:
    h = Harness()
    pid, epoch = h.begin("t1")
    assert h.add("nobody", pid, epoch, A0) is E.INVALID_PRODUCER_ID_MAPPING
    assert h.add("t1", pid + 1, epoch, A0) is E.INVALID_PRODUCER_ID_MAPPING
    assert h.add("t1", pid, epoch + 1, A0) is E.PRODUCER_FENCED
    assert h.add("", pid, epoch, A0) is E.INVALID_REQUEST


def test_verify_partitions() -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0)
    verify = h.coordinator.verify_partitions
    assert verify("t1", pid, epoch, [A0, A1]) == {A0: E.NONE, A1: E.TRANSACTION_ABORTABLE}
    assert verify("t1", pid, epoch + 1, [A0]) == {A0: E.PRODUCER_FENCED}
    assert verify("t1", pid + 1, epoch, [A0]) == {A0: E.INVALID_PRODUCER_ID_MAPPING}
    assert verify("other", pid, epoch, [A0]) == {A0: E.INVALID_PRODUCER_ID_MAPPING}
    assert h.end("t1", pid, epoch) is E.NONE
    assert verify("t1", pid, epoch, [A0]) == {A0: E.CONCURRENT_TRANSACTIONS}  # markers not written yet


# -- EndTxn and markers ---------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_end_writes_prepare_then_markers_then_complete(commit: bool) -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0, B0)
    assert h.end("t1", pid, epoch, commit) is E.NONE
    prepare, complete = (S.PREPARE_COMMIT, S.COMPLETE_COMMIT) if commit else (S.PREPARE_ABORT, S.COMPLETE_ABORT)
    assert h.txn("t1").state is prepare
    (job,) = h.markers()
    assert (job.producer_id, job.producer_epoch, job.commit, job.partitions) == (pid, epoch, commit, {A0, B0})
    txn = h.txn("t1")
    assert txn.state is complete and not txn.partitions and not txn.pending
    assert states(h, "t1") == [S.EMPTY, S.ONGOING, prepare, complete]


def test_everything_waits_while_markers_are_written() -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0)
    assert h.end("t1", pid, epoch) is E.NONE
    assert h.end("t1", pid, epoch) is E.CONCURRENT_TRANSACTIONS
    assert h.end("t1", pid, epoch, commit=False) is E.CONCURRENT_TRANSACTIONS
    assert h.add("t1", pid, epoch, A1) is E.CONCURRENT_TRANSACTIONS
    assert h.init("t1").error is E.CONCURRENT_TRANSACTIONS
    h.markers()
    assert h.add("t1", pid, epoch, A1) is E.NONE  # the next transaction


def test_end_retries_and_wrong_results() -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0)
    assert h.end("t1", pid, epoch) is E.NONE
    h.markers()
    assert h.end("t1", pid, epoch) is E.NONE  # a retry of a commit that completed
    assert h.end("t1", pid, epoch, commit=False) is E.INVALID_TXN_STATE
    h.add("t1", pid, epoch, A0)
    h.end("t1", pid, epoch, commit=False)
    h.markers()
    assert h.end("t1", pid, epoch, commit=False) is E.NONE
    assert h.end("t1", pid, epoch, commit=True) is E.INVALID_TXN_STATE


def test_end_without_a_transaction_or_producer() -> None:
    h = Harness()
    pid, epoch = h.begin("t1")
    assert h.end("t1", pid, epoch) is E.INVALID_TXN_STATE  # Empty
    assert h.end("nobody", pid, epoch) is E.INVALID_PRODUCER_ID_MAPPING
    assert h.end("t1", pid + 1, epoch) is E.INVALID_PRODUCER_ID_MAPPING
    assert h.end("t1", pid, epoch - 1) is E.PRODUCER_FENCED


def test_a_failed_marker_is_retried_after_the_backoff() -> None:
    h = Harness(retry_backoff_ms=100)
    pid, epoch = h.begin("t1", A0, B0)
    h.end("t1", pid, epoch)
    h.markers(lambda job, tp: E.NOT_LEADER_OR_FOLLOWER if tp == B0 else E.NONE)
    txn = h.txn("t1")
    assert txn.state is S.PREPARE_COMMIT and txn.partitions == {B0}
    assert h.coordinator.poll(h.now) == h.now + 100
    h.advance(50)
    assert h.coordinator.take_marker_jobs() == []
    h.now += 50
    h.coordinator.poll(h.now)
    (retry,) = h.markers()
    assert retry.partitions == {B0}
    assert txn.state is S.COMPLETE_COMMIT


@pytest.mark.parametrize(
    "error", [E.UNKNOWN_TOPIC_OR_PARTITION, E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED]
)
def test_markers_no_longer_needed_complete_the_transaction(error: E) -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0)
    h.end("t1", pid, epoch)
    h.markers(lambda job, tp: error)
    assert h.txn("t1").state is S.COMPLETE_COMMIT


def test_a_failed_prepare_write_changes_nothing() -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0)
    h.store.failing = True
    assert h.end("t1", pid, epoch) is E.COORDINATOR_NOT_AVAILABLE
    txn = h.txn("t1")
    assert txn.state is S.ONGOING and not txn.pending and h.coordinator.take_marker_jobs() == []
    h.store.failing = False
    assert h.end("t1", pid, epoch) is E.NONE


def test_a_failed_complete_write_is_retried_and_keeps_the_id_busy() -> None:
    h = Harness(retry_backoff_ms=100)
    pid, epoch = h.begin("t1", A0)
    h.end("t1", pid, epoch)
    h.store.failing = True
    h.markers()
    txn = h.txn("t1")
    assert txn.state is S.PREPARE_COMMIT and txn.pending_state is S.COMPLETE_COMMIT
    assert h.end("t1", pid, epoch) is E.CONCURRENT_TRANSACTIONS
    h.store.failing = False
    h.advance(100)
    assert txn.state is S.COMPLETE_COMMIT and not txn.pending


# -- fencing ------------------------------------------------------------------------------------


def test_a_new_instance_aborts_the_open_transaction_and_fences_the_old_one() -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0)
    assert h.init("t1").error is E.CONCURRENT_TRANSACTIONS
    txn = h.txn("t1")
    assert txn.state is S.PREPARE_ABORT and txn.producer_epoch == epoch + 1
    (job,) = h.markers()
    assert (job.commit, job.producer_epoch, job.partitions) == (False, epoch + 1, {A0})
    assert txn.state is S.COMPLETE_ABORT
    again = h.init("t1")  # the client's retry
    assert (again.error, again.producer_id, again.producer_epoch) == (E.NONE, pid, epoch + 2)
    # The old instance is fenced at every step.
    assert h.add("t1", pid, epoch, A0) is E.PRODUCER_FENCED
    assert h.end("t1", pid, epoch) is E.PRODUCER_FENCED
    assert h.coordinator.verify_partitions("t1", pid, epoch, [A0]) == {A0: E.PRODUCER_FENCED}
    assert states(h, "t1") == [S.EMPTY, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT, S.EMPTY]


def test_a_fence_whose_abort_cannot_be_written_does_not_bump_twice() -> None:
    h = Harness()
    _, epoch = h.begin("t1", A0)
    h.store.failing = True
    assert h.init("t1").error is E.COORDINATOR_NOT_AVAILABLE
    txn = h.txn("t1")
    assert txn.state is S.ONGOING and not txn.pending and txn.has_failed_epoch_fence
    assert txn.producer_epoch == epoch + 1  # bumped in memory, never handed out
    h.store.failing = False
    assert h.init("t1").error is E.CONCURRENT_TRANSACTIONS
    assert txn.producer_epoch == epoch + 1 and txn.state is S.PREPARE_ABORT
    h.markers()
    assert not txn.has_failed_epoch_fence


# -- timeouts and expiry --------------------------------------------------------------------------


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    h = Harness(abort_timed_out_interval_ms=1000)
    pid, epoch = h.begin("t1", A0, timeout_ms=5000)
    h.advance(5000)
    assert h.txn("t1").state is S.ONGOING  # not past it yet (checked every second)
    h.advance(1000)
    txn = h.txn("t1")
    assert txn.state is S.COMPLETE_ABORT and txn.producer_epoch == epoch + 1
    assert h.end("t1", pid, epoch) is E.PRODUCER_FENCED
    assert h.init("t1", pid=pid, epoch=epoch).error is E.PRODUCER_FENCED
    assert h.init("t1").producer_epoch == epoch + 2


def test_idle_and_completed_ids_are_not_aborted() -> None:
    h = Harness(abort_timed_out_interval_ms=1000)
    _, epoch = h.begin("idle", timeout_ms=1000)
    p2, e2 = h.begin("done", A0, timeout_ms=1000)
    h.end("done", p2, e2)
    h.markers()
    h.advance(10_000)
    assert h.txn("idle").state is S.EMPTY and h.txn("idle").producer_epoch == epoch
    assert h.txn("done").state is S.COMPLETE_COMMIT and h.txn("done").producer_epoch == e2


def test_idle_ids_expire_with_a_tombstone() -> None:
    h = Harness(id_expiration_ms=60_000, remove_expired_interval_ms=10_000, abort_timed_out_interval_ms=10_000)
    h.begin("idle")
    h.begin("busy", A0, timeout_ms=900_000)
    h.advance(70_000)
    assert "idle" not in h.coordinator.txns and "busy" in h.coordinator.txns
    assert h.store.transits("idle")[-1] is None
    assert h.restart() == []
    assert "idle" not in h.coordinator.txns and h.txn("busy").state is S.ONGOING
    fresh = h.init("idle")
    assert fresh.error is E.NONE and fresh.producer_epoch == 0


# -- restarts -------------------------------------------------------------------------------------


def test_restart_keeps_ids_epochs_and_open_transactions() -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0, B0)
    h.begin("t2")
    assert h.restart() == []
    txn = h.txn("t1")
    assert (txn.producer_id, txn.producer_epoch, txn.state, txn.partitions) == (pid, epoch, S.ONGOING, {A0, B0})
    assert h.end("t1", pid, epoch) is E.NONE
    assert h.init("t2").producer_epoch == 1
    assert h.init("t3").producer_id not in (pid, h.txn("t2").producer_id)


@pytest.mark.parametrize("commit", [True, False])
def test_restart_after_prepare_writes_every_marker_again_and_completes(commit: bool) -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0, A1, B0)
    h.end("t1", pid, epoch, commit)
    h.markers(lambda job, tp: E.NONE if tp == A0 else E.REQUEST_TIMED_OUT)  # crash after one marker
    (job,) = h.restart()
    assert (job.producer_id, job.producer_epoch, job.commit) == (pid, epoch, commit)
    assert job.partitions == {A0, A1, B0}  # Kafka re-sends all: a marker twice is harmless
    assert h.txn("t1").state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    assert h.end("t1", pid, epoch, commit) is E.CONCURRENT_TRANSACTIONS
    h.coordinator.on_markers_written(job, dict.fromkeys(job.partitions, E.NONE), h.now)
    assert h.txn("t1").state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert h.restart() == []


def test_restart_after_complete_has_nothing_to_do() -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0)
    h.end("t1", pid, epoch)
    h.markers()
    assert h.restart() == []
    assert h.txn("t1").state is S.COMPLETE_COMMIT


def test_restart_after_a_fence_abort_keeps_the_bumped_epoch() -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0)
    h.init("t1")  # PrepareAbort at epoch + 1
    (job,) = h.restart()
    assert job.producer_epoch == epoch + 1 and not job.commit
    h.coordinator.on_markers_written(job, dict.fromkeys(job.partitions, E.NONE), h.now)
    assert h.init("t1", pid=pid, epoch=epoch).error is E.PRODUCER_FENCED
    assert h.init("t1").producer_epoch == epoch + 2


def test_stale_marker_answers_are_ignored() -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A0)
    h.end("t1", pid, epoch)
    (job,) = h.coordinator.take_marker_jobs()
    h.restart()  # the new coordinator sends its own markers
    h.markers()
    h.coordinator.on_markers_written(job, {A0: E.NONE}, h.now)  # the old answer arrives late
    assert h.txn("t1").state is S.COMPLETE_COMMIT


# -- admin ----------------------------------------------------------------------------------------


def test_describe() -> None:
    h = Harness()
    pid, epoch = h.begin("t1", A1, B0, A0, timeout_ms=7000)
    d = h.coordinator.describe("t1")
    assert (d.error, d.state, d.producer_id, d.producer_epoch, d.timeout_ms) == (E.NONE, "Ongoing", pid, epoch, 7000)
    assert d.topics == (("a", (0, 1)), ("b", (0,))) and d.start_ms == h.now
    assert h.coordinator.describe("nobody").error is E.TRANSACTIONAL_ID_NOT_FOUND
    assert h.coordinator.describe("").error is E.INVALID_REQUEST


def test_list_with_filters() -> None:
    h = Harness()
    p1, _ = h.begin("t1", A0)
    h.begin("t2")
    h.now += 5000
    listing = h.coordinator.list_transactions
    assert {t.transactional_id for t in listing([], [], -1, h.now).transactions} == {"t1", "t2"}
    ongoing = listing(["Ongoing", "Bogus"], [], -1, h.now)
    assert [t.transactional_id for t in ongoing.transactions] == ["t1"]
    assert ongoing.unknown_state_filters == ("Bogus",)
    assert [t.state for t in listing([], [p1], -1, h.now).transactions] == ["Ongoing"]
    # The duration filter compares with the start time, as Kafka does (an Empty id has none: -1).
    assert [t.transactional_id for t in listing(["Ongoing"], [], 4000, h.now).transactions] == ["t1"]
    assert listing(["Ongoing"], [], 6000, h.now).transactions == ()
