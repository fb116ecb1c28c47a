"""CreateTopics, CreatePartitions and DeleteTopics as records: every rule and error code."""

from __future__ import annotations

import base64
import random
import uuid
from typing import Any

import pytest
from controllertest_harness import (
    cluster,
    commit,
    create_partitions,
    create_topics,
    request,
    topic_spec,
)

from kafkalike.configs import TOPIC_CONFIGS
from kafkalike.controller.api_error import ApiError
from kafkalike.controller.configuration_control import ConfigDefaults
from kafkalike.controller.image import TOPIC_RESOURCE, ConfigResource, MetadataImage, PartitionRegistration
from kafkalike.controller.limits import ADDITIONAL_PARTITIONS_OVER_LIMIT, BATCH_TOO_LARGE, PARTITIONS_OVER_LIMIT
from kafkalike.controller.placement import DIRECTORY_MIGRATING
from kafkalike.controller.replication_control import (
    ReplicationControl,
    TopicDefaults,
    partition_record_version,
    random_topic_id,
)
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import MetadataRecordType

T = MetadataRecordType
E = ErrorCode


def control(seed: int = 11, **kwargs: Any) -> ReplicationControl:
    return ReplicationControl(random.Random(seed), **kwargs)


def answers(result: Any) -> list[tuple[str, int, str | None]]:
    return [(r.name, r.error.code, r.error.message) for r in result.reply]


def one_error(image: MetadataImage, topic: dict[str, Any], **kwargs: Any) -> tuple[int, str | None]:
    result = control(**kwargs).create_topics(image, create_topics(topic))
    assert result.records == ()
    [(_, code, message)] = answers(result)
    return code, message


# -- CreateTopics ---------------------------------------------------------------------------


def test_a_created_topic_replays_into_the_image_kafkas_partition_records() -> None:
    image = cluster([1, 2, 3])
    result = control().create_topics(image, create_topics(topic_spec("orders", 6, configs={"retention.ms": "60000"})))
    [created] = result.reply
    assert created.error == ApiError.NONE and created.num_partitions == 6 and created.replication_factor == 1
    assert [r.type for r in result.records] == [T.TOPIC_RECORD, T.CONFIG_RECORD, *[T.PARTITION_RECORD] * 6]
    after = commit(image, result)
    topic = after.topic("orders")
    assert topic is not None and topic.topic_id == created.topic_id
    assert after.topic_configs("orders") == {"retention.ms": "60000"}
    leaders = []
    for index, partition in sorted(topic.partitions.items()):
        assert partition == PartitionRegistration(
            replicas=(partition.leader,),
            isr=(partition.leader,),
            leader=partition.leader,
            leader_epoch=0,
            partition_epoch=0,
            directories=(DIRECTORY_MIGRATING,),
        ), index
        leaders.append(partition.leader)
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]  # two rounds over the three brokers


def test_validate_only_answers_the_same_and_writes_nothing() -> None:
    image = cluster([1])
    spec = topic_spec("t", 3)
    real = control(seed=1).create_topics(image, create_topics(spec))
    check = control(seed=1).create_topics(image, create_topics(spec, validate_only=True))
    assert check.records == () and check.reply == real.reply


def test_defaults_fill_minus_one() -> None:
    image = cluster([1])
    result = control(topic_defaults=TopicDefaults(num_partitions=4)).create_topics(
        image, create_topics(topic_spec("d", -1, rf=-1))
    )
    assert result.reply[0].num_partitions == 4 and result.reply[0].replication_factor == 1


def test_record_versions_follow_the_metadata_version() -> None:
    assert [partition_record_version(v) for v in (7, 16, 17, 22, 23, 25, 0)] == [0, 0, 1, 1, 2, 2, 2]


def test_topic_ids_are_never_reserved_taken_or_printed_with_a_leading_dash() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        topic_id = random_topic_id(rng)
        assert topic_id.int > 1 and not base64.urlsafe_b64encode(topic_id.bytes).startswith(b"-")
    first = random_topic_id(random.Random(5))
    assert random_topic_id(random.Random(5), {first: None}) != first


def test_two_controllers_seeded_alike_do_not_reuse_a_topic_id() -> None:
    image = with_topic([1], "a", 1)
    image = commit(image, control().create_topics(image, create_topics(topic_spec("b", 1))))
    assert {"a", "b"} == set(image.topics_by_name) and len(image.topics_by_id) == 2


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is illegal, it can't be empty"),
        (".", 'Topic name cannot be "." or ".."'),
        ("a" * 250, f"Topic name is illegal, it can't be longer than 249 characters, topic name: {'a' * 250}"),
        (
            "bad/name",
            "Topic name bad/name is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        ),
    ],
)
def test_invalid_names(name: str, message: str) -> None:
    assert one_error(cluster([1]), topic_spec(name)) == (E.INVALID_TOPIC_EXCEPTION, message)


