"""Rebalancing a KIP-848 group: revocation before reassignment, leaving, sessions, static members.

Clients here adopt each assignment at once and report what they own on their next heartbeat,
as the real ones do; ``assert_exclusive`` checks after every step that no partition is owned
by two clients at the same time.
"""

from __future__ import annotations

import random

import pytest
from consumer_harness import REBALANCE_MS, Client, ConsumerHarness, topic_id

from kafkalike.group.consumer_group import ConsumerGroupState, MemberState
from kafkalike.protocol.errors import ErrorCode as E

T = topic_id("t")
SESSION_MS = 45_000


def assert_exclusive(*clients: Client) -> None:
    seen: dict[tuple[object, int], str] = {}
    for client in clients:
        for topic, partitions in client.owned.items():
            for p in partitions:
                assert (topic, p) not in seen, f"{topic}-{p} owned by {seen[(topic, p)]} and {client.member_id}"
                seen[(topic, p)] = client.member_id


def settle(*clients: Client, rounds: int = 6) -> None:
    for _ in range(rounds):
        for client in clients:
            client.beat()
            assert_exclusive(*clients)


def test_revocation_comes_before_reassignment_across_three_members() -> None:
    h = ConsumerHarness()
    a = h.client("a")
    assert a.partitions() == [0, 1, 2, 3, 4, 5]
    b = h.client("b")
    assert (b.epoch, b.partitions()) == (2, [])  # its share is still a's
    assert h.group().members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert b.beat().assignment is None and b.partitions() == []  # still waiting: a has not revoked
    a.beat()  # told to revoke; adopts the smaller assignment at once
    assert (a.epoch, a.partitions()) == (1, [0, 1, 2])
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert b.beat().assignment is None and b.partitions() == []  # a has not *confirmed* yet
    a.beat()  # reports [0, 1, 2]: the revocation is confirmed
    assert a.epoch == 2
    b.beat()
    assert (b.epoch, b.partitions()) == (2, [3, 4, 5])
    assert_exclusive(a, b)

    c = h.client("c")
    assert c.partitions() == []
    for client in (c, b, c, a, c):
        client.beat()
        assert_exclusive(a, b, c)
    settle(a, b, c)
    assert sorted(len(x.partitions()) for x in (a, b, c)) == [2, 2, 2]
    assert {x.epoch for x in (a, b, c)} == {3}
    assert h.group().state is ConsumerGroupState.STABLE


def test_a_member_leaving_frees_its_partitions_at_once() -> None:
    h = ConsumerHarness()
    a, b, c = h.client("a"), h.client("b"), h.client("c")
    settle(a, b, c)
    before = h.group().group_epoch
    left = c.leave()
    assert (left.error, left.member_id, left.member_epoch) == (E.NONE, "c", -1)
    group = h.group()
    assert group.group_epoch == before + 1 and "c" not in group.members
    assert group.state is ConsumerGroupState.ASSIGNING
    settle(a, b)
    assert sorted(a.partitions() + b.partitions()) == [0, 1, 2, 3, 4, 5]
    assert h.group().state is ConsumerGroupState.STABLE
    assert c.beat().error is E.UNKNOWN_MEMBER_ID


