"""The replication throttle configs as Apache Kafka 4.4 answers them: the broker rates
(``leader.replication.throttled.rate``, ``follower.replication.throttled.rate``,
``replica.alter.log.dirs.io.max.bytes.per.second``) are listed only where set, with no default
synonym and no documentation, and validated as longs of at least 0; the topics' throttled
replica lists take ``*`` or partition:broker pairs."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalike.protocol.errors import ErrorCode
from tests.server.conftest import RunningBroker
from tests.server.test_broker_basics import _create

BROKER, TOPIC = 4, 2
DYNAMIC_BROKER, DYNAMIC_DEFAULT = 2, 3
LONG_TYPE = 5
SET, DELETE, APPEND = 0, 1, 2
RATES = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)


def describe(resource_type: int, name: str, keys: list[str] | None = None) -> dict[str, Any]:
    resource = {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}
    return {"resources": [resource], "include_synonyms": True, "include_documentation": True}


def alter(resource_type: int, name: str, key: str, value: str | None, op: int = SET) -> dict[str, Any]:
    entry = {"name": key, "config_operation": op, "value": value}
    return {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configs": [entry]}],
        "validate_only": False,
    }


async def test_the_rates_are_listed_only_where_set(running: RunningBroker) -> None:
    client = await running.client()
    node = str(running.broker.node_id)
    for name in (node, ""):
        (listed,) = (await client.request(32, 4, describe(BROKER, name))).results
        assert not {c.name for c in listed.configs} & set(RATES)
        (asked,) = (await client.request(32, 4, describe(BROKER, name, list(RATES)))).results
        assert (asked.error_code, list(asked.configs)) == (0, [])

    rate = RATES[0]
    assert (await client.request(44, 1, alter(BROKER, node, rate, "1000000"))).responses[0].error_code == 0
    assert (await client.request(44, 1, alter(BROKER, "", rate, "2000000"))).responses[0].error_code == 0
    (result,) = (await client.request(32, 4, describe(BROKER, node))).results
    (entry,) = [c for c in result.configs if c.name == rate]
    assert (entry.value, entry.config_source, entry.read_only, entry.config_type, entry.documentation) == (
        "1000000",
        DYNAMIC_BROKER,
        False,
        LONG_TYPE,
        None,
    )
    # No default synonym: Kafka's static config definitions do not have these.
    assert [(s.value, s.source) for s in entry.synonyms] == [("1000000", DYNAMIC_BROKER), ("2000000", DYNAMIC_DEFAULT)]
    (default,) = (await client.request(32, 4, describe(BROKER, "", [rate]))).results
    assert [(c.value, c.config_source) for c in default.configs] == [("2000000", DYNAMIC_DEFAULT)]

    for name in (node, ""):
        assert (await client.request(44, 1, alter(BROKER, name, rate, None, DELETE))).responses[0].error_code == 0
    (cleared,) = (await client.request(32, 4, describe(BROKER, node, [rate]))).results
    assert list(cleared.configs) == []


@pytest.mark.parametrize(
    ("value", "op", "error"),
    [
        ("0", SET, (0, None)),
        ("-1", SET, (ErrorCode.INVALID_REQUEST, "Invalid value -1 for configuration {name}: Value must be at least 0")),
        (
            "abc",
            SET,
            (ErrorCode.INVALID_REQUEST, "Invalid value abc for configuration {name}: Not a number of type LONG"),
        ),
        ("", SET, (ErrorCode.INVALID_REQUEST, "Invalid value  for configuration {name}: Not a number of type LONG")),
        (None, SET, (ErrorCode.INVALID_REQUEST, "Null value not supported for : {name}")),
        ("5", APPEND, (ErrorCode.INVALID_CONFIG, "Unknown config name: {name}")),
        (None, DELETE, (0, None)),  # unset: nothing to delete, no error
    ],
)
async def test_a_rate_is_a_long_of_at_least_0(running: RunningBroker, value: str | None, op: int, error: Any) -> None:
    client = await running.client()
    for name in RATES:
        (answer,) = (await client.request(44, 1, alter(BROKER, str(running.broker.node_id), name, value, op))).responses
        code, message = error
        assert (answer.error_code, answer.error_message) == (code, message and message.format(name=name))


@pytest.mark.parametrize("value", ["*", "0:1,1:1", "", "0:2"])
async def test_a_throttled_replica_list_takes_a_star_or_pairs(running: RunningBroker, value: str) -> None:
    client = await running.client()
    await _create(client, "listed")
    for name in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
        assert (await client.request(44, 1, alter(TOPIC, "listed", name, value))).responses[0].error_code == 0
        (result,) = (await client.request(32, 4, describe(TOPIC, "listed", [name]))).results
        assert [c.value for c in result.configs] == [value]


@pytest.mark.parametrize("value", ["0:1:2", "x", "*,0:1"])
async def test_a_throttled_replica_list_refuses_anything_else(running: RunningBroker, value: str) -> None:
    client = await running.client()
    await _create(client, "refusing")
    name = "leader.replication.throttled.replicas"
    (answer,) = (await client.request(44, 1, alter(TOPIC, "refusing", name, value))).responses
    shown = ", ".join(value.split(","))
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.INVALID_CONFIG,
        f"Invalid value [{shown}] for configuration {name}: {name} must be the literal '*' or a list of replicas "
        "in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
    )


async def test_another_brokers_resource_is_refused_here_and_the_rest_forwarded(running: RunningBroker) -> None:
    client = await running.client()
    node = running.broker.node_id
    await _create(client, "kept")
    rate = RATES[0]
    resources = [
        (BROKER, str(node + 6), rate, "5"),
        (TOPIC, "kept", "retention.ms", "60000"),
        (BROKER, "one", rate, "5"),
        (BROKER, str(node), rate, "7"),
    ]
    body = {
        "resources": [
            {"resource_type": t, "resource_name": n, "configs": [{"name": k, "config_operation": SET, "value": v}]}
            for t, n, k, v in resources
        ],
        "validate_only": False,
    }
    answered = (await client.request(44, 1, body)).responses
    assert [(r.resource_name, r.error_code, r.error_message) for r in answered] == [
        (str(node + 6), ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node}, but received {node + 6}"),
        ("kept", 0, None),
        ("one", ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: one"),
        (str(node), 0, None),
    ]
    legacy = {
        "resources": [
            {"resource_type": BROKER, "resource_name": str(node + 6), "configs": [{"name": rate, "value": "5"}]}
        ],
        "validate_only": False,
    }
    (refused,) = (await client.request(33, 2, legacy)).responses
    assert refused.error_code == ErrorCode.INVALID_REQUEST
    for name, message in (
        (str(node + 6), f"Unexpected broker id, expected {node} or empty string, but received {node + 6}"),
        ("one", "Broker id must be an integer, but it is: one"),
    ):
        (described,) = (await client.request(32, 4, describe(BROKER, name))).results
        assert (described.error_code, described.error_message) == (ErrorCode.INVALID_REQUEST, message)
