"""Controller, brokers, replication, an acks=all producer and a consumer under the deterministic
simulation: every invariant holds after every event over many seeds of each safe family; the
unclean family loses acknowledged writes and the checker says so; one seed replays exactly; and
each invariant catches a replica layer broken on purpose (its negative control)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalike.controller.image import NO_LEADER
from kafkalike.controller.partition_change import PartitionChange
from kafkalike.replica import Isolation, Partition
from kafkalike.testing.replication_simulation import (
    FAMILIES,
    LOSSY_FAMILIES,
    InvariantViolation,
    ReplicationSimulation,
    replay_command,
    run_seed,
)

SEEDS_PER_FAMILY = 1000
SAFE_FAMILIES = sorted(set(FAMILIES) - LOSSY_FAMILIES)


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def first_violation(family: str, seeds: range) -> InvariantViolation | None:
    for seed in seeds:
        try:
            run_seed(family, seed)
        except InvariantViolation as violation:
            return violation
    return None


@pytest.mark.parametrize("family", SAFE_FAMILIES)
def test_every_invariant_holds_over_many_seeds(family: str) -> None:
    violation = first_violation(family, range(SEEDS_PER_FAMILY))
    assert violation is None, str(violation)


def test_unclean_elections_lose_acknowledged_writes_and_the_checker_reports_it() -> None:
    violation = first_violation("replication_unclean", range(300))
    assert violation is not None, "no unclean election lost an acknowledged write"
    assert "acknowledged write lost" in str(violation)
    seed = int(str(violation).split()[1])
    assert replay_command("replication_unclean", seed) in str(violation)
    sim = ReplicationSimulation(seed, FAMILIES["replication_unclean"], family="replication_unclean", trace=True)
    with pytest.raises(InvariantViolation) as again:  # the failing seed replays exactly
        sim.run()
    assert str(again.value) == str(violation)
    assert again.value.trace is sim.trace and sim.trace  # its events, to print
    assert sim.cluster.partitions.unclean_elections >= 1  # the controller did elect outside the ISR


def test_the_runs_exercise_what_they_check() -> None:
    totals: dict[str, int] = {}
    for seed in range(40):
        for key, value in run_seed("replication", seed).stats.items():
            totals[key] = totals.get(key, 0) + value
    assert totals["acked"] >= 400 and totals["consumed"] >= 400
    assert totals["crashes"] >= 40 and totals["clean_shutdowns"] >= 10
    assert totals["isolations"] >= 20 and totals["cut_links"] >= 10
    assert totals["lost_unflushed"] >= 10  # crashes did cut logs back to what was flushed
    assert totals["leader_changes"] >= 40 and totals["isr_changes"] >= 40 and totals["truncations"] >= 3
    assert totals["produce_errors"] >= 40  # refused appends and timed-out acks: not counted as written


def test_the_reassigning_runs_move_partitions_and_complete_moves() -> None:
    totals: dict[str, int] = {}
    for seed in range(40):
        for key, value in run_seed("replication_reassign", seed).stats.items():
            totals[key] = totals.get(key, 0) + value
    assert totals["reassignments"] >= 100 and totals["moves_done"] >= 80 and totals["cancels"] >= 3
    assert totals["acked"] >= 400 and totals["crashes"] >= 40 and totals["leader_changes"] >= 100


def test_a_seed_replays_exactly() -> None:
    def trace(seed: int) -> list[str]:
        sim = ReplicationSimulation(seed, FAMILIES["replication"], trace=True).run()
        assert sim.trace is not None
        return sim.trace

    assert trace(5) == trace(5)
    assert trace(5) != trace(6)


# -- negative controls: the replica layer broken on purpose -------------------------------------------


def leader_alone_high_watermark(self: Partition, now_ms: int) -> bool:
    """The high watermark at the leader's log end, whatever its followers have."""
    if not self.is_leader or self.log.log_end_offset <= self.log.high_watermark:
        return False
    return self._set_high_watermark(self.log.log_end_offset)


def high_watermark_that_falls(self: Partition, now_ms: int) -> bool:
    """The smallest log end over the maximal ISR, even when it is below the high watermark."""
    if not self.is_leader:
        return False
    ends = [self.log.log_end_offset] + [
        f.log_end_offset for f in self.followers.values() if f.broker_id in self.maximal_isr
    ]
    return self._set_high_watermark(max(min(ends), 0))


def follower_that_keeps_leading(self: Partition, state: Any, *, now_ms: int) -> bool:
    """A leader told to follow goes on leading, in the new epoch."""
    if self.is_leader:
        self.make_leader(state, now_ms=now_ms)
        return True
    return ORIGINAL_MAKE_FOLLOWER(self, state, now_ms=now_ms)


def answered_isr_without_the_leader(self: Partition, change: Any, error: Any, answer: Any, now_ms: int) -> bool:
    """The controller's answer taken without the leader in the ISR."""
    moved = ORIGINAL_ISR_ANSWERED(self, change, error, answer, now_ms)
    if self.is_leader and self.pending_isr is None and len(self.isr) > 1:
        self.isr = tuple(b for b in self.isr if b != self.local_broker_id)
    return moved


def consumer_reads_to_the_log_end(self: Partition, fetch_offset: int, max_bytes: int, **kw: Any) -> Any:
    kw["isolation"] = Isolation.LOG_END
    return ORIGINAL_READ(self, fetch_offset, max_bytes, **kw)


def divergence_never_reported(self: Partition, fetch_offset: int, max_bytes: int, **kw: Any) -> Any:
    kw.pop("last_fetched_epoch", None)
    return ORIGINAL_READ(self, fetch_offset, max_bytes, **kw)


ORIGINAL_MAKE_FOLLOWER = Partition.make_follower
ORIGINAL_ISR_ANSWERED = Partition.isr_change_answered
ORIGINAL_READ = Partition.read


@pytest.mark.parametrize(
    ("method", "broken", "message"),
    [
        ("maybe_increment_high_watermark", leader_alone_high_watermark, "is past the log end"),
        ("maybe_increment_high_watermark", high_watermark_that_falls, "went back"),
        ("make_follower", follower_that_keeps_leading, "both lead partition"),
        ("isr_change_answered", answered_isr_without_the_leader, "outside its own ISR"),
        ("read", consumer_reads_to_the_log_end, "above its high watermark"),
        ("read", divergence_never_reported, "committed data diverges"),
    ],
)
def test_each_invariant_catches_a_broken_replica_layer(
    monkeypatch: pytest.MonkeyPatch, method: str, broken: Any, message: str
) -> None:
    monkeypatch.setattr(Partition, method, broken)
    violation = first_violation("replication", range(200))
    assert violation is not None, f"{broken.__name__} passed every seed"
    assert message in str(violation)
    seed = int(str(violation).split()[1])
    assert replay_command("replication", seed) in str(violation)


def elects_outside_the_isr(self: PartitionChange) -> tuple[int, bool]:
    """Any acceptable replica leads, in the ISR or not, and the election is not called unclean."""
    for replica in self.target_replicas:
        if self.is_acceptable_leader(replica):
            return replica, False
    return NO_LEADER, False


def test_the_controllers_leader_outside_its_isr_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PartitionChange, "elect", elects_outside_the_isr)
    violation = first_violation("replication", range(200))
    assert violation is not None, "a leader elected outside the ISR passed every seed"
    assert "outside its ISR" in str(violation)
