"""The controller answers single-node requests as the running broker does.

Each case sends the same requests to a real broker (the single node, whose handlers forward them
to its in-process controller) and to a ``QuorumController`` of its own over the image the node
started from, with the broker's own defaults and config checks injected, and compares every
topic's or resource's error code and message. The cases are those the differential tests against
Apache Kafka pin down (compat_tests/differential/), so that nothing between a client and the
controller changes what clients see.

Manual replica assignments over registered brokers, names colliding by '.'/'_', a name deleted
twice in one request, a resource twice in one AlterConfigs and ``__cluster_metadata`` are in the
controller's unit tests, with Kafka's answers.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from controllertest_harness import request, topic_spec

from kafkalike.controller.configuration_control import ConfigDefaults
from kafkalike.controller.delta import replay_records
from kafkalike.controller.quorum_controller import QuorumController
from kafkalike.controller.replication_control import TopicDefaults
from kafkalike.server.broker import Broker
from tests.server.conftest import serving

ZERO = uuid.UUID(int=0)
Request = tuple[int, int, dict[str, Any]]


def create(*topics: dict[str, Any], validate_only: bool = False, version: int = 7) -> Request:
    return 19, version, {"topics": list(topics), "timeout_ms": 5000, "validate_only": validate_only}


def grow(*topics: tuple[str, int], validate_only: bool = False) -> Request:
    body = [{"name": n, "count": c, "assignments": None} for n, c in topics]
    return 37, 3, {"topics": body, "timeout_ms": 5000, "validate_only": validate_only}


def delete(*names: str) -> Request:
    return 20, 6, {"topics": [{"name": n, "topic_id": ZERO} for n in names], "timeout_ms": 5000}


def incremental(
    resource_type: int, name: str, *ops: tuple[str, int, str | None], validate_only: bool = False
) -> Request:
    configs = [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]
    resources = [{"resource_type": resource_type, "resource_name": name, "configs": configs}]
    return 44, 1, {"resources": resources, "validate_only": validate_only}


def alter(resource_type: int, name: str, configs: dict[str, str | None]) -> Request:
    listed = [{"name": k, "value": v} for k, v in configs.items()]
    return (
        33,
        2,
        {
            "resources": [{"resource_type": resource_type, "resource_name": name, "configs": listed}],
            "validate_only": False,
        },
    )


SETUP = [create(topic_spec("existing", 2, configs={"retention.ms": "1000"}))]
SET, DELETE, APPEND = 0, 1, 2
CASES: dict[str, Request] = {
    **{
        f"name-{i}": create(topic_spec(bad))
        for i, bad in enumerate(["bad/name", "..", ".", "a" * 250, "with space", "", "tab\tname", "x:y"])
    },
    "twice": create(topic_spec("twice"), topic_spec("once"), topic_spec("twice", 2)),
    "existing": create(topic_spec("existing", 2)),
    **{
        f"config-{k}": create(topic_spec("cfg", 1, configs=c))
        for k, c in {
            "unknown": {"no.such.config": "1"},
            "nan": {"retention.ms": "abc"},
            "enum": {"cleanup.policy": "bogus"},
            "negative": {"max.message.bytes": "-5"},
            "null": {"retention.ms": None},
            "codec": {"compression.type": "brotli"},
            "min-isr-0": {"min.insync.replicas": "0"},
        }.items()
    },
    **{f"rf{rf}": create(topic_spec("rf", 1, rf=rf)) for rf in (3, 0, -2)},
    **{f"partitions{p}": create(topic_spec("p", p)) for p in (0, -2)},
    "defaults": create(topic_spec("defaults", -1, rf=-1)),
    "validate-only": create(topic_spec("vo", 4, configs={"retention.ms": "60000"}), validate_only=True),
    "too-many-partitions": create(topic_spec("big1", 6000), topic_spec("big2", 4001)),
    "grow": grow(("existing", 4)),
    "grow-unknown": grow(("nope", 4)),
    "grow-same": grow(("existing", 2)),
    "grow-less": grow(("existing", 1)),
    "grow-twice": grow(("existing", 3), ("existing", 5)),
    "grow-validate-only": grow(("existing", 9), validate_only=True),
    "delete": delete("existing"),
    "delete-unknown": delete("nope"),
    "set-topic": incremental(2, "existing", ("segment.ms", SET, "5000"), ("retention.ms", DELETE, None)),
    "append-topic": incremental(2, "existing", ("cleanup.policy", APPEND, "compact")),
    "unknown-topic": incremental(2, "nope", ("segment.ms", SET, "1")),
    "duplicate-keys": incremental(2, "existing", ("segment.ms", SET, "1"), ("segment.ms", DELETE, None)),
    "null-set": incremental(2, "existing", ("segment.ms", SET, None)),
    "append-not-list": incremental(2, "existing", ("segment.ms", APPEND, "1")),
    "unknown-topic-config": incremental(2, "existing", ("no.such", SET, "1")),
    "bad-topic-value": incremental(2, "existing", ("segment.ms", SET, "x")),
    "cluster-default": incremental(4, "", ("log.retention.ms", SET, "100")),
    "own-broker": incremental(4, "1", ("log.retention.ms", SET, "100")),
    # Another broker's resource never reaches the controller from here: the broker refuses it
    # first, as Kafka's ConfigAdminManager does (tests/server/test_replication_throttle_configs.py).
    "static-broker-config": incremental(4, "", ("node.id", SET, "3")),
    "bad-broker-value": incremental(4, "", ("log.retention.ms", SET, "x")),
    "unknown-broker-config": incremental(4, "", ("no.such", SET, "1")),
    "broker-requirement": incremental(4, "", ("log.roll.ms", SET, "0")),
    "broker-local-retention": incremental(4, "1", ("log.local.retention.ms", SET, "-1")),
    "broker-listener": incremental(4, "", ("max.connections", SET, "0")),
    "unsupported-resource": incremental(9, "x", ("a", SET, "1")),
    "alter-topic": alter(2, "existing", {"segment.ms": "7000"}),
    "alter-null": alter(2, "existing", {"segment.ms": None}),
    "alter-unknown-topic": alter(2, "nope", {"segment.ms": "1"}),
    "alter-broker": alter(4, "", {"log.retention.ms": "5"}),
}


def outcomes(api_key: int, response: Any) -> list[tuple[str, int, str | None]]:
    """Each topic's or resource's (name, error code, message), in answer order."""
    if api_key == 19:
        return [(t.name, t.error_code, t.error_message) for t in response.topics]
    if api_key == 37:
        return [(t.name, t.error_code, t.error_message) for t in response.results]
    if api_key == 20:
        return [(t.name, t.error_code, t.error_message) for t in response.responses]
    return [(r.resource_name, r.error_code, r.error_message) for r in response.responses]


def controller_outcomes(api_key: int, reply: Any) -> list[tuple[str, int, str | None]]:
    if api_key in (44, 33):
        return [(r.resource_name, r.error.code, r.error.message) for r in reply]
    return [(r.name, r.error.code, r.error.message) for r in reply]


def new_controller(broker: Broker) -> QuorumController:
    config = broker.config
    return QuorumController(
        node_id=broker.node_id,
        rng=random.Random(1),
        # As the node's controller activated it: bootstrap, features (eligible leader replicas
        # with its cluster-level min.insync.replicas), the broker registered.
        image=broker.publisher.image,
        topic_defaults=TopicDefaults(config.get_int("num.partitions"), config.get_int("default.replication.factor")),
        config_defaults=ConfigDefaults(
            topic_default=config.topic_default, broker_value=config.get, broker_problem=broker.broker_config_problem
        ),
    )


def run_controller(controller: QuorumController, api_key: int, version: int, body: dict[str, Any]) -> Any:
    operations: dict[int, Callable[[Any], Any]] = {
        19: lambda r: controller.create_topics(r, now_ms=0),
        37: lambda r: controller.create_partitions(r, now_ms=0),
        20: lambda r: controller.delete_topics(r, version, now_ms=0),
        44: lambda r: controller.incremental_alter_configs(r, now_ms=0),
        33: lambda r: controller.alter_configs(r, now_ms=0),
    }
    result = operations[api_key](request(api_key, version, body))
    # Committed at once, as the single node's metadata log commits what it appends.
    controller.loader.image = replay_records(controller.loader.image, result.records)
    controller.revert()
    return result.reply


async def differences(tmp_path: Path, case: str, make: Callable[[Broker], QuorumController]) -> list[str]:
    """Where the controller ``make`` builds answers ``case`` unlike the running broker."""
    found = []
    async with serving(tmp_path, ephemeral=True) as running:
        client = await running.client()
        controller = make(running.broker)
        for api_key, version, body in [*SETUP, CASES[case]]:
            today = outcomes(api_key, await client.request(api_key, version, body))
            new = controller_outcomes(api_key, run_controller(controller, api_key, version, body))
            if new != today:
                found.append(f"api {api_key}: today {today}, new {new}")
        # What each side now holds agrees too.
        held = running.broker.controller.image.topics
        for name in set(held) | set(controller.image.topics_by_name):
            topic = controller.image.topics_by_name.get(name)
            if name not in held or topic is None:
                found.append(f"topic {name} only on one side")
            elif (
                len(topic.partitions) != held[name].partitions
                or controller.image.topic_configs(name) != held[name].configs
            ):
                found.append(
                    f"topic {name}: {len(topic.partitions)} partitions {dict(topic.partitions and controller.image.topic_configs(name))}"
                )
    return found


@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_same_answers_as_todays_broker(tmp_path: Path, case: str) -> None:
    assert await differences(tmp_path, case, new_controller) == []


async def test_the_comparison_catches_a_controller_that_answers_otherwise(tmp_path: Path) -> None:
    """Negative controls: a controller that skips the broker's own config checks, or has other
    defaults, is caught."""

    def without_broker_checks(broker: Broker) -> QuorumController:
        controller = new_controller(broker)
        controller.configuration.defaults = ConfigDefaults(topic_default=broker.config.topic_default)
        return controller

    def other_defaults(broker: Broker) -> QuorumController:
        controller = new_controller(broker)
        controller.replication.topic_defaults = TopicDefaults(num_partitions=3)
        return controller

    broker_checked = [c for c in CASES if CASES[c][0] == 44 and CASES[c][2]["resources"][0]["resource_type"] == 4]
    caught = [await differences(tmp_path / c, c, without_broker_checks) for c in broker_checked]
    assert any(caught), "no broker case depends on the broker's own checks"
    assert await differences(tmp_path / "defaults", "defaults", other_defaults)
