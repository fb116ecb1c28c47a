"""A one-voter metadata quorum with its controller host in one trio run, for tests of what
follows the committed log (the broker's metadata publisher, the controller channel): the
listeners a test adds are handed every committed batch from the first one.

    async with one_voter_controller(nursery, listeners=[publisher]) as node:
        channel = node.channel()
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from kafkalike.raft.config import QuorumConfig, VoterEndpoint, VoterKey
from kafkalike.server.clock import Clock, SystemClock
from kafkalike.server.config import BrokerConfig
from kafkalike.server.controller_channel import ControllerChannel
from kafkalike.server.controller_host import ControllerHost, ControllerRequestContext
from kafkalike.server.quorum.driver import CommitListener, QuorumDriver
from kafkalike.server.quorum.server import QuorumServer, QuorumSettings
from kafkalike.testing.controller_quorum import attach_controller_host
from kafkalike.testing.quorum import CLUSTER_ID, FAST_TIMEOUTS


@dataclass
class OneVoterController:
    node_id: int
    driver: QuorumDriver
    host: ControllerHost
    port: int
    clock: Clock

    def channel(self, request_timeout_ms: int = 30_000) -> ControllerChannel:
        """This node's channel to its own controller (answered in process)."""
        return ControllerChannel(
            self.node_id,
            self.driver,
            {self.node_id: ("127.0.0.1", self.port)},
            local=self.host,
            local_context=ControllerRequestContext,
            clock=self.clock,
            request_timeout_ms=request_timeout_ms,
        )


@asynccontextmanager
async def one_voter_controller(
    *,
    node_id: int = 1,
    listeners: Sequence[CommitListener] = (),
    config: BrokerConfig | None = None,
    clock: Clock | None = None,
    metadata_log_dir: Path | None = None,
    seed: int = 0,
) -> AsyncIterator[OneVoterController]:
    """The node elected and its controller active; stopped (log closed) on leaving."""
    clock = clock or SystemClock()
    config = config or BrokerConfig()
    bound = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = bound[0].socket.getsockname()[1]
    endpoint = VoterEndpoint(VoterKey(node_id), "127.0.0.1", port)
    quorum_config = QuorumConfig(voters=(endpoint.key,), endpoints=(endpoint,), **FAST_TIMEOUTS)  # type: ignore[arg-type]
    settings = QuorumSettings(
        node_id, CLUSTER_ID, quorum_config, ("127.0.0.1", port), metadata_log_dir=metadata_log_dir
    )
    server = QuorumServer(settings, clock=clock, rng=random.Random(seed), bound=bound)
    try:
        async with trio.open_nursery() as nursery:
            driver = await server.open()
            host = attach_controller_host(server, driver, config, clock=clock, rng=random.Random(seed))
            for listener in listeners:
                driver.add_listener(listener)
            await nursery.start(host.run)
            await nursery.start(server.run)
            await driver.wait_for(lambda: driver.is_leader)  # the only voter: elected alone
            await host.wait_active()
            yield OneVoterController(node_id, driver, host, port, clock)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await server.aclose()
