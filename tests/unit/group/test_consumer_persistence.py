"""Consumer groups survive a restart: the records replayed rebuild the same state and timers."""

from __future__ import annotations

from consumer_harness import ConsumerHarness, topic_id

from kafkalike.group.consumer_group import ConsumerGroup, ConsumerGroupState, MemberState
from kafkalike.protocol.errors import ErrorCode as E

T = topic_id("t")


def snapshot(group: ConsumerGroup) -> tuple[object, ...]:
    return (
        group.group_epoch,
        group.assignment_epoch,
        group.subscription_metadata,
        group.members,
        group.static_members,
        group.target,
        group.partition_epochs,
        group.state,
    )


def test_a_rebalance_in_flight_is_replayed_exactly() -> None:
    h = ConsumerHarness()
    a = h.client("a", rebalance_timeout_ms=20_000)
    b = h.client("b")
    a.beat()  # a is asked to revoke; b waits for the partitions
    group = h.group()
    assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    before = snapshot(group)
    h.restart()
    assert snapshot(h.group()) == before
    # The clients carry on where they were.
    a.beat()
    b.beat()
    assert (a.partitions(), b.partitions()) == ([0, 1, 2], [3, 4, 5])
    assert h.group().state is ConsumerGroupState.STABLE


def test_timers_start_again_after_a_restart() -> None:
    h = ConsumerHarness()
    a = h.client("a", rebalance_timeout_ms=20_000)
    b = h.client("b")
    a.beat(report=False)
    h.advance(15_000)
    h.restart()
    h.advance(15_000)  # 30 s after the request, but the timeout counts afresh from the load
    assert "a" in h.group().members
    h.advance(5_000)
    assert "a" not in h.group().members  # it never confirmed the revocation
    b.beat()
    assert b.partitions() == [0, 1, 2, 3, 4, 5]
    h.advance(45_000)  # b's session, restarted at load, ends as well
    assert h.group().state is ConsumerGroupState.EMPTY


def test_static_member_away_and_back_across_a_restart() -> None:
    h = ConsumerHarness()
    s = h.client("s1", instance_id="i-1")
    s.leave(-2)
    h.restart()
    assert h.group().members["s1"].member_epoch == -2
    back = h.client("s2", instance_id="i-1")
    assert back.partitions() == [0, 1, 2, 3, 4, 5]
    h.restart()
    assert h.group().static_members == {"i-1": "s2"} and set(h.group().members) == {"s2"}


def test_members_that_left_stay_gone() -> None:
    h = ConsumerHarness()
    a, b = h.client("a"), h.client("b")
    b.leave()
    epoch = h.group().group_epoch
    h.restart()
    assert set(h.group().members) == {"a"} and h.group().group_epoch == epoch
    assert a.beat().error is E.NONE


def test_a_failed_write_changes_nothing() -> None:
    h = ConsumerHarness()
    a = h.client("a")
    before = snapshot(h.group())
    h.store.failing = True
    assert h.join("b").error is E.NOT_COORDINATOR
    assert a.leave().error is E.NOT_COORDINATOR
    assert snapshot(h.group()) == before
    h.advance(60_000)  # the session expires, but fencing cannot be written: it is retried
    assert "a" in h.group().members
    h.store.failing = False
    h.advance(1_000)
    assert h.group().is_empty
    h.restart()
    assert h.group().is_empty
