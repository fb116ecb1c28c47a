"""Heartbeats, session expiry, LeaveGroup and static membership on the pure coordinator."""

from __future__ import annotations

from grouptest_harness import Harness

from kafkalike.group import JoinResult, LeavingMember, Pending, SyncResult
from kafkalike.protocol.errors import ErrorCode as E


def test_heartbeat_answers_by_group_state() -> None:
    h = Harness()
    assert h.heartbeat("x", 0, group="") is E.INVALID_GROUP_ID
    assert h.heartbeat("x", 0, group="missing") is E.UNKNOWN_MEMBER_ID
    a, pa = h.join_new(client_id="a")
    h.settle(pa)
    assert h.state() == "CompletingRebalance"
    assert h.heartbeat(a, 1) is E.NONE
    assert h.heartbeat(a, 0) is E.ILLEGAL_GENERATION
    assert h.heartbeat("stranger", 1) is E.UNKNOWN_MEMBER_ID
    assert h.result(h.sync(a, 1, assignments=[(a, b"x")])).error is E.NONE
    assert h.heartbeat(a, 1) is E.NONE
    assert h.heartbeat(a, 2) is E.ILLEGAL_GENERATION
    h.join_new(client_id="b")
    assert h.heartbeat(a, 1) is E.REBALANCE_IN_PROGRESS


def test_a_silent_member_is_removed_after_its_session_timeout() -> None:
    h = Harness()
    ids = h.stable_group("a", "b", session_ms=10_000)
    for _ in range(2):
        h.advance(4000)
        assert h.heartbeat(ids["a"], 1) is E.NONE
    h.advance(4000)
    # b was last heard of at the end of the sync, 12 s ago: gone after 10 s.
    assert h.heartbeat(ids["a"], 1) is E.REBALANCE_IN_PROGRESS
    assert ids["b"] not in h.coordinator.groups["g"].members
    assert h.state() == "PreparingRebalance"
    rejoin = h.join(member_id=ids["a"], client_id="a", session_ms=10_000)
    result = h.result(rejoin)
    assert result.generation_id == 2 and [m.member_id for m in result.members] == [ids["a"]]


def test_heartbeats_keep_a_member_alive_and_session_expiry_is_exact() -> None:
    h = Harness()
    ids = h.stable_group("a", session_ms=10_000)
    h.advance(9999)
    assert h.heartbeat(ids["a"], 1) is E.NONE
    h.advance(9999)
    assert h.state() == "Stable"
    h.advance(1)
    # The only member is gone: the rebalance completes at once with nobody, the group is empty.
    assert h.state() == "Empty"
    assert h.coordinator.groups["g"].generation_id == 2


def test_offset_commits_count_as_heartbeats() -> None:
    h = Harness()
    ids = h.stable_group("a", session_ms=10_000)
    h.advance(9000)
    assert h.commit({("t", 0): 5}, generation=1, member_id=ids["a"]) == {("t", 0): E.NONE}
    h.advance(9000)
    assert h.state() == "Stable"


def test_a_pending_member_id_expires_when_its_owner_never_comes_back() -> None:
    h = Harness()
    first = h.join(session_ms=10_000)
    assert isinstance(first, JoinResult)
    assert first.member_id in h.coordinator.groups["g"].pending_members
    h.advance(10_000)
    assert not h.coordinator.groups["g"].pending_members
    late = h.join(member_id=first.member_id)
    assert isinstance(late, JoinResult) and late.error is E.UNKNOWN_MEMBER_ID


def test_a_new_member_parked_too_long_is_dropped_with_unknown_member_id() -> None:
    h = Harness(max_session_timeout_ms=1_800_000)
    ids = h.stable_group("a", session_ms=1_000_000, rebalance_ms=600_000)
    b, pb = h.join_new(client_id="b", session_ms=1_000_000, rebalance_ms=600_000)
    h.advance(299_999)
    assert h.parked(pb)
    h.advance(1)
    assert h.result(pb) == JoinResult(E.UNKNOWN_MEMBER_ID)
    assert b not in h.coordinator.groups["g"].members
    assert ids["a"] in h.coordinator.groups["g"].members


