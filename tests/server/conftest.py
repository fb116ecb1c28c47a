from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from kafkalike.log import LogManager
from kafkalike.server.broker import Broker
from kafkalike.server.clock import Clock
from kafkalike.server.config import BrokerConfig
from kafkalike.server.node import Node
from kafkalike.testing.clock import TrioClock
from kafkalike.testing.wire_client import AsyncWireClient

LOAD_DEADLINE_S = 30


@dataclass
class RunningBroker:
    broker: Broker
    host: str
    port: int
    clients: list[AsyncWireClient] = field(default_factory=list)
    node: Node | None = None  # the node that runs the broker (``serving``)

    async def client(self) -> AsyncWireClient:
        """A raw protocol client, closed when the test ends."""
        client = await AsyncWireClient.connect(self.host, self.port)
        self.clients.append(client)
        return client


def make_config(tmp_path: Path, **overrides: str) -> BrokerConfig:
    values = {"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"}
    values.update({k.replace("_", "."): v for k, v in overrides.items()})
    return BrokerConfig(values)


@asynccontextmanager
async def serving(
    tmp_path: Path,
    *,
    clock: Clock | None = None,
    ephemeral: bool = False,
    logs: LogManager | None = None,
    **overrides: str,
) -> AsyncIterator[RunningBroker]:
    """A broker on a loopback port with ``overrides`` (``make_config``'s), serving until the block
    ends; then its clients are closed and it is stopped. Again on the same ``tmp_path``: a restart.
    ``clock``: the broker's clock (the real one by default); ``ephemeral``: logs in memory;
    ``logs``: the broker's log storage (one whose disk calls a test intercepts). The broker is the
    single node's, run by a :class:`~kafkalike.server.node.Node` as ``kafkalike serve`` runs it."""
    node = Node(make_config(tmp_path, **overrides), clock=clock, ephemeral=ephemeral, logs=logs)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        assert node.broker is not None and node.client_address is not None
        # Coordinator shards load in the background once the broker leads their partitions
        # (COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka's): a test starts once they serve.
        await node.wait_coordinators_loaded(LOAD_DEADLINE_S)
        for runtime in (node.broker.groups.runtime, node.broker.txn.runtime):
            assert not runtime.shards.loading(), f"coordinator shards not loaded within {LOAD_DEADLINE_S} s"
        running = RunningBroker(node.broker, *node.client_address, node=node)
        try:
            yield running
        finally:
            for client in running.clients:
                await client.aclose()
            await node.stop()


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[RunningBroker]:
    async with serving(tmp_path) as running:
        yield running


@pytest.fixture
async def trio_clock() -> TrioClock:
    """A broker clock whose wall time follows the test's autojump ``MockClock``: the broker's
    timeouts, retention and timestamps move as the test sleeps, and no sleep takes real time.
    pytest-trio runs a test on a mock clock only when the test itself takes ``autojump_clock``."""
    if not isinstance(trio.lowlevel.current_clock(), trio.testing.MockClock):
        raise pytest.UsageError("a test with trio_clock takes autojump_clock too (trio's MockClock)")
    return TrioClock()


COORDINATOR_NOT_AVAILABLE = 15


def _unavailable(answer: Any) -> bool:
    if answer.get("coordinators"):  # v4+ (older versions decode it empty)
        return any(c.error_code == COORDINATOR_NOT_AVAILABLE for c in answer.coordinators)
    return bool(answer.error_code == COORDINATOR_NOT_AVAILABLE)


async def find_coordinator(broker: Broker, client: AsyncWireClient, version: int, body: dict[str, Any]) -> Any:
    """FindCoordinator as a client asks it: while the key's internal topic does not exist the
    broker answers COORDINATOR_NOT_AVAILABLE and makes the topic in the background (as Kafka's
    does); asked again once it has."""
    answer = await client.request(10, version, body)
    if _unavailable(answer):
        await broker.wait_internal_topics()
        answer = await client.request(10, version, body)
    return answer


COORDINATOR_LOAD_IN_PROGRESS = 14


async def init_producer_id(client: AsyncWireClient, body: dict[str, Any]) -> Any:
    """InitProducerId v4, retried as a client retries COORDINATOR_LOAD_IN_PROGRESS: a broker's first
    call finds no producer id block yet (Kafka's RPCProducerIdManager asks for one and answers that)."""
    with trio.fail_after(30):
        while (answer := await client.request(22, 4, body)).error_code == COORDINATOR_LOAD_IN_PROGRESS:
            await trio.sleep(0.05)  # the client's retry backoff
    return answer
