"""Offsets and the other group APIs meeting KIP-848 consumer groups."""

from __future__ import annotations

from consumer_harness import ConsumerHarness, topic_id

from kafkalike.group import CommitPartition, CommitRequest, JoinRequest, LeavingMember, SyncRequest
from kafkalike.protocol.errors import ErrorCode as E

T = topic_id("t")


def commit(h: ConsumerHarness, member_id: str, epoch: int, *, v9: bool = True, offset: int = 10) -> E:
    request = CommitRequest(
        "g",
        epoch,
        member_id,
        None,
        (CommitPartition("t", 0, offset),),
        group_id_not_found_error=v9,
        supports_member_epoch=v9,
    )
    [(_, _, error)] = h.coordinator.commit_offsets(request, h.now)
    return error


def commit_both(h: ConsumerHarness) -> None:
    """m1 (epoch 1) commits to t-0 and old-0."""
    parts = (CommitPartition("t", 0, 1), CommitPartition("old", 0, 2))
    request = CommitRequest("g", 1, "m1", None, parts, group_id_not_found_error=True, supports_member_epoch=True)
    assert h.coordinator.commit_offsets(request, h.now) == [("t", 0, E.NONE), ("old", 0, E.NONE)]


def committed(h: ConsumerHarness, group: str = "g") -> int:
    return h.coordinator.fetch_offsets(group, [("t", [0])]).topics[0][1][0].offset


def test_offset_commit_checks_the_member_epoch() -> None:
    h = ConsumerHarness()
    h.join("m1")
    assert commit(h, "m1", 1) is E.NONE
    assert committed(h) == 10
    assert commit(h, "m1", 0) is E.STALE_MEMBER_EPOCH
    assert commit(h, "m1", 2) is E.STALE_MEMBER_EPOCH
    assert commit(h, "m2", 1) is E.UNKNOWN_MEMBER_ID
    assert commit(h, "", -1) is E.UNKNOWN_MEMBER_ID  # an admin cannot commit while members are in
    assert commit(h, "m1", 1, v9=False) is E.UNSUPPORTED_VERSION
    assert committed(h) == 10


def test_an_empty_consumer_group_takes_commits_without_a_member() -> None:
    h = ConsumerHarness()
    h.join("m1")
    h.heartbeat("m1", -1)
    assert h.group().is_empty
    assert commit(h, "", -1, offset=77) is E.NONE
    assert committed(h) == 77


def test_offset_fetch_checks_the_member_when_it_names_one() -> None:
    h = ConsumerHarness()
    h.join("m1")
    commit(h, "m1", 1)
    fetch = h.coordinator.fetch_offsets
    assert fetch("g", [("t", [0])], "m1", 1).topics[0][1][0].offset == 10
    assert fetch("g", [("t", [0])], None, -1).topics[0][1][0].offset == 10  # an admin client
    assert fetch("g", [("t", [0])], "m1", 3).error is E.STALE_MEMBER_EPOCH
    assert fetch("g", None, "nobody", 1).error is E.UNKNOWN_MEMBER_ID
    assert fetch("g", None, "", -1).error is E.UNKNOWN_MEMBER_ID


def test_offset_delete_refuses_subscribed_topics_only() -> None:
    h = ConsumerHarness({"t": 1, "old": 1})
    h.join("m1", "t")
    commit_both(h)
    error, results = h.coordinator.delete_offsets("g", [("t", [0]), ("old", [0])], h.now)
    assert error is E.NONE
    assert results == [("t", 0, E.GROUP_SUBSCRIBED_TO_TOPIC), ("old", 0, E.NONE)]
    fetched = h.coordinator.fetch_offsets("g", None)
    assert [(t, [o.offset for o in offsets]) for t, offsets in fetched.topics] == [("t", [1])]


