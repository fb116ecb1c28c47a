"""Committed offsets, persistence and replay, expiry, and the admin APIs of the coordinator."""

from __future__ import annotations

from grouptest_harness import Harness, subscription

from kafkalike.group import CommitPartition, CommitRequest, JoinResult, LeavingMember, Pending, SyncResult
from kafkalike.protocol.errors import ErrorCode as E

DAY_MS = 86_400_000


def test_a_standalone_commit_creates_a_simple_group() -> None:
    h = Harness()
    assert h.commit({("t", 0): 10, ("t", 1): 20}, group="simple", metadata="m") == {
        ("t", 0): E.NONE,
        ("t", 1): E.NONE,
    }
    group = h.coordinator.groups["simple"]
    assert group.state.value == "Empty" and group.protocol_type is None and group.generation_id == 0
    assert h.committed("simple", "t", 0, 1, 2) == [10, 20, -1]
    fetched = h.coordinator.fetch_offsets("simple", [("t", [0])]).topics[0][1][0]
    assert (fetched.metadata, fetched.leader_epoch, fetched.error) == ("m", -1, E.NONE)


def test_fetch_of_an_unknown_group_or_partition_is_minus_one() -> None:
    h = Harness()
    result = h.coordinator.fetch_offsets("nobody", [("t", [0, 1])])
    assert result.error is E.NONE
    assert [(f.partition, f.offset, f.metadata) for f in result.topics[0][1]] == [(0, -1, ""), (1, -1, "")]
    assert h.coordinator.fetch_offsets("nobody", None).topics == ()


def test_fetch_all_lists_every_committed_offset() -> None:
    h = Harness()
    h.commit({("a", 0): 1, ("b", 2): 3, ("a", 1): 2})
    result = h.coordinator.fetch_offsets("g", None)
    assert [(t, [(f.partition, f.offset) for f in fs]) for t, fs in result.topics] == [
        ("a", [(0, 1), (1, 2)]),
        ("b", [(2, 3)]),
    ]


def test_commit_on_an_unknown_group_with_a_generation_is_rejected() -> None:
    h = Harness()
    assert h.commit({("t", 0): 1}, generation=3, member_id="m") == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.commit({("t", 0): 1}, generation=3, member_id="m", v9=True) == {("t", 0): E.GROUP_ID_NOT_FOUND}
    assert "g" not in h.coordinator.groups


