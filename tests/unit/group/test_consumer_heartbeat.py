"""ConsumerGroupHeartbeat: joining, validation, epochs and the errors Kafka returns where it does."""

from __future__ import annotations

from typing import Any

import pytest
from consumer_harness import REBALANCE_MS, ConsumerHarness, topic_id

from kafkalike.group import CommitPartition, CommitRequest, read_records
from kafkalike.group.consumer_group import ConsumerGroupState, MemberState
from kafkalike.group.consumer_membership import ConsumerGroupConfig
from kafkalike.group.consumer_records import (
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscriptionRecord,
    PartitionMetadataRecord,
    TargetEpochRecord,
    TargetMemberRecord,
    decode_record,
)
from kafkalike.group.records import partition_for
from kafkalike.protocol.errors import ErrorCode as E

T = topic_id("t")


def test_a_member_joins_and_gets_every_partition() -> None:
    h = ConsumerHarness()
    result = h.join("m1")
    assert (result.error, result.member_id, result.member_epoch) == (E.NONE, "m1", 1)
    assert result.heartbeat_interval_ms == 5000
    assert result.assignment == ((T, (0, 1, 2, 3, 4, 5)),)
    group = h.group()
    assert (group.state, group.group_epoch, group.assignment_epoch) == (ConsumerGroupState.STABLE, 1, 1)
    assert group.subscription_metadata["t"].partitions == 6
    assert all(group.partition_epoch(T, p) == 1 for p in range(6))


def test_the_join_is_persisted_as_kafkas_records_in_order() -> None:
    h = ConsumerHarness()
    h.join("m1")
    plog = h.logs[partition_for("g", 4)]
    types = [type(decode_record(k, v)) for _, (k, v) in read_records(plog)]
    assert types == [
        MemberSubscriptionRecord,
        PartitionMetadataRecord,
        GroupEpochRecord,
        TargetMemberRecord,
        TargetEpochRecord,
        CurrentAssignmentRecord,
    ]


def test_v0_members_get_their_id_from_the_broker() -> None:
    first = ConsumerHarness(seed=7).join("", member_id_required=False)
    again = ConsumerHarness(seed=7).join("", member_id_required=False)
    assert first.error is E.NONE and len(first.member_id or "") == 22
    assert first.member_id == again.member_id  # the seeded random.Random, not the global one
    v1 = ConsumerHarness().join("")
    assert (v1.error, v1.error_message) == (E.INVALID_REQUEST, "MemberId can't be empty.")


