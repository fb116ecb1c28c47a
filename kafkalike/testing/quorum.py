"""Several metadata-quorum members in one trio run, over loopback TCP, for tests.

``InProcessQuorum(voters=3, base_dir=...)`` binds every node's CONTROLLER port first (so the
voters' endpoints are known), then ``start(node_id)`` / ``stop(node_id)`` each member: ``stop``
cancels its task (a leader stops dead, as a killed process; nothing is resigned) and closes its
log. ``faults`` is the one :class:`~kafkalike.server.quorum.channel.NetworkFaults` every member's
channel and listener consult: ``faults.isolate(node_id)`` / ``faults.heal()``. Each member's
committed batches are recorded by a :class:`CommitRecorder`.

    async with quorum.running(deadline_s=20) as nursery:  # every member started, stopped on leaving
        client = await quorum.client(node_id)  # a raw client of its CONTROLLER listener, closed on leaving
"""

from __future__ import annotations

import functools
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

from kafkalike.raft.config import QuorumConfig, VoterEndpoint, VoterKey
from kafkalike.raft.log import MemoryRaftLog, OffsetAndEpoch
from kafkalike.server.clock import Clock, SystemClock
from kafkalike.server.quorum.channel import NetworkFaults
from kafkalike.server.quorum.driver import CommittedBatch, NotControllerError, QuorumDriver
from kafkalike.server.quorum.server import QuorumServer, QuorumSettings
from kafkalike.testing.wire_client import AsyncWireClient

CLUSTER_ID = "quorum-test-cluster-0A"
# Kafka's defaults divided by about three: elections well under a second, yet a leader keeps
# its quorum on a loaded machine (it resigns after 1.5 fetch timeouts without a majority).
FAST_TIMEOUTS = {
    "election_timeout_ms": 300,
    "fetch_timeout_ms": 800,
    "election_backoff_max_ms": 300,
    "request_timeout_ms": 800,
    "fetch_max_wait_ms": 100,
}


@dataclass
class CommitRecorder:
    """A CommitListener that keeps what it was told."""

    batches: list[CommittedBatch] = field(default_factory=list)
    snapshots: list[tuple[OffsetAndEpoch, bytes]] = field(default_factory=list)
    leaders: list[tuple[int, int]] = field(default_factory=list)

    def handle_commit(self, batch: CommittedBatch) -> None:
        if self.batches and batch.base_offset != self.batches[-1].last_offset + 1:
            raise AssertionError(f"batch at {batch.base_offset} after {self.batches[-1].last_offset}")
        self.batches.append(batch)

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self.snapshots.append((snapshot_id, data))
        self.batches.clear()

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        self.leaders.append((leader_id, epoch))

    def values(self) -> list[bytes]:
        return [v for b in self.batches for v in b.values]


