"""One member of the metadata quorum, assembled: its log and quorum-state file opened off the
loop, the node, its driver, the peer channel and the CONTROLLER listener, run as one task.

``QuorumServer.run`` starts everything and reports the listener's bound address; cancelling it
stops the node (a leader that is cancelled simply goes silent, as a killed process); ``aclose``
closes the log on a worker thread. ``metadata_dir`` None keeps the log in memory (tests).
"""

from __future__ import annotations

import logging
import random
import uuid
from dataclasses import dataclass
from pathlib import Path

import trio

from kafkalike.raft.config import NO_DIRECTORY_ID, QuorumConfig, VoterEndpoint
from kafkalike.raft.file_log import FileRaftLog
from kafkalike.raft.log import MemoryRaftLog, RaftLog
from kafkalike.raft.node import RaftNode
from kafkalike.raft.quorum_state_file import QuorumStateFile
from kafkalike.raft.state import QuorumStateRecord
from kafkalike.server.clock import Clock, SystemClock
from kafkalike.server.quorum.channel import NetworkFaults, PeerChannels
from kafkalike.server.quorum.driver import CommitListener, QuorumDriver
from kafkalike.server.quorum.handlers import ControllerApis, ControllerContext
from kafkalike.server.quorum.listener import serve_controller_listeners

log = logging.getLogger("kafkalike.quorum")
METADATA_PARTITION_DIR = "__cluster_metadata-0"


@dataclass
class QuorumSettings:
    node_id: int
    cluster_id: str
    config: QuorumConfig  # its ``endpoints`` are where the voters' controller listeners are
    listen: tuple[str, int] | None  # None: an observer, which serves no CONTROLLER listener
    listener_name: str = "CONTROLLER"
    metadata_log_dir: Path | None = None  # the log dir holding __cluster_metadata-0; None: in memory
    directory_id: uuid.UUID = NO_DIRECTORY_ID


class QuorumServer:
    def __init__(
        self,
        settings: QuorumSettings,
        *,
        clock: Clock | None = None,
        faults: NetworkFaults | None = None,
        rng: random.Random | None = None,
        listener: CommitListener | None = None,
        bound: list[trio.SocketListener] | None = None,
        memory_log: MemoryRaftLog | None = None,
        apis: ControllerApis | None = None,
    ) -> None:
        """``bound``: listeners already bound (a test binds every node's port before building
        the voters' endpoints); ``memory_log``: an in-memory log to run on (kept across restarts);
        ``apis``: the controller's own APIs, served on the same listener (or set before ``run``)."""
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.faults = faults or NetworkFaults()
        self.rng = rng or random.Random()
        self.listener = listener
        self._bound = bound
        self._memory_log = memory_log
        self.apis = apis
        self.driver: QuorumDriver | None = None
        self.raft_log: RaftLog | None = None
        self.address: tuple[str, int] | None = None

    @property
    def voters(self) -> tuple[VoterEndpoint, ...]:
        return self.settings.config.endpoints

    async def open(self) -> QuorumDriver:
        """The log and the quorum state as they are on disk (read on a worker thread), and the driver."""
        settings = self.settings
        state_file: QuorumStateFile | None = None
        stored: QuorumStateRecord | None = None
        now = self.clock.wall_ms()
        if self._memory_log is not None or settings.metadata_log_dir is None:
            raft_log: RaftLog = self._memory_log if self._memory_log is not None else MemoryRaftLog()
        else:
            directory = settings.metadata_log_dir / METADATA_PARTITION_DIR
            raft_log = await trio.to_thread.run_sync(FileRaftLog.open, directory, now)
            state_file = QuorumStateFile(directory)
            stored = await trio.to_thread.run_sync(state_file.read)
        self.raft_log = raft_log
        node = RaftNode(
            settings.node_id,
            settings.config,
            raft_log,
            self.rng,
            now,
            directory_id=settings.directory_id,
            cluster_id=settings.cluster_id,
            quorum_state=stored,
        )
        # The node's: the voters', and the bootstrap servers' of a node that knows no voters.
        channels = PeerChannels(settings.node_id, node.endpoints, self.faults, clock=self.clock)
        self.driver = QuorumDriver(
            node, clock=self.clock, transport=channels, quorum_state_file=state_file, listener=self.listener
        )
        channels.deliver = self.driver.deliver
        self._channels = channels
        return self.driver

    async def run(self, *, task_status: trio.TaskStatus[tuple[str, int] | None] = trio.TASK_STATUS_IGNORED) -> None:
        """Reports the CONTROLLER listener's bound address (None for an observer, which has none)."""
        driver = self.driver if self.driver is not None else await self.open()
        listeners: list[trio.SocketListener] = []
        address: tuple[str, int] | None = None
        if self._bound is not None or self.settings.listen is not None:
            host, port = self.settings.listen or ("127.0.0.1", 0)
            listeners = self._bound if self._bound is not None else await trio.open_tcp_listeners(port, host=host)
            address = (host, listeners[0].socket.getsockname()[1])
        self._bound = None  # a restart binds again
        ctx = ControllerContext(
            driver,
            self.settings.cluster_id,
            self.settings.listener_name,
            self.faults,
            self.settings.config.request_timeout_ms,
            self.apis,
        )
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._channels.run)
                await nursery.start(driver.run)
                if listeners:
                    nursery.start_soon(serve_controller_listeners, ctx, listeners)
                self.address = address
                task_status.started(address)
        finally:
            for listener in listeners:
                await listener.aclose()

    async def aclose(self) -> None:
        """Close the log (on a worker thread for a file log); only after ``run`` has ended."""
        raft_log = self.raft_log
        if isinstance(raft_log, FileRaftLog):
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(raft_log.close)
        self.driver = None
        self.raft_log = None