def test_existing_topic_and_colliding_names() -> None:
    image = commit(cluster([1]), control().create_topics(cluster([1]), create_topics(topic_spec("a.b"))))
    assert one_error(image, topic_spec("a.b")) == (E.TOPIC_ALREADY_EXISTS, "Topic 'a.b' already exists.")
    assert one_error(image, topic_spec("a_b")) == (
        E.INVALID_TOPIC_EXCEPTION,
        "Topic 'a_b' collides with existing topic: a.b",
    )
    assert control().create_topics(image, create_topics(topic_spec("ab"))).reply[0].error.ok


def test_names_colliding_within_one_request_create_only_the_first() -> None:
    result = control().create_topics(cluster([1]), create_topics(topic_spec("x_y"), topic_spec("x.y")))
    assert answers(result)[0][1] == E.NONE
    assert answers(result)[1] == ("x.y", E.INVALID_TOPIC_EXCEPTION, "Topic 'x.y' collides with existing topic: x_y")
    assert sum(r.type == T.TOPIC_RECORD for r in result.records) == 1


def test_duplicates_and_the_metadata_topic_are_answered_after_the_others() -> None:
    result = control().create_topics(
        cluster([1]),
        create_topics(topic_spec("z"), topic_spec("__cluster_metadata"), topic_spec("twice"), topic_spec("twice", 2)),
    )
    assert answers(result) == [
        ("z", E.NONE, None),
        ("twice", E.INVALID_REQUEST, "Duplicate topic name."),
        ("__cluster_metadata", E.INVALID_REQUEST, "Creation of internal topic __cluster_metadata is prohibited."),
    ]


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"retention.ms": None}, "Null value not supported for topic configs."),
        ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
        ({"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        (
            {"cleanup.policy": "bogus"},
            "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete",
        ),
    ],
)
def test_bad_configs(configs: dict[str, str | None], message: str) -> None:
    assert one_error(cluster([1]), topic_spec("c", configs=configs)) == (E.INVALID_CONFIG, message)


def test_configs_a_log_could_not_run_with_over_the_brokers_defaults() -> None:
    def broken_default(name: str) -> str | None:
        return "0" if name == "segment.ms" else TOPIC_CONFIGS[name].default

    defaults = ConfigDefaults(topic_default=broken_default)
    assert one_error(cluster([1]), topic_spec("c"), config_defaults=defaults) == (
        E.INVALID_CONFIG,
        "segment.ms must be positive",
    )
    # A topic that sets its own good value stands.
    ok = control(config_defaults=defaults).create_topics(
        cluster([1]), create_topics(topic_spec("c", configs={"segment.ms": "1000"}))
    )
    assert ok.reply[0].error.ok