def test_session_expiry_fences_a_silent_member() -> None:
    h = ConsumerHarness()
    a, b = h.client("a"), h.client("b")
    settle(a, b)
    for _ in range(4):  # a keeps heartbeating, b falls silent
        h.advance(SESSION_MS // 3)
        a.beat()
    assert "b" not in h.group().members
    a.beat()
    assert a.partitions() == [0, 1, 2, 3, 4, 5]
    gone = b.beat()
    assert gone.error is E.UNKNOWN_MEMBER_ID
    assert b.join().error is E.NONE  # a fenced member rejoins with epoch 0


def test_heartbeats_keep_the_session_alive() -> None:
    h = ConsumerHarness(session_timeout_ms=1000, heartbeat_interval_ms=500)
    a = h.client("a")
    for _ in range(10):
        h.advance(900)
        assert a.beat().error is E.NONE
    h.advance(1000)
    assert "a" not in h.group().members
    assert h.group().state is ConsumerGroupState.EMPTY


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    h = ConsumerHarness()
    a = h.client("a", rebalance_timeout_ms=10_000)
    b = h.client("b")
    a.beat(report=False)  # told to revoke, but never reports that it did
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    h.advance(5_000)
    a.beat(report=False)
    b.beat()
    assert b.partitions() == []
    h.advance(5_000)  # the rebalance timeout, counted from when it was asked to revoke
    assert "a" not in h.group().members
    b.beat()
    assert b.partitions() == [0, 1, 2, 3, 4, 5]
    assert a.beat().error is E.UNKNOWN_MEMBER_ID


def test_static_member_leaves_for_a_while_and_comes_back_as_a_new_process() -> None:
    h = ConsumerHarness()
    a = h.client("a")
    s = h.client("s1", instance_id="i-1")
    settle(a, s)
    epoch = h.group().group_epoch
    kept = s.partitions()
    assert kept
    away = s.leave(-2)
    assert (away.error, away.member_epoch) == (E.NONE, -2)
    group = h.group()
    assert group.group_epoch == epoch  # no rebalance: the partitions wait for it
    assert group.members["s1"].member_epoch == -2 and group.state is ConsumerGroupState.RECONCILING
    a.beat()
    assert a.partitions() != [0, 1, 2, 3, 4, 5]

    # Same instance id, new member id: it takes over the old member and its partitions.
    s2 = h.client("s2", instance_id="i-1")
    assert s2.last is not None and s2.last.error is E.NONE
    assert s2.partitions() == kept and s2.epoch == epoch
    group = h.group()
    assert "s1" not in group.members and group.static_members == {"i-1": "s2"}
    assert group.group_epoch == epoch and group.state is ConsumerGroupState.STABLE
    assert_exclusive(a, s2)


def test_static_member_errors() -> None:
    h = ConsumerHarness()
    h.client("s1", instance_id="i-1")
    taken = h.join("s2", instance_id="i-1")
    assert taken.error is E.UNRELEASED_INSTANCE_ID
    assert taken.error_message == (
        "Static member s2 with instance id i-1 cannot join the group because the instance id is owned by s1 member."
    )
    fenced = h.heartbeat("s2", 1, instance_id="i-1")
    assert fenced.error is E.FENCED_INSTANCE_ID
    assert h.heartbeat("s2", -2, instance_id="i-1").error is E.FENCED_INSTANCE_ID
    unknown = h.heartbeat("s3", 1, instance_id="i-9")
    assert (unknown.error, unknown.error_message) == (E.UNKNOWN_MEMBER_ID, "Instance id i-9 is unknown.")


def test_a_static_member_away_longer_than_its_session_is_fenced() -> None:
    h = ConsumerHarness()
    a = h.client("a")
    s = h.client("s1", instance_id="i-1")
    settle(a, s)
    s.leave(-2)
    for _ in range(4):
        h.advance(SESSION_MS // 3)
        a.beat()
    assert "s1" not in h.group().members and h.group().static_members == {}
    settle(a)
    assert a.partitions() == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("seed", range(12))
def test_random_membership_changes_keep_ownership_exclusive(seed: int) -> None:
    """Members join, leave, fall silent and come back in a seeded order; no partition is ever shared."""
    rng = random.Random(seed)
    h = ConsumerHarness({"t": 7, "u": 3}, seed=seed)
    clients: dict[str, Client] = {}
    names = [f"m{i}" for i in range(6)]
    for _ in range(60):
        action = rng.random()
        name = rng.choice(names)
        client = clients.get(name)
        if client is None and action < 0.5:
            topics = rng.choice([("t",), ("t", "u"), ("u",)])
            clients[name] = h.client(name, *topics, rebalance_timeout_ms=REBALANCE_MS)
        elif client is not None and action < 0.1:
            client.leave()
            del clients[name]
        elif client is not None and client.beat(report=rng.random() < 0.9).error is not E.NONE:
            del clients[name]  # fenced (e.g. it did not revoke in time): it is gone
        h.advance(rng.choice([0, 100, 1000, 12_000]))
        alive = {n: c for n, c in clients.items() if n in h.group().members}
        clients = alive
        assert_exclusive(*clients.values())
    settle(*clients.values(), rounds=8)
    if clients:
        group = h.group()
        assert group.state is ConsumerGroupState.STABLE
        subscribed = {t for c in clients.values() for t in c.topics}
        expected = sum(h.topics[t].partitions for t in subscribed)
        assert sum(c.count() for c in clients.values()) == expected