def test_member_commit_checks_generation_member_and_state() -> None:
    h = Harness()
    ids = h.stable_group("a", "b")
    a = ids["a"]
    assert h.commit({("t", 0): 5}, generation=1, member_id=a) == {("t", 0): E.NONE}
    assert h.commit({("t", 0): 5}, generation=2, member_id=a) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.commit({("t", 0): 5}, generation=1, member_id="stranger") == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # Without member id and generation, only an empty group takes commits.
    assert h.commit({("t", 0): 5}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.commit({("t", 0): 5}, member_id=a) == {("t", 0): E.ILLEGAL_GENERATION}
    # During PreparingRebalance the current generation may still commit.
    _c, pc = h.join_new(client_id="c")
    assert h.commit({("t", 0): 6}, generation=1, member_id=a) == {("t", 0): E.NONE}
    pa = h.join(member_id=a, client_id="a")
    pb = h.join(member_id=ids["b"], client_id="b")
    assert h.result(pa).generation_id == 2 and h.result(pb) and h.result(pc)
    assert h.state() == "CompletingRebalance"
    assert h.commit({("t", 0): 7}, generation=2, member_id=a) == {("t", 0): E.REBALANCE_IN_PROGRESS}
    assert h.committed("g", "t", 0) == [6]


def test_commit_metadata_too_large_is_refused_per_partition() -> None:
    h = Harness(offset_metadata_max_bytes=4)
    request = CommitRequest(
        "g", -1, "", None, (CommitPartition("t", 0, 1, metadata="12345"), CommitPartition("t", 1, 2, metadata="1234"))
    )
    result = h.coordinator.commit_offsets(request, h.now)
    assert result == [("t", 0, E.OFFSET_METADATA_TOO_LARGE), ("t", 1, E.NONE)]
    assert h.committed("g", "t", 0, 1) == [-1, 2]


def test_a_failed_write_answers_not_coordinator_and_changes_nothing() -> None:
    h = Harness()
    h.store.failing = True
    assert h.commit({("t", 0): 1}) == {("t", 0): E.NOT_COORDINATOR}
    assert "g" not in h.coordinator.groups
    h.store.failing = False
    assert h.commit({("t", 0): 1}) == {("t", 0): E.NONE}


def test_a_failed_assignment_write_fails_the_sync_and_restarts_the_rebalance() -> None:
    h = Harness()
    a, pa = h.join_new(client_id="a")
    b, pb = h.join_new(client_id="b")
    h.settle(pa, pb)
    h.result(pa), h.result(pb)
    follower = h.sync(b, 1)
    h.store.failing = True
    assert h.sync(a, 1, assignments=[(a, b"A"), (b, b"B")]) == SyncResult(E.NOT_COORDINATOR)
    assert h.result(follower) == SyncResult(E.NOT_COORDINATOR)
    assert h.state() == "PreparingRebalance"


def test_offsets_and_groups_survive_a_restart() -> None:
    h = Harness()
    ids = h.stable_group("a", "b", protocols=[("range", subscription("t"))], session_ms=30_000)
    h.commit({("t", 0): 42, ("t", 1): 7}, generation=1, member_id=ids["a"], metadata="meta")
    h.commit({("u", 0): 3}, group="simple")
    h.commit({("u", 0): 4}, group="simple")
    h.restart()
    assert h.committed("g", "t", 0, 1) == [42, 7]
    assert h.committed("simple", "u", 0) == [4]
    group = h.coordinator.groups["g"]
    assert group.state.value == "Stable" and group.generation_id == 1
    assert set(group.members) == set(ids.values()) and group.leader_id == ids["a"]
    assert group.subscribed_topics == frozenset({"t"})
    assert h.sync(ids["b"], 1) == SyncResult(E.NONE, "consumer", "range", b"b")
    assert h.heartbeat(ids["a"], 1) is E.NONE
    # Members that do not heartbeat lose their sessions; the group empties, offsets stay.
    h.advance(30_000)
    assert h.state() == "Empty" and h.coordinator.groups["g"].generation_id == 2
    h.restart()
    assert h.state() == "Empty" and h.committed("g", "t", 0) == [42]


def test_static_replacement_survives_a_restart() -> None:
    h = Harness()
    pa = h.join(instance="ia", client_id="a", session_ms=60_000)
    h.settle(pa)
    a = h.result(pa).member_id
    assert h.result(h.sync(a, 1, instance="ia", assignments=[(a, b"A")])).error is E.NONE
    again = h.join(instance="ia", client_id="a", session_ms=60_000)
    assert isinstance(again, JoinResult)
    h.restart()
    assert h.coordinator.groups["g"].static_members == {"ia": again.member_id}


def test_offsets_of_a_simple_group_expire_after_the_retention() -> None:
    h = Harness(offsets_retention_ms=DAY_MS, offsets_retention_check_interval_ms=600_000)
    h.commit({("t", 0): 1}, group="s")
    h.advance(DAY_MS - 600_000)
    assert h.committed("s", "t", 0) == [1]
    h.commit({("t", 1): 2}, group="s")
    h.advance(600_000)
    assert h.committed("s", "t", 0, 1) == [-1, 2]
    h.advance(DAY_MS)
    assert "s" not in h.coordinator.groups
    h.restart()
    assert "s" not in h.coordinator.groups and h.committed("s", "t", 1) == [-1]


def test_offsets_of_an_empty_consumer_group_expire_from_when_it_emptied() -> None:
    h = Harness(offsets_retention_ms=DAY_MS)
    ids = h.stable_group("a", protocols=[("range", subscription("t"))])
    h.commit({("t", 0): 1}, generation=1, member_id=ids["a"])
    h.advance(DAY_MS)  # the group consumes t: its offsets stay however old
    assert h.coordinator.groups["g"].state.value == "Empty"  # its session ended long ago
    emptied = h.coordinator.groups["g"].state_timestamp_ms
    assert emptied is not None
    h.advance(emptied + DAY_MS - h.now + 600_000)
    assert "g" not in h.coordinator.groups


def test_offsets_of_a_stable_group_expire_only_for_unsubscribed_topics() -> None:
    h = Harness(offsets_retention_ms=DAY_MS, max_session_timeout_ms=3 * DAY_MS)
    ids = h.stable_group("a", protocols=[("range", subscription("t"))], session_ms=3 * DAY_MS)
    h.commit({("t", 0): 1, ("old", 0): 2}, generation=1, member_id=ids["a"])
    h.advance(DAY_MS + 600_000)
    assert h.committed("g", "t", 0) == [1]
    assert h.committed("g", "old", 0) == [-1]


def test_expired_empty_groups_without_offsets_are_dropped() -> None:
    h = Harness()
    ids = h.stable_group("a")
    h.leave(LeavingMember(ids["a"]))
    assert h.state() == "Empty"
    h.advance(600_000)
    assert "g" not in h.coordinator.groups


def test_delete_groups() -> None:
    h = Harness()
    h.stable_group("a", group="busy")
    h.commit({("t", 0): 1}, group="idle")
    results = h.coordinator.delete_groups(["busy", "idle", "ghost"], h.now)
    assert results == [("busy", E.NON_EMPTY_GROUP), ("idle", E.NONE), ("ghost", E.GROUP_ID_NOT_FOUND)]
    assert "idle" not in h.coordinator.groups and h.committed("idle", "t", 0) == [-1]
    h.restart()
    assert "idle" not in h.coordinator.groups and "busy" in h.coordinator.groups


def test_offset_delete_respects_subscriptions() -> None:
    h = Harness()
    ids = h.stable_group("a", protocols=[("range", subscription("t"))])
    h.commit({("t", 0): 1, ("u", 0): 2}, generation=1, member_id=ids["a"])
    error, results = h.coordinator.delete_offsets("g", [("t", [0]), ("u", [0, 1])], h.now)
    assert error is E.NONE
    assert results == [("t", 0, E.GROUP_SUBSCRIBED_TO_TOPIC), ("u", 0, E.NONE), ("u", 1, E.NONE)]
    assert h.committed("g", "u", 0) == [-1] and h.committed("g", "t", 0) == [1]
    assert h.coordinator.delete_offsets("nope", [("t", [0])], h.now) == (E.GROUP_ID_NOT_FOUND, [])
    assert h.coordinator.delete_offsets("", [("t", [0])], h.now) == (E.INVALID_GROUP_ID, [])


def test_offset_delete_on_a_non_consumer_group_needs_it_empty() -> None:
    h = Harness()
    h.stable_group("a", protocol_type="connect")
    assert h.coordinator.delete_offsets("g", [("t", [0])], h.now) == (E.NON_EMPTY_GROUP, [])


def test_deleting_a_topic_forgets_its_offsets() -> None:
    h = Harness()
    h.commit({("t", 0): 1, ("u", 0): 2}, group="x")
    h.commit({("t", 3): 1}, group="y")
    h.coordinator.on_topic_deleted("t", h.now)
    assert h.committed("x", "t", 0) == [-1] and h.committed("y", "t", 3) == [-1]
    assert h.committed("x", "u", 0) == [2]
    h.restart()
    assert h.committed("x", "t", 0) == [-1]


def test_describe_and_list_groups() -> None:
    h = Harness()
    ids = h.stable_group("a", protocols=[("range", b"meta")])
    h.commit({("t", 0): 1}, group="simple")
    described = {d.group_id: d for d in h.coordinator.describe_groups(["g", "simple", "ghost"])}
    g = described["g"]
    assert (g.found, g.state, g.protocol_type, g.protocol_data) == (True, "Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.client_host, m.metadata, m.assignment) for m in g.members] == [
        (ids["a"], "a", "/127.0.0.1", b"meta", b"a")
    ]
    assert (described["simple"].state, described["simple"].protocol_type) == ("Empty", "")
    assert not described["ghost"].found and described["ghost"].state == "Dead"
    listed = {g.group_id: g for g in h.coordinator.list_groups()}
    assert {(g.state, g.protocol_type, g.group_type) for g in listed.values()} == {
        ("Stable", "consumer", "classic"),
        ("Empty", "", "classic"),
    }
    assert [g.group_id for g in h.coordinator.list_groups(states=["STABLE "])] == ["g"]
    assert [g.group_id for g in h.coordinator.list_groups(types=["Classic"])] == ["g", "simple"]
    assert h.coordinator.list_groups(types=["consumer"]) == []
    # While rebalancing, metadata and protocol are not shown.
    h.join_new(client_id="b")
    rebalancing = h.coordinator.describe_groups(["g"])[0]
    assert rebalancing.state == "PreparingRebalance" and rebalancing.protocol_data == ""
    assert rebalancing.members[0].metadata == b""


def test_join_parked_results_are_only_reported_once() -> None:
    h = Harness()
    _, parked = h.join_new()
    assert isinstance(parked, Pending)
    h.settle(parked)
    h.result(parked)
    assert h.coordinator.take_completions() == []
