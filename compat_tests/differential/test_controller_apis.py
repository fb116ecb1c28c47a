"""The controller's own APIs on its CONTROLLER listener, against an Apache Kafka controller
(``process.roles=controller``, one voter, the jars in $KAFKALIKE_AK_LIB): the same broker
registrations, heartbeats, topic creations, producer-id allocation and unregistration sent to
both get the same answers (error codes and messages, fencing and catch-up flags, partition
counts, producer-id blocks). Broker epochs are offsets in each one's metadata log, which hold
different records before them (Kafka's NoOps, its controller registrations): only compared as
"a new, larger one"."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from compat_tests.differential.conftest import AK_BEFORE_4_1, AK_LIB
from kafkalike.protocol.codec import Message
from kafkalike.testing.apache_kafka import ApacheKafkaCluster
from kafkalike.testing.controller_quorum import ControllerQuorum
from kafkalike.testing.controller_requests import heartbeat, registration
from kafkalike.testing.quorum import CLUSTER_ID
from kafkalike.testing.wire_client import AsyncWireClient

pytestmark = pytest.mark.differential
DEADLINE_S = 60
# Wide enough for both finalized sets (Kafka 4.4 finalizes later metadata versions and more
# features than kafkalike knows).
FEATURES = [
    {"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 100},
    {"name": "group.version", "min_supported_version": 0, "max_supported_version": 1},
    {"name": "transaction.version", "min_supported_version": 0, "max_supported_version": 2},
    {"name": "eligible.leader.replicas.version", "min_supported_version": 0, "max_supported_version": 1},
    {"name": "share.version", "min_supported_version": 0, "max_supported_version": 2},
    {"name": "streams.version", "min_supported_version": 0, "max_supported_version": 1},
]


@pytest.fixture(scope="module")
def kafka_controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafkaCluster]:
    with ApacheKafkaCluster(
        1, data_dir=tmp_path_factory.mktemp("ak-controller"), lib_dir=Path(AK_LIB), roles="controller"
    ) as running:
        yield running


class Side:
    def __init__(self, client: AsyncWireClient, cluster_id: str) -> None:
        self.client = client
        self.cluster_id = cluster_id
        self.epochs: dict[int, int] = {}

    def registration(self, broker_id: int, **changes: Any) -> dict[str, Any]:
        body = registration(broker_id, self.cluster_id)
        body["features"] = FEATURES
        body.update(changes)
        return body


def topic(name: str, partitions: int = 3, factor: int = 1) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": factor, "assignments": [], "configs": []}


def create(*topics: dict[str, Any]) -> dict[str, Any]:
    return {"topics": list(topics), "timeout_ms": 10000, "validate_only": False}


# Kafka 4.2+ (KIP-1066) names cordoned log directories in the placement refusals; kafkalike
# words them as 4.0 does, having no cordoning.
CORDONED = (", or have all their log directories cordoned", " or some brokers have all their log directories cordoned")


def uncordoned(message: str | None) -> str | None:
    for words in CORDONED:
        message = None if message is None else message.replace(words, "")
    return message


def outcome(api_key: int, answer: Message) -> Any:
    """What must be the same on both."""
    if api_key == 19:
        return [
            (t.name, t.error_code, uncordoned(t.error_message), t.num_partitions, t.replication_factor)
            for t in answer.topics
        ]
    if api_key == 37:
        return [(r.name, r.error_code, r.error_message) for r in answer.results]
    if api_key == 20:
        return [(r.name, r.error_code, r.error_message) for r in answer.responses]
    if api_key == 62:
        return answer.error_code
    if api_key == 63:
        return (answer.error_code, answer.is_caught_up, answer.is_fenced, answer.should_shut_down)
    if api_key == 64:
        # Kafka 4.0 leaves UnregisterBroker's refusal without its message; 4.4 (and kafkalike) give it.
        return (answer.error_code, None if AK_BEFORE_4_1 else answer.error_message)
    if api_key == 67:
        return (answer.error_code, answer.producer_id_start, answer.producer_id_len)
    raise AssertionError(api_key)


async def test_the_same_controller_requests_get_the_same_answers(kafka_controller: ApacheKafkaCluster) -> None:
    ak_node = kafka_controller.nodes[0]
    ours = ControllerQuorum(1)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await ours.start_all(nursery)
            await ours.active_host()
            sides = [
                Side(
                    await AsyncWireClient.connect(ak_node.address.host, ak_node.address.controller_port),
                    kafka_controller.cluster_id,
                ),
                Side(await AsyncWireClient.connect("127.0.0.1", ours.port(1)), CLUSTER_ID),
            ]
            unknown_incarnation = uuid.UUID(int=0x9999)
            steps: list[tuple[str, int, int, Any]] = [
                ("no broker to place on", 19, 7, lambda s: create(topic("early"))),
                ("another cluster", 62, 4, lambda s: s.registration(1, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")),
                ("no metadata.version", 62, 4, lambda s: s.registration(1, features=FEATURES[1:])),
                ("a reserved directory", 62, 4, lambda s: s.registration(1, log_dirs=[uuid.UUID(int=1)])),
                ("heartbeat before registering", 63, 1, lambda s: heartbeat(5, 10, 0)),
                ("registered", 62, 4, lambda s: s.registration(1)),
                ("heartbeat at another epoch", 63, 1, lambda s: heartbeat(1, s.epochs[1] + 1, 0)),
                ("heartbeat, not caught up", 63, 1, lambda s: heartbeat(1, s.epochs[1], 0)),
                ("heartbeat, caught up", 63, 1, lambda s: heartbeat(1, s.epochs[1], 2**40)),
                ("another incarnation, live", 62, 4, lambda s: s.registration(1, incarnation_id=unknown_incarnation)),
                ("created", 19, 7, lambda s: create(topic("t"))),
                ("exists", 19, 7, lambda s: create(topic("t"))),
                ("too many replicas", 19, 7, lambda s: create(topic("wide", 1, 3))),
                (
                    "duplicate and metadata topic",
                    19,
                    7,
                    lambda s: create(topic("d"), topic("d"), topic("__cluster_metadata")),
                ),
                (
                    "grown",
                    37,
                    3,
                    lambda s: {
                        "topics": [{"name": "t", "count": 5, "assignments": None}],
                        "timeout_ms": 10000,
                        "validate_only": False,
                    },
                ),
                (
                    "shrunk",
                    37,
                    3,
                    lambda s: {
                        "topics": [{"name": "t", "count": 2, "assignments": None}],
                        "timeout_ms": 10000,
                        "validate_only": False,
                    },
                ),
                ("producer ids", 67, 0, lambda s: {"broker_id": 1, "broker_epoch": s.epochs[1]}),
                ("producer ids, stale epoch", 67, 0, lambda s: {"broker_id": 1, "broker_epoch": s.epochs[1] + 1}),
                ("unregister unknown", 64, 0, lambda s: {"broker_id": 9}),
                (
                    "deleted",
                    20,
                    6,
                    lambda s: {"topics": [{"name": "t", "topic_id": uuid.UUID(int=0)}], "timeout_ms": 10000},
                ),
                ("unregistered", 64, 0, lambda s: {"broker_id": 1}),
            ]
            mismatches = []
            for what, api_key, version, body in steps:
                answers = []
                for side in sides:
                    answer = await side.client.request(api_key, version, body(side))
                    if what == "registered":
                        assert answer.error_code == 0, (what, answer)
                        side.epochs[1] = answer.broker_epoch
                    answers.append(outcome(api_key, answer))
                if answers[0] != answers[1]:
                    mismatches.append((what, answers[0], answers[1]))
            assert mismatches == []
            for side in sides:
                await side.client.aclose()
            nursery.cancel_scope.cancel()
