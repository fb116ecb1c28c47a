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

from kafkalike.raft.log import MemoryRaftLog
from kafkalike.server.clock import Clock
from kafkalike.server.config import BrokerConfig
from kafkalike.server.controller_host import ControllerHost, NotActiveError, build_controller_host
from kafkalike.server.quorum.server import QuorumServer, QuorumSettings
from kafkalike.testing.quorum import CLUSTER_ID, CommitRecorder, InProcessQuorum


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

    async def start(self, nursery: trio.Nursery, node_id: int) -> QuorumServer:
        if self._config is None:
            await self.bind()
        assert self._config is not None
        bound = self._bound.pop(node_id, None)
        if bound is None:
            bound = await trio.open_tcp_listeners(self.port(node_id), host="127.0.0.1")
        settings = QuorumSettings(
            node_id,
            CLUSTER_ID,
            self._config,
            ("127.0.0.1", self.port(node_id)),
            metadata_log_dir=None if self.base_dir is None else self.base_dir / f"node-{node_id}",
        )
        memory_log = None if self.base_dir is not None else self._memory_logs.setdefault(node_id, MemoryRaftLog())
        recorder = CommitRecorder()
        self._starts += 1
        server = QuorumServer(
            settings,
            clock=self.clock,
            faults=self.faults,
            rng=random.Random(self.seed * 1000 + self._starts),
            listener=recorder,
            bound=bound,
            memory_log=memory_log,
        )
        self.servers[node_id] = server
        self.recorders[node_id] = recorder
        scope = trio.CancelScope()
        stopped = trio.Event()
        self._scopes[node_id], self._stopped[node_id] = scope, stopped
        seed = self.seed * 1000 + self._starts

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    driver = await server.open()
                    host = build_controller_host(
                        driver,
                        self.config,
                        cluster_id=CLUSTER_ID,
                        clock=self.clock,
                        rng=random.Random(seed),
                        voters=settings.config.endpoints,
                    )
                    driver.add_listener(host)
                    server.apis = host
                    self.hosts[node_id] = host
                    async with trio.open_nursery() as inner:
                        await inner.start(host.run)
                        await inner.start(server.run)
                        task_status.started()
            finally:
                with trio.CancelScope(shield=True):
                    await server.aclose()
                stopped.set()

        await nursery.start(run)
        return server

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