@pytest.mark.parametrize(
    ("partitions", "rf", "code", "message"),
    [
        (
            1,
            0,
            E.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        ),
        (
            1,
            -2,
            E.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        ),
        (0, 1, E.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."),
        (-2, 1, E.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."),
        (
            1,
            4,
            E.INVALID_REPLICATION_FACTOR,
            "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached "
            "because only 3 broker(s) are registered or some brokers have all their log directories cordoned.",
        ),
    ],
)
def test_counts_that_cannot_be(partitions: int, rf: int, code: int, message: str) -> None:
    assert one_error(cluster([1, 2, 3]), topic_spec("n", partitions, rf=rf)) == (code, message)


def test_a_replicated_topic_places_every_replica_and_its_isr_is_the_active_ones() -> None:
    image = cluster([1, 2, 3, 4], fenced=[4])
    result = control().create_topics(image, create_topics(topic_spec("r", 4, rf=3)))
    [created] = result.reply
    assert created.error.ok and created.replication_factor == 3
    topic = commit(image, result).topic("r")
    assert topic is not None
    for partition in topic.partitions.values():
        assert len(set(partition.replicas)) == 3
        assert partition.isr == tuple(b for b in partition.replicas if b != 4)
        assert partition.leader == partition.isr[0] and partition.leader != 4
    # Beyond the registered brokers Kafka's placer refuses.
    code, message = one_error(image, topic_spec("r2", 1, rf=5))
    assert code == E.INVALID_REPLICATION_FACTOR and "replication factor of 5 cannot be reached" in (message or "")


def test_manual_assignments_with_several_replicas() -> None:
    image = cluster([1, 2, 3], fenced=[2])
    spec = topic_spec("m3", -1, rf=-1, assignments=[[2, 1, 3], [3, 2, 1]])
    topic = commit(image, control().create_topics(image, create_topics(spec))).topic("m3")
    assert topic is not None
    assert [(p.replicas, p.isr, p.leader) for _, p in sorted(topic.partitions.items())] == [
        ((2, 1, 3), (1, 3), 1),  # the first active replica leads
        ((3, 2, 1), (3, 1), 3),
    ]
    duplicated = topic_spec("d", -1, rf=-1, assignments=[[1, 3, 1]])
    assert one_error(image, duplicated) == (
        E.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes the broker 1 more than once.",
    )
    grown = control().create_partitions(
        commit(image, control().create_topics(image, create_topics(spec))), create_partitions(("m3", 3, [[1, 3, 2]]))
    )
    assert answers(grown) == [("m3", E.NONE, None)]
    assert grown.records[0].replicas == [1, 3, 2] and grown.records[0].isr == [1, 3]


def test_no_usable_broker() -> None:
    fenced = "Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have all their log directories cordoned."
    assert one_error(cluster([1, 2], fenced=[1, 2]), topic_spec("f")) == (E.INVALID_REPLICATION_FACTOR, fenced)
    assert one_error(cluster([]), topic_spec("f")) == (E.INVALID_REPLICATION_FACTOR, fenced)
    # In controlled shutdown: not usable at all, so not counted as registered either.
    assert one_error(cluster([1], shutting_down=[1]), topic_spec("f")) == (E.INVALID_REPLICATION_FACTOR, fenced)


def test_partitions_avoid_fenced_and_shutting_down_brokers() -> None:
    image = cluster([1, 2, 3, 4], fenced=[2], shutting_down=[3])
    result = control().create_topics(image, create_topics(topic_spec("p", 20)))
    topic = commit(image, result).topic("p")
    assert topic is not None and {p.leader for p in topic.partitions.values()} == {1, 4}


def test_manual_assignments_are_honoured() -> None:
    image = cluster([1, 2, 3])
    result = control().create_topics(image, create_topics(topic_spec("m", -1, rf=-1, assignments=[[3], [1], [3]])))
    topic = commit(image, result).topic("m")
    assert topic is not None
    assert [(p.replicas, p.isr, p.leader) for _, p in sorted(topic.partitions.items())] == [
        ((3,), (3,), 3),
        ((1,), (1,), 1),
        ((3,), (3,), 3),
    ]


@pytest.mark.parametrize(
    ("spec", "code", "message"),
    [
        (
            topic_spec("m", 1, rf=-1, assignments=[[1]]),
            E.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ),
        (
            topic_spec("m", -1, rf=1, assignments=[[1]]),
            E.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ),
        (
            topic_spec("m", -1, rf=-1, assignments=[(0, [1]), (0, [2])]),
            E.INVALID_REPLICA_ASSIGNMENT,
            "Found multiple manual partition assignments for partition 0",
        ),
        (
            topic_spec("m", -1, rf=-1, assignments=[(0, [1]), (2, [1])]),
            E.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            topic_spec("m", -1, rf=-1, assignments=[[7]]),
            E.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 7, but no such broker is registered.",
        ),
        (
            topic_spec("m", -1, rf=-1, assignments=[[1], []]),
            E.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            topic_spec("m", -1, rf=-1, assignments=[[2]]),
            E.INVALID_REPLICA_ASSIGNMENT,
            "All brokers specified in the manual partition assignment for partition 0 are fenced or in "
            "controlled shutdown.",
        ),
    ],
)
def test_manual_assignment_errors(spec: dict[str, Any], code: int, message: str) -> None:
    assert one_error(cluster([1, 2], fenced=[2]), spec) == (code, message)


def test_a_request_for_too_many_partitions_is_refused_whole() -> None:
    result = control().create_topics(cluster([1]), create_topics(topic_spec("a", 6000), topic_spec("b", 5000)))
    assert result.records == ()
    assert answers(result) == [(n, E.POLICY_VIOLATION, PARTITIONS_OVER_LIMIT) for n in ("a", "b")]


def test_a_request_whose_records_overflow_one_operation_is_refused_whole() -> None:
    # 5,000 + 4,999 partitions pass the partition count; with their topic and config records
    # they are 10,002 records.
    result = control().create_topics(
        cluster([1]),
        create_topics(topic_spec("a", 5000), topic_spec("b", 4999, configs={"retention.ms": "1"}), topic_spec("c", 0)),
    )
    assert result.records == ()
    assert answers(result) == [(n, E.POLICY_VIOLATION, BATCH_TOO_LARGE) for n in ("a", "b", "c")]


# -- CreatePartitions -----------------------------------------------------------------------


def with_topic(brokers: list[int], name: str = "g", partitions: int = 2, **kwargs: Any) -> MetadataImage:
    image = cluster(brokers, **kwargs)
    return commit(image, control().create_topics(image, create_topics(topic_spec(name, partitions))))


def test_growing_a_topic_adds_partition_records_from_the_next_index() -> None:
    image = with_topic([1, 2, 3])
    result = control().create_partitions(image, create_partitions(("g", 5)))
    assert answers(result) == [("g", E.NONE, None)]
    assert [(r.type, r.partition_id) for r in result.records] == [(T.PARTITION_RECORD, i) for i in (2, 3, 4)]
    topic = commit(image, result).topic("g")
    assert topic is not None and sorted(topic.partitions) == [0, 1, 2, 3, 4]
    assert control().create_partitions(image, create_partitions(("g", 5), validate_only=True)).records == ()


def test_growing_with_manual_assignments() -> None:
    image = with_topic([1, 2, 3])
    result = control().create_partitions(image, create_partitions(("g", 4, [[2], [2]])))
    topic = commit(image, result).topic("g")
    assert topic is not None and [topic.partitions[i].leader for i in (2, 3)] == [2, 2]


@pytest.mark.parametrize(
    ("grow", "code", "message"),
    [
        (("nope", 3), E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
        (("g", 2), E.INVALID_PARTITIONS, "Topic already has 2 partition(s)."),
        (("g", 1), E.INVALID_PARTITIONS, "The topic g currently has 2 partition(s); 1 would not be an increase."),
        (
            ("g", 4, [[1]]),
            E.INVALID_REPLICA_ASSIGNMENT,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            ("g", 3, [[9]]),
            E.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (
            ("g", 3, [[1, 2]]),
            E.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes a partition with 2 replica(s), but this is not consistent "
            "with previous partitions, which have 1 replica(s).",
        ),
    ],
)
def test_create_partitions_errors(grow: Any, code: int, message: str) -> None:
    result = control().create_partitions(with_topic([1, 2]), create_partitions(grow))
    assert result.records == () and answers(result) == [(grow[0], code, message)]


def test_growing_when_every_broker_is_fenced() -> None:
    image = with_topic([1])
    image = commit(
        image, type("R", (), {"records": tuple(__import__("controllertest_harness").broker_records([1], fenced=[1]))})()
    )
    result = control().create_partitions(image, create_partitions(("g", 3)))
    assert answers(result) == [
        (
            "g",
            E.INVALID_REPLICATION_FACTOR,
            "Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have all their log directories cordoned.",
        )
    ]


def test_duplicates_and_the_operation_limit() -> None:
    image = with_topic([1], "a", 1)
    image = commit(image, control().create_topics(image, create_topics(topic_spec("b", 1))))
    result = control().create_partitions(image, create_partitions(("a", 3), ("a", 4), ("b", 10_002)))
    assert answers(result) == [
        ("a", E.INVALID_REQUEST, "Duplicate topic name."),
        ("b", E.POLICY_VIOLATION, ADDITIONAL_PARTITIONS_OVER_LIMIT),  # 10,001 new partitions (Kafka 4.4)
    ]
    assert result.records == ()


# -- DeleteTopics ---------------------------------------------------------------------------


def delete_request(*topics: tuple[str | None, uuid.UUID], version: int = 6) -> Any:
    if version >= 6:
        return request(20, version, {"topics": [{"name": n, "topic_id": i} for n, i in topics], "timeout_ms": 1})
    return request(20, version, {"topic_names": [n for n, _ in topics], "timeout_ms": 1})


ZERO = uuid.UUID(int=0)


def test_deleting_by_name_and_by_id_removes_topics_and_their_configs() -> None:
    image = cluster([1])
    image = commit(
        image,
        control().create_topics(image, create_topics(topic_spec("a", configs={"retention.ms": "5"}), topic_spec("b"))),
    )
    b_id = image.topics_by_name["b"].topic_id
    result = control().delete_topics(image, delete_request(("a", ZERO), (None, b_id)), 6)
    assert [(r.name, r.error) for r in result.reply] == [("a", ApiError.NONE), ("b", ApiError.NONE)]
    after = commit(image, result)
    assert not after.topics_by_name and ConfigResource(TOPIC_RESOURCE, "a") not in after.configs


def test_deleting_by_name_in_old_versions() -> None:
    image = with_topic([1], "old", 1)
    result = control().delete_topics(image, delete_request(("old", ZERO), ("missing", ZERO), version=5), 5)
    assert [(r.name, r.error.code) for r in result.reply] == [
        ("old", E.NONE),
        ("missing", E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert [r.type for r in result.records] == [T.REMOVE_TOPIC_RECORD]


def test_delete_errors() -> None:
    image = with_topic([1], "d", 1)
    d_id = image.topics_by_name["d"].topic_id
    other = uuid.UUID(int=99)
    cases = [
        ((None, ZERO), E.INVALID_REQUEST, "Neither topic name nor id were specified."),
        (("d", d_id), E.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        ((None, other), E.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
        (("gone", ZERO), E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
    ]
    for entry, code, message in cases:
        result = control().delete_topics(image, delete_request(entry), 6)
        assert result.records == () and [(r.error.code, r.error.message) for r in result.reply] == [(code, message)]
    twice = control().delete_topics(image, delete_request(("d", ZERO), ("d", ZERO)), 6)
    assert [(r.name, r.error.message) for r in twice.reply] == [("d", "Duplicate topic name.")]
    assert twice.records == ()
    both = control().delete_topics(image, delete_request(("d", ZERO), (None, d_id)), 6)
    assert {r.error.message for r in both.reply} == {"The provided topic name maps to an ID that was already supplied."}
    assert both.records == ()


def test_deletion_disabled_refuses_every_entry() -> None:
    image = with_topic([1], "kept", 1)
    disabled = control(delete_topic_enable=False)
    result = disabled.delete_topics(image, delete_request(("kept", ZERO), ("nope", ZERO)), 6)
    assert result.records == ()
    assert [(r.name, r.error) for r in result.reply] == [
        ("kept", ApiError(E.TOPIC_DELETION_DISABLED)),
        ("nope", ApiError(E.TOPIC_DELETION_DISABLED)),
    ]
    old = disabled.delete_topics(image, delete_request(("kept", ZERO), version=2), 2)
    assert [r.error for r in old.reply] == [ApiError(E.INVALID_REQUEST, "Topic deletion is disabled.")]


def test_checks_run_in_kafkas_order() -> None:
    image = with_topic([1], "taken", 1)
    bad_config = {"no.such.config": "1"}
    # The name and existence come before configs, configs before counts.
    assert one_error(image, topic_spec("taken", configs=bad_config))[0] == E.TOPIC_ALREADY_EXISTS
    assert one_error(image, topic_spec("bad/name", configs=bad_config))[0] == E.INVALID_TOPIC_EXCEPTION
    assert one_error(image, topic_spec("fresh", 0, rf=0, configs=bad_config))[0] == E.INVALID_CONFIG
    assert one_error(image, topic_spec("fresh", 0, rf=0))[0] == E.INVALID_REPLICATION_FACTOR


def test_a_huge_partition_count_is_refused_before_anything_is_placed() -> None:
    image = with_topic([1, 2, 3])
    result = control().create_partitions(image, create_partitions(("g", 2**31 - 1)))
    assert answers(result) == [("g", E.POLICY_VIOLATION, ADDITIONAL_PARTITIONS_OVER_LIMIT)] and result.records == ()


def test_partitions_added_past_the_limit_in_all_grow_no_topic() -> None:
    image = with_topic([1], "a", 1)
    image = commit(image, control().create_topics(image, create_topics(topic_spec("b", 1))))
    # Kafka 4.4 adds up the new partitions of every topic first (5,999 + 5,999): none grows.
    result = control().create_partitions(image, create_partitions(("a", 6000), ("b", 6000), ("missing", 9000)))
    assert sorted(answers(result)) == [
        (name, E.POLICY_VIOLATION, ADDITIONAL_PARTITIONS_OVER_LIMIT) for name in ("a", "b", "missing")
    ]
    assert result.records == ()
    # Exactly 10,000 in all fits; a topic that does not exist adds nothing to the count.
    fits = control().create_partitions(image, create_partitions(("a", 5001), ("b", 5001), ("missing", 9000)))
    assert sorted(c for _, c, _ in answers(fits)) == [E.NONE, E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert len(fits.records) == 10_000
