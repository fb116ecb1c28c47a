"""JoinGroup and SyncGroup on the pure coordinator, driven by a hand-moved clock."""

from __future__ import annotations

from grouptest_harness import Harness, subscription

from kafkalike.group import JoinResult, Pending, SyncResult
from kafkalike.protocol.errors import ErrorCode as E


def test_first_join_hands_out_a_member_id_then_waits_for_the_initial_delay() -> None:
    h = Harness()
    first = h.join(client_id="app")
    assert isinstance(first, JoinResult)
    assert first.error is E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-") and len(first.member_id) == len("app-") + 36
    assert h.state() == "Empty"
    parked = h.join(member_id=first.member_id, client_id="app")
    assert isinstance(parked, Pending)
    assert h.state() == "PreparingRebalance"
    h.advance(2999)
    assert h.parked(parked)
    h.advance(1)
    joined = h.result(parked)
    assert joined.error is E.NONE
    assert joined.generation_id == 1
    assert joined.leader == first.member_id
    assert joined.protocol_type == "consumer" and joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [first.member_id]
    assert h.state() == "CompletingRebalance"


def test_join_before_v4_needs_no_member_id_round_trip() -> None:
    h = Harness()
    parked = h.join(require_known=False)
    assert isinstance(parked, Pending)
    h.advance(3000)
    assert h.result(parked).generation_id == 1


def test_initial_delay_is_extended_while_members_keep_joining() -> None:
    h = Harness()
    _, a = h.join_new(client_id="a", rebalance_ms=30_000)
    h.advance(2000)
    _, b = h.join_new(client_id="b", rebalance_ms=30_000)
    h.advance(1000)  # t=3000: b joined during the delay, wait another 3000
    assert h.parked(a) and h.parked(b)
    h.advance(2999)
    assert h.parked(a)
    h.advance(1)  # t=6000
    assert h.result(a).generation_id == h.result(b).generation_id == 1


def test_initial_delay_extensions_stop_at_the_rebalance_timeout() -> None:
    h = Harness()
    parked = [h.join_new(client_id="m0", rebalance_ms=10_000)[1]]
    for i in range(1, 6):  # someone joins every 2 s: t=2000..10000
        h.advance(2000)
        if h.parked(parked[0]):
            parked.append(h.join_new(client_id=f"m{i}", rebalance_ms=10_000)[1])
    # Delays of 3000, 3000, 3000 then the 1000 left of the 10 s rebalance timeout.
    results = [h.result(p) for p in parked]
    assert {r.generation_id for r in results} == {1}
    assert len(results[0].members) == len(parked) == 5


def test_join_errors_before_anything_happens() -> None:
    h = Harness(min_session_timeout_ms=6000, max_session_timeout_ms=60_000)
    assert h.join(group="").error is E.INVALID_GROUP_ID  # type: ignore[union-attr]
    assert h.join(session_ms=5999).error is E.INVALID_SESSION_TIMEOUT  # type: ignore[union-attr]
    assert h.join(session_ms=60_001).error is E.INVALID_SESSION_TIMEOUT  # type: ignore[union-attr]
    unknown = h.join(member_id="ghost-1")
    assert isinstance(unknown, JoinResult) and unknown.error is E.UNKNOWN_MEMBER_ID
    assert unknown.member_id == "ghost-1"
    assert "g" not in h.coordinator.groups


def test_join_with_an_empty_protocol_list_or_type_is_inconsistent() -> None:
    h = Harness()
    assert h.join(protocols=()).error is E.INCONSISTENT_GROUP_PROTOCOL  # type: ignore[union-attr]
    assert h.join(protocol_type="").error is E.INCONSISTENT_GROUP_PROTOCOL  # type: ignore[union-attr]


def test_protocol_is_chosen_by_vote_among_the_common_ones() -> None:
    h = Harness()
    _, a = h.join_new(client_id="a", protocols=[("range", b"1"), ("roundrobin", b"1")])
    _, b = h.join_new(client_id="b", protocols=[("roundrobin", b"2"), ("range", b"2")])
    _, c = h.join_new(client_id="c", protocols=[("roundrobin", b"3"), ("sticky", b"3"), ("range", b"3")])
    h.settle(a, b, c)
    leader = h.result(a)
    assert leader.protocol_name == "roundrobin"
    assert [m.metadata for m in leader.members] == [b"1", b"2", b"3"]
    assert h.result(b).members == () and h.result(c).members == ()


