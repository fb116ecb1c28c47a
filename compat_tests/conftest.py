"""Brokers for the client compatibility tests: real ``kafkalike serve`` processes.

``broker`` is one process shared by the tests that only need a topic of their own; each test
gets a unique ``topic`` name, so they cannot see each other's data. Tests that stop, restart or
kill a broker start their own with ``own_broker``. After every test the broker it used must
still be running and must not have logged an error or a traceback.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkalike.testing.process import BrokerProcess

BROKER_FAULT = re.compile(r"Traceback|\bERROR\b|\bCRITICAL\b")


def _faults(broker: BrokerProcess, since: int) -> list[str]:
    return [line for line in broker.output[since:] if BROKER_FAULT.search(line)]


@pytest.fixture(scope="session")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("shared-broker"))
    broker.start()
    try:
        yield broker
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            assert broker.stop() == 0, "".join(broker.output[-50:])


@pytest.fixture
def broker(shared_broker: BrokerProcess) -> Iterator[BrokerProcess]:
    since = len(shared_broker.output)
    yield shared_broker
    assert shared_broker.proc is not None and shared_broker.proc.poll() is None, "the shared broker died"
    assert not _faults(shared_broker, since), "".join(shared_broker.output[since:])


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start a broker with its own data directory (and overrides); it is stopped after the test."""
    started: list[BrokerProcess] = []

    def start(*overrides: str) -> BrokerProcess:
        broker = BrokerProcess(tmp_path / f"broker-{len(started)}", overrides)
        started.append(broker)
        return broker.start()

    yield start
    for broker in started:
        if broker.proc is not None and broker.proc.poll() is None:
            assert broker.stop() == 0, "".join(broker.output[-50:])
        assert not _faults(broker, 0), "".join(broker.output)


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses: the test's name, made legal, and a random suffix."""
    name = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[:100]
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def shared_group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the consumer-group tests, set to form groups at once (no initial
    rebalance delay) and to accept the short session timeouts that make them quick."""
    from compat_tests.group_support import GROUP_BROKER_OVERRIDES

    broker = BrokerProcess(tmp_path_factory.mktemp("group-broker"), GROUP_BROKER_OVERRIDES)
    broker.start()
    try:
        yield broker
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            assert broker.stop() == 0, "".join(broker.output[-50:])


@pytest.fixture
def group_broker(shared_group_broker: BrokerProcess) -> Iterator[BrokerProcess]:
    since = len(shared_group_broker.output)
    yield shared_group_broker
    assert shared_group_broker.proc is not None and shared_group_broker.proc.poll() is None, "the group broker died"
    assert not _faults(shared_group_broker, since), "".join(shared_group_broker.output[since:])