@pytest.mark.parametrize(
    ("epoch", "fields", "message"),
    [
        (0, {"group": " "}, "GroupId can't be empty."),
        (0, {"instance_id": ""}, "InstanceId can't be empty."),
        (0, {"rack_id": " "}, "RackId can't be empty."),
        (0, {"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        (0, {"owned_partitions": None}, "TopicPartitions must be empty when (re-)joining."),
        (0, {"owned_partitions": ((topic_id("t"), (0,)),)}, "TopicPartitions must be empty when (re-)joining."),
        (
            0,
            {"subscribed_topic_names": None},
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
        ),
        (-2, {}, "InstanceId can't be null."),
        (-3, {}, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(epoch: int, fields: dict[str, Any], message: str) -> None:
    h = ConsumerHarness()
    group = fields.pop("group", "g")
    base: dict[str, Any] = {
        "rebalance_timeout_ms": REBALANCE_MS,
        "subscribed_topic_names": ("t",),
        "owned_partitions": (),
        "member_id_required": True,
    }
    base.update(fields)
    result = h.heartbeat("m1", epoch, group, **base)
    assert (result.error, result.error_message) == (E.INVALID_REQUEST, message)


def test_config_is_checked() -> None:
    assert ConsumerGroupConfig(assignors=("org.apache.kafka.coordinator.group.assignor.RangeAssignor",)).assignors == (
        "range",
    )
    with pytest.raises(ValueError):
        ConsumerGroupConfig(heartbeat_interval_ms=45_000)
    with pytest.raises(ValueError):
        ConsumerGroupConfig(assignors=("sticky",))


def test_unsupported_assignor_and_invalid_regex() -> None:
    h = ConsumerHarness(assignors=("range",))
    result = h.join("m1", server_assignor="uniform")
    assert result.error is E.UNSUPPORTED_ASSIGNOR
    assert result.error_message == "ServerAssignor uniform is not supported. Supported assignors: range."
    result = h.join("m1", subscribed_topic_names=None, subscribed_topic_regex="(")
    assert result.error is E.INVALID_REGULAR_EXPRESSION


def test_group_max_size() -> None:
    h = ConsumerHarness(max_size=2)
    assert h.join("m1").error is E.NONE
    assert h.join("m2").error is E.NONE
    full = h.join("m3")
    assert full.error is E.GROUP_MAX_SIZE_REACHED
    assert full.error_message == "The consumer group has reached its maximum capacity of 2 members."
    assert h.heartbeat("m1", 1, owned_partitions=()).error is E.NONE  # members already in still heartbeat


def test_unknown_group_and_unknown_member() -> None:
    h = ConsumerHarness()
    assert h.heartbeat("m1", 1, "nope").error is E.GROUP_ID_NOT_FOUND
    h.join("m1")
    unknown = h.heartbeat("m2", 1)
    assert (unknown.error, unknown.error_message) == (E.UNKNOWN_MEMBER_ID, "Member m2 is not a member of group g.")
    assert h.heartbeat("m2", -1).error is E.UNKNOWN_MEMBER_ID


def test_fenced_member_epochs() -> None:
    h = ConsumerHarness()
    h.join("m1")  # epoch 1, previous 0
    h.join("m2")  # group epoch 2: m1 must give up half
    owned_all = ((T, (0, 1, 2, 3, 4, 5)),)
    assert h.heartbeat("m1", 1, owned_partitions=owned_all).member_epoch == 1  # revoking
    owned_half = ((T, (0, 1, 2)),)
    assert h.heartbeat("m1", 1, owned_partitions=owned_half).member_epoch == 2
    assert h.group().members["m1"].previous_member_epoch == 1
    ahead = h.heartbeat("m1", 3)
    assert ahead.error is E.FENCED_MEMBER_EPOCH and "greater member epoch (3)" in (ahead.error_message or "")
    # The previous epoch is accepted while the member owns nothing beyond its assignment: the
    # response that moved it on may have been lost.
    assert h.heartbeat("m1", 1, owned_partitions=owned_half).error is E.NONE
    assert h.heartbeat("m1", 1, owned_partitions=owned_all).error is E.FENCED_MEMBER_EPOCH
    assert h.heartbeat("m1", 1).error is E.FENCED_MEMBER_EPOCH  # owned partitions not reported
    assert h.heartbeat("m1", 0, owned_partitions=(), rebalance_timeout_ms=1, subscribed_topic_names=("t",)).error is (
        E.FENCED_MEMBER_EPOCH
    )


def test_assignment_only_sent_when_changed_or_asked_for() -> None:
    h = ConsumerHarness()
    h.join("m1")
    partial = h.heartbeat("m1", 1)
    assert partial.error is E.NONE and partial.assignment is None
    full = h.heartbeat(
        "m1", 1, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=("t",), owned_partitions=((T, (0,)),)
    )
    assert full.assignment == ((T, (0, 1, 2, 3, 4, 5)),)


def test_subscription_change_bumps_the_epoch_and_reassigns() -> None:
    h = ConsumerHarness({"t": 2, "u": 2})
    h.join("m1", "t")
    moved = h.heartbeat("m1", 1, subscribed_topic_names=("u",), owned_partitions=((T, (0, 1)),))
    # t's partitions are still owned: revoke them first, u's come once that is confirmed.
    assert (moved.member_epoch, moved.assignment) == (1, ())
    assert h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    done = h.heartbeat("m1", 1, owned_partitions=())
    assert (done.member_epoch, done.assignment) == (2, ((topic_id("u"), (0, 1)),))


def test_new_partitions_and_topics_are_picked_up_at_the_next_heartbeat() -> None:
    h = ConsumerHarness({"t": 2})
    assert h.join("m1", "t", "later").assignment == ((T, (0, 1)),)
    h.topics["t"].partitions = 3
    grown = h.heartbeat("m1", 1)
    assert (grown.member_epoch, grown.assignment) == (2, ((T, (0, 1, 2)),))
    h.create_topic("later", 1)
    created = h.heartbeat("m1", 2)
    assert created.member_epoch == 3
    assert dict(created.assignment or ()) == {T: (0, 1, 2), topic_id("later"): (0,)}


def test_regex_subscription() -> None:
    h = ConsumerHarness({"orders-eu": 1, "orders-us": 1, "audit": 1, "__consumer_offsets": 4})
    joined = h.join("m1", subscribed_topic_names=None, subscribed_topic_regex="orders-.*")
    assert {t for t, _ in joined.assignment or ()} == {topic_id("orders-eu"), topic_id("orders-us")}
    h.create_topic("orders-jp", 2)
    assert h.heartbeat("m1", 1).member_epoch == 2
    assert h.group().is_subscribed_to_topic("orders-jp") and not h.group().is_subscribed_to_topic("audit")


def test_the_group_prefers_the_assignor_its_members_ask_for() -> None:
    h = ConsumerHarness({"t": 4})
    h.join("m1", server_assignor="range")
    h.join("m2", server_assignor="range")
    h.heartbeat("m1", 1, owned_partitions=((T, (0, 1, 2, 3)),))
    assert h.heartbeat("m1", 1, owned_partitions=((T, (0, 1)),)).member_epoch == 2
    assert h.group().target == {"m1": {T: frozenset({0, 1})}, "m2": {T: frozenset({2, 3})}}
    assert h.coordinator.consumer_group_describe(["g"])[0].assignor_name == "range"


def test_classic_groups_and_consumer_groups_share_the_namespace() -> None:
    h = ConsumerHarness()
    # A "simple" group holding offsets only gives way to a consumer group; its offsets stay.
    commit = CommitRequest("g", -1, "", None, (CommitPartition("t", 0, 42),))
    assert h.coordinator.commit_offsets(commit, h.now) == [("t", 0, E.NONE)]
    assert "g" in h.coordinator.groups
    assert h.join("m1").error is E.NONE
    assert "g" not in h.coordinator.groups and "g" in h.coordinator.consumer_groups
    fetched = h.coordinator.fetch_offsets("g", [("t", [0])])
    assert fetched.topics[0][1][0].offset == 42
    h.restart()
    assert "g" not in h.coordinator.groups and h.group().members.keys() == {"m1"}
