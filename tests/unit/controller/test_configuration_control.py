"""IncrementalAlterConfigs and AlterConfigs as ConfigRecords, for topics and brokers."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest
from controllertest_harness import cluster, commit, create_topics, request, topic_spec

from kafkalike.controller.configuration_control import ConfigDefaults, ConfigurationControl
from kafkalike.controller.image import BROKER_RESOURCE, TOPIC_RESOURCE, ConfigResource, MetadataImage
from kafkalike.controller.replication_control import ReplicationControl
from kafkalike.protocol.errors import ErrorCode

E = ErrorCode
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def base_image() -> MetadataImage:
    image = cluster([1, 2])
    topics = ReplicationControl(random.Random(1)).create_topics(
        image, create_topics(topic_spec("t", configs={"retention.ms": "1000", "cleanup.policy": "delete"}))
    )
    return commit(image, topics)


def incremental(*resources: tuple[int, str, list[tuple[str, int, str | None]]], validate_only: bool = False) -> Any:
    return request(
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": t,
                    "resource_name": n,
                    "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
                }
                for t, n, ops in resources
            ],
            "validate_only": validate_only,
        },
    )


def legacy(*resources: tuple[int, str, Mapping[str, str | None]], validate_only: bool = False) -> Any:
    return request(
        33,
        2,
        {
            "resources": [
                {"resource_type": t, "resource_name": n, "configs": [{"name": k, "value": v} for k, v in c.items()]}
                for t, n, c in resources
            ],
            "validate_only": validate_only,
        },
    )


def control(**kwargs: Any) -> ConfigurationControl:
    return ConfigurationControl(ConfigDefaults(**kwargs), node_id=1)


def errors(result: Any) -> list[tuple[int, str | None]]:
    return [(r.error.code, r.error.message) for r in result.reply]


TOPIC = ConfigResource(TOPIC_RESOURCE, "t")


def test_set_delete_append_and_subtract_on_a_topic() -> None:
    image = base_image()
    result = control().incremental_alter_configs(
        image,
        incremental(
            (
                TOPIC_RESOURCE,
                "t",
                [
                    ("retention.ms", DELETE, None),
                    ("segment.ms", SET, "5000"),
                    ("cleanup.policy", APPEND, "compact"),
                ],
            )
        ),
    )
    assert errors(result) == [(E.NONE, None)]
    assert commit(image, result).configs[TOPIC] == {"segment.ms": "5000", "cleanup.policy": "delete,compact"}
    after = commit(image, result)
    again = control().incremental_alter_configs(
        after, incremental((TOPIC_RESOURCE, "t", [("cleanup.policy", SUBTRACT, "delete")]))
    )
    assert commit(after, again).configs[TOPIC]["cleanup.policy"] == "compact"


def test_an_unchanged_topic_value_writes_no_record_a_broker_value_does() -> None:
    image = base_image()
    same = control().incremental_alter_configs(
        image, incremental((TOPIC_RESOURCE, "t", [("retention.ms", SET, "1000")]))
    )
    assert errors(same) == [(E.NONE, None)] and same.records == ()
    broker = ConfigResource(BROKER_RESOURCE, "")
    image = commit(
        image, control().incremental_alter_configs(image, incremental((4, "", [("log.retention.ms", SET, "9")])))
    )
    assert image.configs[broker] == {"log.retention.ms": "9"}
    again = control().incremental_alter_configs(image, incremental((4, "", [("log.retention.ms", SET, "9")])))
    assert len(again.records) == 1  # brokers reload on every record (KAFKA-14136)


def test_append_to_an_unset_list_starts_from_its_default() -> None:
    image = base_image()
    result = control().incremental_alter_configs(
        image, incremental((TOPIC_RESOURCE, "t", [("follower.replication.throttled.replicas", APPEND, "0:1")]))
    )
    assert commit(image, result).configs[TOPIC]["follower.replication.throttled.replicas"] == "0:1"


def test_alter_configs_replaces_the_whole_set() -> None:
    image = base_image()
    result = control().alter_configs(image, legacy((TOPIC_RESOURCE, "t", {"segment.ms": "7000"})))
    assert errors(result) == [(E.NONE, None)]
    assert commit(image, result).configs[TOPIC] == {"segment.ms": "7000"}
    cleared = control().alter_configs(image, legacy((TOPIC_RESOURCE, "t", {})))
    assert TOPIC not in commit(image, cleared).configs


def test_per_broker_and_cluster_default_resources() -> None:
    image = base_image()
    result = control().incremental_alter_configs(
        image,
        incremental(
            (BROKER_RESOURCE, "", [("log.retention.ms", SET, "100")]),
            (BROKER_RESOURCE, "2", [("log.retention.ms", SET, "200")]),
            (BROKER_RESOURCE, "7", [("log.retention.ms", SET, "300")]),
        ),
    )
    assert errors(result) == [(E.NONE, None), (E.NONE, None), (E.INVALID_REQUEST, "Unexpected broker id 7")]
    after = commit(image, result)
    assert after.configs[ConfigResource(BROKER_RESOURCE, "")] == {"log.retention.ms": "100"}
    assert after.configs[ConfigResource(BROKER_RESOURCE, "2")] == {"log.retention.ms": "200"}


def test_validate_only_checks_and_writes_nothing() -> None:
    image = base_image()
    ok = control().incremental_alter_configs(
        image, incremental((TOPIC_RESOURCE, "t", [("segment.ms", SET, "1")]), validate_only=True)
    )
    assert errors(ok) == [(E.NONE, None)] and ok.records == ()
    bad = control().incremental_alter_configs(
        image, incremental((TOPIC_RESOURCE, "t", [("segment.ms", SET, "x")]), validate_only=True)
    )
    assert bad.reply[0].error.code == E.INVALID_CONFIG


@pytest.mark.parametrize(
    ("resource", "code", "message"),
    [
        (
            (TOPIC_RESOURCE, "nope", [("segment.ms", SET, "1")]),
            E.UNKNOWN_TOPIC_OR_PARTITION,
            "Topic nope does not exist",
        ),
        ((9, "x", [("a", SET, "1")]), E.INVALID_REQUEST, "Unsupported resource type 9"),
        ((BROKER_RESOURCE, "x1", [("log.retention.ms", SET, "1")]), E.INVALID_REQUEST, "Unexpected broker id x1"),
        (
            (TOPIC_RESOURCE, "t", [("segment.ms", SET, "1"), ("segment.ms", DELETE, None)]),
            E.INVALID_REQUEST,
            "Error due to duplicate config keys",
        ),
        (
            (TOPIC_RESOURCE, "t", [("segment.ms", SET, None)]),
            E.INVALID_REQUEST,
            "Null value not supported for : segment.ms",
        ),
        ((TOPIC_RESOURCE, "t", [("segment.ms", 7, "1")]), E.INVALID_REQUEST, "Unknown config operation 7"),
        (
            (TOPIC_RESOURCE, "t", [("segment.ms", APPEND, "1")]),
            E.INVALID_CONFIG,
            "Config value append is not allowed for config key: segment.ms",
        ),
        (
            (TOPIC_RESOURCE, "t", [("segment.ms", SUBTRACT, "1")]),
            E.INVALID_CONFIG,
            "Config value subtract is not allowed for config key: segment.ms",
        ),
        ((TOPIC_RESOURCE, "t", [("no.such", SET, "1")]), E.INVALID_CONFIG, "Unknown topic config name: no.such"),
        (
            (TOPIC_RESOURCE, "t", [("segment.ms", SET, "x")]),
            E.INVALID_CONFIG,
            "Invalid value x for configuration segment.ms: Not a number of type LONG",
        ),
        ((BROKER_RESOURCE, "", [("no.such", SET, "1")]), E.INVALID_CONFIG, "Unknown broker config name: no.such"),
        (
            (BROKER_RESOURCE, "", [("node.id", SET, "3")]),
            E.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(node.id)",
        ),
        (
            (BROKER_RESOURCE, "", [("log.retention.ms", SET, "x")]),
            E.INVALID_REQUEST,
            "Invalid value x for configuration log.retention.ms: Not a number of type LONG",
        ),
    ],
)
def test_incremental_errors(resource: Any, code: int, message: str) -> None:
    result = control().incremental_alter_configs(base_image(), incremental(resource))
    assert result.records == () and errors(result) == [(code, message)]


def test_legacy_errors() -> None:
    image = base_image()
    null = control().alter_configs(image, legacy((TOPIC_RESOURCE, "t", {"segment.ms": None})))
    assert errors(null) == [(E.INVALID_REQUEST, "Null value not supported for AlterConfigs")]
    twice = control().alter_configs(
        image, legacy((TOPIC_RESOURCE, "t", {}), (TOPIC_RESOURCE, "t", {"segment.ms": "1"}))
    )
    assert errors(twice) == [(E.INVALID_REQUEST, "Duplicate resource.")] * 2 and twice.records == ()


def test_one_bad_resource_does_not_stop_the_others() -> None:
    image = base_image()
    result = control().incremental_alter_configs(
        image,
        incremental(
            (TOPIC_RESOURCE, "t", [("segment.ms", SET, "x")]), (BROKER_RESOURCE, "1", [("log.retention.ms", SET, "5")])
        ),
    )
    assert [e[0] for e in errors(result)] == [E.INVALID_CONFIG, E.NONE]
    assert [(r.resource_name, r.name) for r in result.records] == [("1", "log.retention.ms")]


def test_the_brokers_own_checks_and_topic_defaults_are_injected() -> None:
    image = base_image()
    refusing = control(broker_problem=lambda name, dynamic: "no" if "log.retention.ms" in dynamic else None)
    result = refusing.incremental_alter_configs(
        image, incremental((BROKER_RESOURCE, "", [("log.retention.ms", SET, "5")]))
    )
    assert errors(result) == [(E.INVALID_REQUEST, "no")]
    broken = control(topic_default=lambda name: "0" if name == "segment.ms" else None)
    result = broken.incremental_alter_configs(image, incremental((TOPIC_RESOURCE, "t", [("retention.ms", SET, "5")])))
    assert errors(result) == [(E.INVALID_CONFIG, "segment.ms must be positive")]
    appended = control(broker_value=lambda name: "delete,compact" if name == "log.cleanup.policy" else None)
    result = appended.incremental_alter_configs(
        image, incremental((BROKER_RESOURCE, "", [("log.cleanup.policy", SUBTRACT, "compact")]))
    )
    assert errors(result) == [(E.NONE, None)] and [r.value for r in result.records] == ["delete"]
