"""pytest fixtures for code that talks to Kafka (installed as the ``kafkalike`` pytest plugin).

    def test_orders(kafka_bootstrap, kafka_topic):
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
        producer.send(kafka_topic, b"hello").get(timeout=10)

``kafka_broker`` is one in-process, in-memory broker per test session — with pytest-xdist, one
per worker, since each worker runs its own session. ``kafka_topic`` is a fresh topic per test,
deleted afterwards. ``KAFKALIKE_TOPIC_PARTITIONS`` sets its partition count (default 1); mark
a test with ``@pytest.mark.kafka_topic(partitions=3)`` to choose per test.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from kafkalike.testing.broker import InProcessBroker


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka_topic(partitions=1, **configs): options for the kafka_topic fixture")


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: InProcessBroker) -> str:
    return kafka_broker.bootstrap_servers


@pytest.fixture
def kafka_topic(kafka_broker: InProcessBroker, request: pytest.FixtureRequest) -> Iterator[str]:
    marker = request.node.get_closest_marker("kafka_topic")
    options = dict(marker.kwargs) if marker else {}
    partitions = int(options.pop("partitions", os.environ.get("KAFKALIKE_TOPIC_PARTITIONS", "1")))
    name = f"test-{request.node.name[:80]}-{uuid.uuid4().hex[:8]}".replace("[", "-").replace("]", "")
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in name)
    kafka_broker.faults.clear()
    kafka_broker.create_topic(name, partitions, {k.replace("_", "."): str(v) for k, v in options.items()})
    yield name
    kafka_broker.faults.clear()
    kafka_broker.delete_topic(name)
