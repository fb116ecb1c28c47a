from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from kafkalike.server.broker import Broker
from kafkalike.server.config import BrokerConfig
from kafkalike.testing.wire_client import AsyncWireClient


@dataclass
class RunningBroker:
    broker: Broker
    host: str
    port: int

    async def client(self) -> AsyncWireClient:
        return await AsyncWireClient.connect(self.host, self.port)


def make_config(tmp_path: Path, **overrides: str) -> BrokerConfig:
    values = {"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"}
    values.update({k.replace("_", "."): v for k, v in overrides.items()})
    return BrokerConfig(values)


@pytest.fixture
async def running(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[RunningBroker]:
    broker = Broker(make_config(tmp_path))
    broker.open()
    host, port = await nursery.start(broker.serve, "127.0.0.1", 0)
    yield RunningBroker(broker, host, port)
    nursery.cancel_scope.cancel()
    broker.close()