def test_a_joiner_sharing_no_protocol_or_type_with_the_group_is_rejected() -> None:
    h = Harness()
    h.stable_group("a")
    other = h.join(protocols=[("sticky", b"")])
    assert isinstance(other, JoinResult) and other.error is E.INCONSISTENT_GROUP_PROTOCOL
    assert other.member_id == ""
    other_type = h.join(protocol_type="connect")
    assert other_type.error is E.INCONSISTENT_GROUP_PROTOCOL  # type: ignore[union-attr]


def test_sync_delivers_the_leaders_assignment_to_everyone() -> None:
    h = Harness()
    a, pa = h.join_new(client_id="a")
    b, pb = h.join_new(client_id="b")
    h.settle(pa, pb)
    ja, jb = h.result(pa), h.result(pb)
    assert ja.leader == a and len(ja.members) == 2 and jb.members == ()
    follower = h.sync(b, 1)
    assert h.parked(follower)
    leader = h.sync(a, 1, assignments=[(a, b"A"), (b, b"B")])
    assert leader == SyncResult(E.NONE, "consumer", "range", b"A")
    assert h.result(follower) == SyncResult(E.NONE, "consumer", "range", b"B")
    assert h.state() == "Stable"
    # A late SyncGroup in Stable is answered at once; the follower re-asks and gets its share.
    assert h.sync(b, 1) == SyncResult(E.NONE, "consumer", "range", b"B")


def test_members_missing_from_the_leaders_assignment_get_an_empty_one() -> None:
    h = Harness()
    a, pa = h.join_new(client_id="a")
    b, pb = h.join_new(client_id="b")
    h.settle(pa, pb)
    h.result(pa), h.result(pb)
    follower = h.sync(b, 1)
    h.sync(a, 1, assignments=[(a, b"A")])
    assert h.result(follower).assignment == b""


def test_sync_errors_follow_kafka() -> None:
    h = Harness()
    assert h.sync("x", 1, group="") == SyncResult(E.INVALID_GROUP_ID)
    assert h.sync("x", 1, group="nope") == SyncResult(E.UNKNOWN_MEMBER_ID)
    ids = h.stable_group("a", "b")
    a = ids["a"]
    assert h.sync("stranger", 1) == SyncResult(E.UNKNOWN_MEMBER_ID)
    assert h.sync(a, 7) == SyncResult(E.ILLEGAL_GENERATION)
    assert h.sync(a, 1, protocol_name="roundrobin") == SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
    assert h.sync(a, 1, instance="i9") == SyncResult(E.UNKNOWN_MEMBER_ID)
    h.join_new(client_id="c")  # rebalance starts
    assert h.sync(a, 1) == SyncResult(E.REBALANCE_IN_PROGRESS)


def test_a_new_member_triggers_a_rebalance_that_completes_when_all_rejoin() -> None:
    h = Harness()
    ids = h.stable_group("a", "b")
    _c, pc = h.join_new(client_id="c")
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(ids["a"], 1) is E.REBALANCE_IN_PROGRESS
    pa = h.join(member_id=ids["a"], client_id="a")
    assert h.parked(pa)
    pb = h.join(member_id=ids["b"], client_id="b")
    # Not an initial rebalance: it completes as soon as every member is back.
    results = [h.result(p) for p in (pa, pb, pc)]
    assert {r.generation_id for r in results} == {2}
    assert results[0].leader == ids["a"]
    assert len(results[0].members) == 3
    assert h.state() == "CompletingRebalance"


def test_rejoin_in_completing_rebalance_with_same_metadata_returns_the_generation() -> None:
    h = Harness()
    a, pa = h.join_new(client_id="a")
    b, pb = h.join_new(client_id="b")
    h.settle(pa, pb)
    h.result(pa), h.result(pb)
    again = h.join(member_id=a, client_id="a")
    assert isinstance(again, JoinResult) and again.generation_id == 1 and len(again.members) == 2
    follower = h.join(member_id=b, client_id="b")
    assert isinstance(follower, JoinResult) and follower.members == ()
    changed = h.join(member_id=b, client_id="b", protocols=[("range", b"new")])
    assert isinstance(changed, Pending)
    assert h.state() == "PreparingRebalance"


