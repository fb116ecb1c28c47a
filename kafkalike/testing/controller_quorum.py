"""Controller quorums in one trio run, for tests: :class:`~kafkalike.testing.quorum.InProcessQuorum`
members that each run a :class:`~kafkalike.server.controller_host.ControllerHost` on their
CONTROLLER listener, as a node with the controller role does.

``hosts[node_id]`` is the member's host (a new one at each start: a restarted controller replays
its log from the start). ``active_host()`` waits for the active controller.
"""

from __future__ import annotations

import random
from pathlib import Path

import trio

from kafkalike.server.clock import Clock
from kafkalike.server.config import BrokerConfig
from kafkalike.server.controller_host import ControllerHost, NotActiveError, build_controller_host
from kafkalike.server.quorum.driver import QuorumDriver
from kafkalike.server.quorum.server import QuorumServer
from kafkalike.testing.quorum import CLUSTER_ID, InProcessQuorum


class ControllerQuorum(InProcessQuorum):
    def __init__(
        self,
        voters: int = 3,
        base_dir: Path | None = None,
        *,
        config: BrokerConfig | None = None,
        timeouts: dict[str, int] | None = None,
        clock: Clock | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(voters, base_dir, timeouts=timeouts, clock=clock, seed=seed)
        self.config = config or BrokerConfig()
        self.hosts: dict[int, ControllerHost] = {}

    async def _serve(
        self, nursery: trio.Nursery, node_id: int, server: QuorumServer, driver: QuorumDriver, seed: int
    ) -> None:
        host = attach_controller_host(server, driver, self.config, clock=self.clock, rng=random.Random(seed))
        self.hosts[node_id] = host
        await nursery.start(host.run)
        await super()._serve(nursery, node_id, server, driver, seed)

    async def active_host(self, among: set[int] | None = None) -> ControllerHost:
        """The active controller (of ``among``), once it has activated."""
        while True:
            leader = await self.wait_for_leader(among)
            host = self.hosts[leader.node_id]
            try:
                await host.wait_active()
            except NotActiveError:  # another election came first: look again
                continue
            return host


def attach_controller_host(
    server: QuorumServer, driver: QuorumDriver, config: BrokerConfig, *, clock: Clock, rng: random.Random
) -> ControllerHost:
    """A controller host on ``driver``'s committed log, served on ``server``'s listener, as a
    node with the controller role has it (the caller starts ``host.run`` before ``server.run``)."""
    host = build_controller_host(driver, config, cluster_id=CLUSTER_ID, clock=clock, rng=rng, voters=server.voters)
    driver.add_listener(host)
    server.apis = host
    return host
