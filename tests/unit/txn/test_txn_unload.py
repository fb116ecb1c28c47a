"""Unloading and reloading one ``__transaction_state`` partition (after a write to it failed):
its transactional ids are replayed from what its log holds, a transaction found half-way gets its
markers again, and the ids of other partitions are not touched."""

from __future__ import annotations

from txntest_harness import Harness

from kafkalike.protocol.errors import ErrorCode as E


def reload(h: Harness, partition: int, keep: int) -> None:
    """Unload, drop what came after the first ``keep`` records (the cut), replay the rest."""
    h.store.records[partition] = h.store.records[partition][:keep]
    h.coordinator.unload_partition(partition)
    h.coordinator.load_partition(h.store.records[partition], h.now)


def test_a_cut_prepare_commit_leaves_the_transaction_ongoing_and_sends_no_markers() -> None:
    h = Harness()
    cut, kept = "t1", "t2"
    partition = h.coordinator.partition_for(cut)
    assert partition != h.coordinator.partition_for(kept)
    pid, epoch = h.begin(cut, ("out", 0))
    other = h.begin(kept, ("out", 1))
    durable = len(h.store.records[partition])
    assert h.end(cut, pid, epoch) is E.NONE  # PrepareCommit, then its markers queued
    assert h.end(kept, *other) is E.NONE
    reload(h, partition, durable)  # the PrepareCommit never reached the disk
    jobs = h.coordinator.take_marker_jobs()
    assert [j.transactional_id for j in jobs] == [kept]  # the cut one's queued markers are gone
    assert h.txn(cut).state.display_name == "Ongoing"
    assert h.end(cut, pid, epoch) is E.NONE  # the client's retry
    assert [j.transactional_id for j in h.coordinator.take_marker_jobs()] == [cut]


def test_a_durable_prepare_commit_gets_its_markers_again_after_a_reload() -> None:
    h = Harness()
    pid, epoch = h.begin("t1", ("out", 0))
    assert h.end("t1", pid, epoch) is E.NONE
    h.coordinator.take_marker_jobs()  # in flight when the partition is reloaded
    partition = h.coordinator.partition_for("t1")
    reload(h, partition, len(h.store.records[partition]))
    (job,) = h.coordinator.take_marker_jobs()
    assert (job.transactional_id, job.commit, job.partitions) == ("t1", True, frozenset({("out", 0)}))
    h.coordinator.on_markers_written(job, {("out", 0): E.NONE}, h.now)
    assert h.txn("t1").state.display_name == "CompleteCommit"