class InProcessQuorum:
    def __init__(
        self,
        voters: int = 3,
        base_dir: Path | None = None,
        *,
        timeouts: dict[str, int] | None = None,
        clock: Clock | None = None,
        seed: int = 0,
        observers: int = 0,
    ) -> None:
        """``observers``: more members (ids after the voters') that follow the log without a vote."""
        self.voter_ids = list(range(1, voters + 1))
        self.node_ids = list(range(1, voters + observers + 1))
        self.base_dir = base_dir
        self.timeouts = dict(FAST_TIMEOUTS if timeouts is None else timeouts)
        self.clock = clock or SystemClock()
        self.seed = seed
        self.faults = NetworkFaults()
        self.servers: dict[int, QuorumServer] = {}
        self.recorders: dict[int, CommitRecorder] = {}
        self._scopes: dict[int, trio.CancelScope] = {}
        self._stopped: dict[int, trio.Event] = {}
        self._memory_logs: dict[int, MemoryRaftLog] = {}
        self._bound: dict[int, list[trio.SocketListener]] = {}
        self._config: QuorumConfig | None = None
        self._ports: dict[int, int] = {}
        self._starts = 0
        self._clients: list[AsyncWireClient] = []

    async def bind(self) -> None:
        """Bind every node's port (before any starts: the voters' endpoints name them)."""
        endpoints = []
        for node_id in self.node_ids:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            self._bound[node_id] = listeners
            self._ports[node_id] = listeners[0].socket.getsockname()[1]
            if node_id in self.voter_ids:
                endpoints.append(VoterEndpoint(VoterKey(node_id), "127.0.0.1", self._ports[node_id]))
        voters = tuple(e.key for e in endpoints)
        self._config = QuorumConfig(voters=voters, endpoints=tuple(endpoints), **self.timeouts)  # type: ignore[arg-type]

    def port(self, node_id: int) -> int:
        return self._ports[node_id]

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
        seed = self.seed * 1000 + self._starts
        server = QuorumServer(
            settings,
            clock=self.clock,
            faults=self.faults,
            rng=random.Random(seed),
            listener=recorder,
            bound=bound,
            memory_log=memory_log,
        )
        self.servers[node_id] = server
        self.recorders[node_id] = recorder
        scope = trio.CancelScope()
        stopped = trio.Event()
        self._scopes[node_id], self._stopped[node_id] = scope, stopped

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    driver = await server.open()
                    async with trio.open_nursery() as inner:
                        await self._serve(inner, node_id, server, driver, seed)
                        task_status.started()
            finally:
                with trio.CancelScope(shield=True):
                    await server.aclose()
                stopped.set()

        await nursery.start(run)
        return server

    async def _serve(
        self, nursery: trio.Nursery, node_id: int, server: QuorumServer, driver: QuorumDriver, seed: int
    ) -> None:
        """Start the member's tasks in ``nursery``, its log open; a kit that serves more on the
        member's listener (``ControllerQuorum``) starts its own first. ``seed``: this start's."""
        await nursery.start(server.run)

    async def start_all(self, nursery: trio.Nursery) -> None:
        for node_id in self.node_ids:
            await self.start(nursery, node_id)

    @asynccontextmanager
    async def running(self, *, deadline_s: float) -> AsyncIterator[trio.Nursery]:
        """Every member started in a nursery (the one yielded, for ``start`` after a ``stop``);
        on leaving, the clients are closed and every member is stopped. The whole block,
        start-up included, fails with ``trio.TooSlowError`` after ``deadline_s``."""
        with trio.fail_after(deadline_s):
            async with trio.open_nursery() as nursery:
                try:
                    await self.start_all(nursery)
                    yield nursery
                finally:
                    with trio.CancelScope(shield=True):
                        for client in self._clients:
                            await client.aclose()
                    self._clients.clear()
                nursery.cancel_scope.cancel()

    async def client(self, node_id: int) -> AsyncWireClient:
        """A raw protocol client of the member's CONTROLLER listener, closed when ``running`` ends."""
        client = await AsyncWireClient.connect("127.0.0.1", self.port(node_id))
        self._clients.append(client)
        return client

    async def stop(self, node_id: int) -> None:
        """Cancel the member's task (no resignation: a crash as far as the others can tell)."""
        server = self.servers[node_id]
        self._scopes.pop(node_id).cancel()
        await self._stopped[node_id].wait()
        if self.servers.get(node_id) is server:
            del self.servers[node_id]

    def driver(self, node_id: int) -> QuorumDriver:
        driver = self.servers[node_id].driver
        assert driver is not None
        return driver

    def drivers(self) -> list[QuorumDriver]:
        return [s.driver for s in self.servers.values() if s.driver is not None]

    async def wait(self, predicate: Callable[[], bool]) -> None:
        """Until ``predicate()`` holds after some member's step (bound it with a deadline)."""
        while not predicate():
            async with trio.open_nursery() as nursery:
                for driver in self.drivers():
                    nursery.start_soon(_wake_then_cancel, driver, nursery.cancel_scope)

    async def append_committed(self, values: list[bytes], among: set[int] | None = None) -> int:
        """Append on the leader (of ``among``) and wait until every running member of ``among``
        has been handed the batch; a leader that changed before the append is looked up again."""
        while True:
            leader = await self.wait_for_leader(among)
            try:
                last = await leader.append(values)
            except NotControllerError:
                continue
            await self.wait(functools.partial(self._delivered_beyond, last, among))
            if self._committed_as_appended(last, values, among):
                return last
            # A leader change truncated the batch before it committed (the new leader's own
            # records moved the log past its offset): append it again, as a client would.

    def _committed_as_appended(self, last: int, values: list[bytes], among: set[int] | None) -> bool:
        """The committed batch ending at ``last`` is the one appended (every member commits the same
        log, so the first running member's recorder tells)."""
        for driver in self.drivers():
            if among is None or driver.node_id in among:
                covering = [b for b in self.recorders[driver.node_id].batches if b.base_offset <= last <= b.last_offset]
                # Not covered: a snapshot replaced it on that member; nothing to compare.
                return not covering or any(b.last_offset == last and list(b.values) == values for b in covering)
        return True

    def _delivered_beyond(self, offset: int, among: set[int] | None) -> bool:
        return all(d.delivered_offset > offset for d in self.drivers() if among is None or d.node_id in among)

    def leaders(self, among: set[int] | None = None) -> list[int]:
        return [d.node_id for d in self.drivers() if d.is_leader and (among is None or d.node_id in among)]

    async def wait_for_leader(self, among: set[int] | None = None) -> QuorumDriver:
        """A leader that the other running members (of ``among``) follow in its epoch."""

        def settled() -> bool:
            leaders = self.leaders(among)
            if len(leaders) != 1:
                return False
            leader = self.driver(leaders[0])
            members = [d for d in self.drivers() if among is None or d.node_id in among]
            return all(d.leader_id == leader.node_id and d.epoch == leader.epoch for d in members)

        await self.wait(settled)
        return self.driver(self.leaders(among)[0])


async def _wake_then_cancel(driver: QuorumDriver, scope: trio.CancelScope) -> None:
    await driver.changed()
    scope.cancel()