def test_list_describe_and_delete() -> None:
    h = ConsumerHarness()
    h.join("m1")
    join = JoinRequest("classic-g", "", None, "c", "/h", 10_000, 10_000, "consumer", (("range", b""),), False)
    h.coordinator.join_group(join, h.now)
    listed = {g.group_id: (g.state, g.group_type, g.protocol_type) for g in h.coordinator.list_groups()}
    assert listed["g"] == ("Stable", "consumer", "consumer")
    assert listed["classic-g"][1] == "classic"
    assert [g.group_id for g in h.coordinator.list_groups(types=["Consumer"])] == ["g"]
    assert [g.group_id for g in h.coordinator.list_groups(types=["classic"])] == ["classic-g"]
    assert [g.group_id for g in h.coordinator.list_groups(states=["stable"], types=["consumer"])] == ["g"]
    assert h.coordinator.list_groups(states=["assigning"]) == []

    [described] = h.coordinator.consumer_group_describe(["g"])
    assert (described.state, described.group_epoch, described.assignment_epoch) == ("Stable", 1, 1)
    assert described.assignor_name == "uniform"
    [member] = described.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == ("m1", 1, ("t",))
    assert [(p.topic_name, p.partitions) for p in member.assignment] == [("t", (0, 1, 2, 3, 4, 5))]
    assert member.target_assignment == member.assignment
    missing, classic = h.coordinator.consumer_group_describe(["nope", "classic-g"])
    assert (missing.error, missing.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")
    assert classic.error_message == "Group classic-g is not a consumer group."
    # DescribeGroups is for classic groups: a consumer group is not one (Kafka answers the same).
    assert not h.coordinator.describe_groups(["g"])[0].found

    commit(h, "m1", 1)
    assert h.coordinator.delete_groups(["g"], h.now) == [("g", E.NON_EMPTY_GROUP)]
    h.heartbeat("m1", -1)
    assert h.coordinator.delete_groups(["g"], h.now) == [("g", E.NONE)]
    assert "g" not in h.coordinator.consumer_groups and committed(h) == -1
    assert h.coordinator.delete_groups(["g"], h.now) == [("g", E.GROUP_ID_NOT_FOUND)]
    h.restart()
    assert "g" not in h.coordinator.consumer_groups and committed(h) == -1


def test_classic_requests_to_a_consumer_group() -> None:
    h = ConsumerHarness()
    h.join("m1")
    h.join("s1", instance_id="i-1")
    c = h.coordinator
    join = JoinRequest("g", "", None, "c", "/h", 10_000, 10_000, "consumer", (("range", b""),), False)
    refused = c.join_group(join, h.now)
    assert getattr(refused, "error", None) is E.INCONSISTENT_GROUP_PROTOCOL
    sync = SyncRequest("g", 1, "m1", None, "consumer", "range", ())
    assert getattr(c.sync_group(sync, h.now), "error", None) is E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", "m1", None, 1, h.now) is E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", "other", "i-1", 1, h.now) is E.FENCED_INSTANCE_ID
    left = c.leave_group("g", [LeavingMember("m1"), LeavingMember("", "i-1"), LeavingMember("x", "i-1")], h.now)
    assert [e for _, e in left.members] == [E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID]
    assert h.group().members.keys() == {"m1", "s1"}


def test_a_classic_join_turns_an_empty_consumer_group_into_a_classic_one() -> None:
    h = ConsumerHarness()
    h.join("m1")
    commit(h, "m1", 1, offset=5)
    h.heartbeat("m1", -1)
    join = JoinRequest("g", "", None, "c", "/h", 10_000, 10_000, "consumer", (("range", b""),), False)
    h.coordinator.join_group(join, h.now)
    assert "g" not in h.coordinator.consumer_groups and "g" in h.coordinator.groups
    assert committed(h) == 5
    h.restart()
    assert "g" not in h.coordinator.consumer_groups and committed(h) == 5


def test_offsets_of_unsubscribed_topics_expire_then_the_empty_group_goes() -> None:
    h = ConsumerHarness({"t": 1, "old": 1}, session_timeout_ms=30 * 24 * 3_600_000)
    h.join("m1", "t")
    commit_both(h)
    week_ms = h.coordinator.config.offsets_retention_ms
    for _ in range(3):  # the member keeps heartbeating, so only "old" can expire
        h.advance(week_ms // 2)
        h.heartbeat("m1", 1)
    fetched = h.coordinator.fetch_offsets("g", None)
    assert [(t, [o.offset for o in offsets]) for t, offsets in fetched.topics] == [("t", [1])]
    h.heartbeat("m1", -1)
    h.advance(week_ms + h.coordinator.config.offsets_retention_check_interval_ms)
    assert "g" not in h.coordinator.consumer_groups