def test_stable_follower_rejoining_unchanged_gets_the_generation_but_leader_rebalances() -> None:
    h = Harness()
    ids = h.stable_group("a", "b")
    follower = h.join(member_id=ids["b"], client_id="b")
    assert isinstance(follower, JoinResult) and follower.generation_id == 1 and follower.error is E.NONE
    assert h.state() == "Stable"
    leader = h.join(member_id=ids["a"], client_id="a")
    assert isinstance(leader, Pending)
    assert h.state() == "PreparingRebalance"


def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() -> None:
    h = Harness()
    ids = h.stable_group("a", "b", rebalance_ms=20_000, session_ms=60_000)
    c, pc = h.join_new(client_id="c", rebalance_ms=20_000, session_ms=60_000)
    pa = h.join(member_id=ids["a"], client_id="a", rebalance_ms=20_000, session_ms=60_000)
    h.advance(19_999)
    assert h.parked(pa)
    h.advance(1)
    ra, _rc = h.result(pa), h.result(pc)
    assert ra.generation_id == 2 and {m.member_id for m in ra.members} == {ids["a"], c}
    assert ids["b"] not in h.coordinator.groups["g"].members
    assert h.heartbeat(ids["b"], 2) is E.UNKNOWN_MEMBER_ID


def test_a_leader_that_does_not_rejoin_is_replaced_by_one_that_did() -> None:
    h = Harness()
    ids = h.stable_group("a", "b", session_ms=60_000)
    pb = h.join(member_id=ids["b"], client_id="b", session_ms=60_000, protocols=[("range", b"changed")])
    assert isinstance(pb, Pending)
    h.advance(30_000)
    rb = h.result(pb)
    assert rb.leader == ids["b"] and rb.generation_id == 2


def test_members_that_never_sync_are_removed_and_the_group_rebalances() -> None:
    h = Harness()
    a, pa = h.join_new(client_id="a", rebalance_ms=20_000, session_ms=60_000)
    b, pb = h.join_new(client_id="b", rebalance_ms=20_000, session_ms=60_000)
    h.settle(pa, pb)
    h.result(pa), h.result(pb)
    sa = h.sync(a, 1, assignments=[(a, b"A"), (b, b"B")])
    assert h.result(sa).error is E.NONE
    h.advance(19_999)
    assert b in h.coordinator.groups["g"].members
    h.advance(1)
    assert b not in h.coordinator.groups["g"].members
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(a, 1) is E.REBALANCE_IN_PROGRESS


def test_group_max_size_turns_extra_members_away() -> None:
    h = Harness(max_size=2)
    h.stable_group("a", "b")
    extra = h.join(client_id="c")
    assert isinstance(extra, JoinResult) and extra.error is E.GROUP_MAX_SIZE_REACHED


def test_consumer_subscriptions_are_parsed_for_the_subscribed_topics() -> None:
    h = Harness()
    h.stable_group("a", protocols=[("range", subscription("t1", "t2", version=3))])
    assert h.coordinator.groups["g"].subscribed_topics == frozenset({"t1", "t2"})


def test_with_no_initial_delay_the_first_join_completes_at_the_next_poll() -> None:
    h = Harness(initial_rebalance_delay_ms=0)
    _, parked = h.join_new()
    assert h.parked(parked)
    h.advance(0)
    assert h.result(parked).generation_id == 1


def test_a_parked_follower_is_told_to_rejoin_when_the_leader_never_syncs() -> None:
    h = Harness()
    a, pa = h.join_new(client_id="a", rebalance_ms=20_000, session_ms=60_000)
    b, pb = h.join_new(client_id="b", rebalance_ms=20_000, session_ms=60_000)
    h.settle(pa, pb)
    assert h.result(pa).leader == a and h.result(pb)
    follower = h.sync(b, 1)
    h.advance(20_000)
    assert h.result(follower) == SyncResult(E.REBALANCE_IN_PROGRESS)
    assert a not in h.coordinator.groups["g"].members
    assert h.state() == "PreparingRebalance"