def test_leave_group_triggers_a_rebalance_and_reports_each_member() -> None:
    h = Harness()
    ids = h.stable_group("a", "b")
    result = h.leave(LeavingMember(ids["b"]), LeavingMember("stranger"), LeavingMember(ids["a"], "wrong-instance"))
    assert result.error is E.NONE
    assert [e for _, e in result.members] == [E.NONE, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
    assert h.state() == "PreparingRebalance"
    again = h.join(member_id=ids["a"], client_id="a")
    assert h.result(again).generation_id == 2


def test_the_last_member_leaving_empties_the_group_and_persists_it() -> None:
    h = Harness()
    ids = h.stable_group("a")
    writes = h.store.appends
    h.leave(LeavingMember(ids["a"]))
    assert h.state() == "Empty"
    assert h.coordinator.groups["g"].generation_id == 2
    assert h.store.appends == writes + 1
    assert h.heartbeat(ids["a"], 2) is E.UNKNOWN_MEMBER_ID
    assert h.sync(ids["a"], 2) == SyncResult(E.UNKNOWN_MEMBER_ID)


def test_leave_group_edge_cases() -> None:
    h = Harness()
    assert h.leave(LeavingMember("x"), group="").error is E.INVALID_GROUP_ID
    missing = h.leave(LeavingMember("x"), group="nope")
    assert missing.error is E.NONE and missing.members[0][1] is E.UNKNOWN_MEMBER_ID
    pending = h.join()
    assert isinstance(pending, JoinResult)
    gone = h.leave(LeavingMember(pending.member_id))
    assert gone.members[0][1] is E.NONE
    assert not h.coordinator.groups["g"].pending_members


def test_a_leaving_member_parked_in_join_is_answered_unknown_member() -> None:
    h = Harness()
    ids = h.stable_group("a", "b", session_ms=60_000)
    pb = h.join(member_id=ids["b"], client_id="b", session_ms=60_000, protocols=[("range", b"new")])
    assert isinstance(pb, Pending)
    h.leave(LeavingMember(ids["b"]))
    assert h.result(pb) == JoinResult(E.UNKNOWN_MEMBER_ID)


# -- static membership ---------------------------------------------------------------------------


def test_static_members_join_without_member_id_required() -> None:
    h = Harness()
    parked = h.join(instance="i1", client_id="app")
    assert isinstance(parked, Pending)
    h.settle(parked)
    result = h.result(parked)
    assert result.member_id.startswith("i1-")
    assert h.coordinator.groups["g"].static_members == {"i1": result.member_id}


def static_group(h: Harness) -> tuple[str, str]:
    pa = h.join(instance="ia", client_id="a", session_ms=60_000)
    pb = h.join(instance="ib", client_id="b", session_ms=60_000)
    h.settle(pa, pb)
    ra, rb = h.result(pa), h.result(pb)
    a, b = ra.member_id, rb.member_id
    follower = h.sync(b, 1, instance="ib")
    assert h.result(h.sync(a, 1, instance="ia", assignments=[(a, b"A"), (b, b"B")])).error is E.NONE
    assert h.result(follower).assignment == b"B"
    return a, b


def test_a_restarted_static_member_replaces_its_old_id_without_a_rebalance() -> None:
    h = Harness()
    a, b = static_group(h)
    again = h.join(instance="ib", client_id="b", session_ms=60_000)
    assert isinstance(again, JoinResult) and again.error is E.NONE
    new_b = again.member_id
    assert new_b != b and new_b.startswith("ib-")
    assert again.generation_id == 1 and again.leader == a
    assert h.state() == "Stable"
    assert h.sync(new_b, 1, instance="ib") == SyncResult(E.NONE, "consumer", "range", b"B")
    # The old incarnation is fenced everywhere.
    assert h.heartbeat(b, 1, instance="ib") is E.FENCED_INSTANCE_ID
    assert h.sync(b, 1, instance="ib") == SyncResult(E.FENCED_INSTANCE_ID)
    assert h.commit({("t", 0): 1}, generation=1, member_id=b, instance="ib") == {("t", 0): E.FENCED_INSTANCE_ID}
    fenced = h.join(member_id=b, instance="ib", client_id="b", session_ms=60_000)
    assert isinstance(fenced, JoinResult) and fenced.error is E.FENCED_INSTANCE_ID


def test_a_restarted_static_leader_is_not_told_it_leads_before_v9() -> None:
    h = Harness()
    a, _ = static_group(h)
    again = h.join(instance="ia", client_id="a", session_ms=60_000)
    assert isinstance(again, JoinResult)
    assert again.leader == a != again.member_id and again.members == () and not again.skip_assignment
    assert h.coordinator.groups["g"].leader_id == again.member_id


def test_a_restarted_static_leader_skips_assignment_with_v9() -> None:
    h = Harness()
    static_group(h)
    again = h.join(instance="ia", client_id="a", session_ms=60_000, skip_assignment=True)
    assert isinstance(again, JoinResult)
    assert again.leader == again.member_id and again.skip_assignment and len(again.members) == 2


def test_a_static_member_rejoining_with_a_new_preferred_protocol_triggers_a_rebalance() -> None:
    h = Harness()
    both = [("range", b""), ("roundrobin", b"")]
    pa = h.join(instance="ia", client_id="a", session_ms=60_000, protocols=both)
    h.settle(pa)
    a = h.result(pa).member_id
    assert h.result(h.sync(a, 1, instance="ia", assignments=[(a, b"A")])).error is E.NONE
    again = h.join(instance="ia", client_id="a", session_ms=60_000, protocols=both[::-1])
    # The only member is back at once, so the rebalance completes within the call.
    assert isinstance(again, JoinResult)
    assert again.generation_id == 2 and again.protocol_name == "roundrobin"
    assert h.state() == "CompletingRebalance"


def test_static_replacement_during_completing_rebalance_restarts_the_rebalance() -> None:
    h = Harness()
    pa = h.join(instance="ia", client_id="a", session_ms=60_000)
    pb = h.join(instance="ib", client_id="b", session_ms=60_000)
    h.settle(pa, pb)
    b = h.result(pb).member_id
    waiting = h.sync(b, 1, instance="ib")
    again = h.join(instance="ib", client_id="b", session_ms=60_000)
    assert isinstance(again, Pending)
    assert h.result(waiting) == SyncResult(E.FENCED_INSTANCE_ID)
    assert h.state() == "PreparingRebalance"


def test_static_members_that_do_not_rejoin_are_kept_until_their_session_ends() -> None:
    h = Harness()
    a, b = static_group(h)
    h.join_new(client_id="c", session_ms=60_000)
    pa = h.join(member_id=a, instance="ia", client_id="a", session_ms=60_000)
    h.advance(30_000)  # rebalance timeout: b (static) did not rejoin but stays a member
    result = h.result(pa)
    assert b in {m.member_id for m in result.members}
    assert b in h.coordinator.groups["g"].members


def test_admin_removal_of_a_static_member_by_instance_id() -> None:
    h = Harness()
    _a, b = static_group(h)
    result = h.leave(LeavingMember("", "ib"), LeavingMember("", "nobody"))
    assert [e for _, e in result.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert b not in h.coordinator.groups["g"].members
    assert h.state() == "PreparingRebalance"


def test_static_member_with_unknown_instance_is_unknown_member() -> None:
    h = Harness()
    a, _ = static_group(h)
    assert h.heartbeat(a, 1, instance="other") is E.UNKNOWN_MEMBER_ID
