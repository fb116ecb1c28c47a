"""The trio driver of one :class:`~kafkalike.raft.node.RaftNode`: the node stays pure, this runs it.

One task owns the node. Everything that reaches it (a message from the network, a flush or a
quorum-state write that completed, an append from the layer above, a tick at the node's
``poll`` deadline) is an event in its inbox; the task applies a round of them in one *step* and
carries out what the node asked for:

- :class:`SendMessage`: a request goes out on the peer channel (:mod:`.channel`), a response to the
  inbound request it answers (the controller listener waits for it, :meth:`QuorumDriver.request`).
- :class:`FlushLog`: the fsyncs run on a worker thread, in order, then ``durable`` is an event.
- :class:`PersistQuorumState`: the quorum-state file is written (aside, fsync, rename) on a
  worker thread, in order, then ``quorum_state_durable`` is an event.

For a file log the whole step runs on a worker thread as well (``log_on_thread``): the node appends
to, rolls, truncates and installs snapshots into its log from inside ``receive``/``append``, so
that is where those file calls happen, never on the event loop; steps never overlap, so the node
is touched by one thread at a time. Flushes overlap steps, as kafkalike.log's flushes overlap
appends: ``prepare_flush`` and ``complete_flush`` run inside steps, only ``syncs.run()`` outside.

Time is the injected clock's wall time (as Kafka's raft client reads ``time.milliseconds()``:
DescribeQuorum's fetch timestamps are wall times that Kafka's tool compares with its own); the
wait for the next deadline is a trio sleep of the difference.

The layer above: :meth:`QuorumDriver.append` on the leader (:class:`NotControllerError`
elsewhere), and a :class:`CommitListener` that receives every committed batch in order, the
snapshot a follower loaded when the log it must continue from starts past what was delivered,
and each change of leader.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from kafkalike.log.errors import KafkaStorageError
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import decode_records, iter_batches
from kafkalike.raft import messages as m
from kafkalike.raft.config import VoterEndpoint
from kafkalike.raft.describe import describe_quorum
from kafkalike.raft.file_log import FileRaftLog, PreparedFlush
from kafkalike.raft.log import OffsetAndEpoch
from kafkalike.raft.node import FlushLog, NotLeaderError, PersistQuorumState, RaftNode, SendMessage
from kafkalike.raft.quorum_state_file import QuorumStateFile
from kafkalike.raft.state import Leader, QuorumStateRecord, Resigned, Role
from kafkalike.raft.voters import VoterSet
from kafkalike.server.clock import Clock

log = logging.getLogger("kafkalike.quorum")

# After a failed fsync or quorum-state write the driver tries again after this long (the node
# holds what depends on it meanwhile: nothing unflushed is counted, nothing held is sent).
DISK_RETRY_S = 0.5
# Committed bytes read per delivery round (whole batches, at least one).
DELIVERY_READ_BYTES = 1024 * 1024
# Events applied in one step at most (the inbox itself is unbounded: what fills it is bounded by
# the node, one request in flight per peer, one inbound request per connection at a time, and the
# completions of its own flushes and writes, none of which may be lost).
STEP_EVENTS = 1024


class NotControllerError(Exception):
    """An append to a node that is not the active leader (Kafka's NOT_CONTROLLER)."""

    error_code = ErrorCode.NOT_CONTROLLER

    def __init__(self, message: str, leader_id: int) -> None:
        super().__init__(message)
        self.leader_id = leader_id


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """One committed batch of the metadata log; a control batch (LeaderChange) has no values."""

    base_offset: int
    last_offset: int
    epoch: int
    values: tuple[bytes, ...]
    control: bool


class CommitListener(Protocol):
    """What the layer above is told, in log order, on the event loop (keep it quick)."""

    def handle_commit(self, batch: CommittedBatch) -> None: ...

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None: ...

    def handle_leader_change(self, leader_id: int, epoch: int) -> None: ...


class Transport(Protocol):
    """Where the driver's requests go (:class:`~kafkalike.server.quorum.channel.PeerChannels`)."""

    def send(self, message: m.RaftMessage) -> None: ...

    def update_endpoints(self, endpoints: Mapping[int, tuple[str, int]]) -> None:
        """Where each node listens, as the node knows it now (a leader it learned of)."""


@dataclass(slots=True)
class _Step:
    """What one step of the node produced, for the event loop to carry out."""

    sends: list[m.RaftMessage] = field(default_factory=list)
    flushes: list[tuple[int, PreparedFlush | None]] = field(default_factory=list)
    persists: list[PersistQuorumState] = field(default_factory=list)
    snapshot: tuple[OffsetAndEpoch, bytes] | None = None
    commits: list[CommittedBatch] = field(default_factory=list)
    leader: tuple[int, int] | None = None
    endpoints: dict[int, tuple[str, int]] | None = None  # when the node's changed


Event = Callable[[RaftNode, int], Any]


class QuorumDriver:
    """Runs ``node`` on trio (see the module docstring). ``run`` is the task; ``transport``
    carries the requests out, and answers come back through :meth:`deliver`."""

    def __init__(
        self,
        node: RaftNode,
        *,
        clock: Clock,
        transport: Transport | None = None,
        quorum_state_file: QuorumStateFile | None = None,
        listener: CommitListener | None = None,
    ) -> None:
        self.node = node
        self.clock = clock
        self.transport = transport
        self.quorum_state_file = quorum_state_file
        self.listeners: list[CommitListener] = [listener] if listener is not None else []
        self.file_log = node.log if isinstance(node.log, FileRaftLog) else None
        self._send_event, self._inbox = trio.open_memory_channel[tuple[Event, trio.Event | None]](math.inf)
        self._flush_send, self._flush_receive = trio.open_memory_channel[tuple[int, PreparedFlush | None]](math.inf)
        self._persist_send, self._persist_receive = trio.open_memory_channel[PersistQuorumState](math.inf)
        self._responses: dict[int, tuple[trio.Event, list[m.RaftMessage]]] = {}
        self._local_ids = itertools.count(1)
        self._changed = trio.Event()
        self._delivered_offset = node.log.start_offset  # the next offset the listeners are owed
        self._snapshot_owed = node.log.start_offset > 0
        self._leader: tuple[int, int] = (-1, -1)
        self._endpoints: dict[int, tuple[str, int]] = dict(node.endpoints)  # read on the loop
        self.running = False
        self.stopped = False  # its task ended: nothing will carry out an event any more
        self._calls: set[trio.Event] = set()  # the calls waiting for their event to be carried out
        self.steps = 0

    # -- the layer above --------------------------------------------------------------------------

    def add_listener(self, listener: CommitListener) -> None:
        """Before ``run``: a listener added later misses what was delivered before."""
        self.listeners.append(listener)

    @property
    def node_id(self) -> int:
        return self.node.node_id

    @property
    def leader_id(self) -> int:
        return self.node.leader_id

    @property
    def epoch(self) -> int:
        return self.node.epoch

    def endpoint_of(self, node_id: int) -> tuple[str, int] | None:
        """Where node ``node_id``'s controller listener is, as the node knows it (a voter's
        configured endpoint, or a leader's learned from a response)."""
        return self._endpoints.get(node_id)

    @property
    def is_leader(self) -> bool:
        state = self.node.state
        return isinstance(state, Leader) and not state.resign_requested

    @property
    def high_watermark(self) -> int | None:
        return self.node.high_watermark

    @property
    def delivered_offset(self) -> int:
        """The offset after the last batch handed to the listeners."""
        return self._delivered_offset

    async def append(self, values: Sequence[bytes]) -> int:
        """Append one batch on the leader; its last offset (committed once ``high_watermark``
        passes it). NotControllerError on any other node; KafkaStorageError when the disk
        refused the write (nothing was appended)."""
        result = await self._call(lambda node, now: node.append(list(values), now))
        if isinstance(result, NotLeaderError):
            raise NotControllerError(str(result), self.node.leader_id)
        if isinstance(result, KafkaStorageError):
            raise result
        assert isinstance(result, int)
        return result

    async def wait_committed(self, offset: int) -> None:
        """Until the batch holding ``offset`` is delivered to the listeners."""
        await self.wait_for(lambda: self._delivered_offset > offset)

    async def snapshot(self, end_offset: int, data: bytes) -> OffsetAndEpoch:
        """Keep ``data`` as the state after every record before ``end_offset`` (see RaftNode.snapshot)."""
        result = await self._call(lambda node, now: node.snapshot(end_offset, data, now))
        if isinstance(result, Exception):
            raise result
        assert isinstance(result, OffsetAndEpoch)
        return result

    async def resign(self) -> None:
        await self._call(lambda node, now: node.resign(now))

    async def resign_gracefully(self, timeout_s: float) -> bool:
        """On the leader: resign, and wait (at most ``timeout_s``) until every voter has
        acknowledged its EndQuorumEpoch, as Kafka's raft client does when it shuts down. False
        when that did not happen in time (or this node was not the leader)."""
        if not self.is_leader:
            return False
        await self.resign()

        def told_everyone() -> bool:
            state = self.node.state
            return not isinstance(state, Resigned) or not state.unacknowledged

        with trio.move_on_after(timeout_s):
            await self.wait_for(told_everyone)
            return True
        return False

    async def voter_endpoints(self) -> tuple[VoterEndpoint, ...]:
        """The voters in force (the latest voter set in the log, KIP-853) at the controller
        endpoints this node knows for them."""
        result = await self._call(lambda node, now: _voter_endpoints(node))
        assert isinstance(result, tuple)
        return result

    async def voters_at(self, offset: int) -> tuple[VoterSet, int]:
        """The voter set and kraft.version in force at ``offset`` (what a snapshot carries)."""
        result = await self._call(lambda node, now: node.voters_at(offset))
        assert isinstance(result, tuple)
        return result

    async def describe(self) -> dict[str, Any]:
        """DescribeQuorum's answer from this node's state (read inside a step, which may be on a
        worker thread, so never while another step changes the node)."""
        result = await self._call(lambda node, now: describe_quorum(node, now))
        assert isinstance(result, dict)
        return result

    async def changed(self) -> None:
        """Until the next step has been carried out."""
        await self._changed.wait()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Until ``predicate()`` holds after a step (callers bound it with a deadline)."""
        while not predicate():
            await self._changed.wait()

    # -- the network ------------------------------------------------------------------------------

    def deliver(self, message: m.RaftMessage) -> None:
        """A response from a peer (the channel calls this on the loop)."""
        self._post(lambda node, now: node.receive(message, now))

    async def request(self, api_key: int, body: m.Body, source: int, timeout_s: float) -> m.Body | None:
        """An inbound quorum request from node ``source``: the node's answer, or None when it
        gives none within ``timeout_s`` (a Fetch it replaced with a newer one from the same node)."""
        local_id = next(self._local_ids)
        done = trio.Event()
        answer: list[m.RaftMessage] = []
        self._responses[local_id] = (done, answer)
        message = m.RaftMessage(source, self.node.node_id, api_key, local_id, body)
        try:
            self._post(lambda node, now: node.receive(message, now))
            with trio.move_on_after(timeout_s):
                await done.wait()
        finally:
            del self._responses[local_id]
        return answer[0].body if answer else None

    def _post(self, event: Event, done: trio.Event | None = None) -> None:
        self._send_event.send_nowait((event, done))

    async def _call(self, event: Event) -> Any:
        """The event carried out by the driver's task, and its result. NotControllerError when
        the task has ended or ends first: a caller waiting shielded (an append seen through)
        would otherwise wait for ever while its node shuts down."""
        done = trio.Event()
        box: list[Any] = []

        def run(node: RaftNode, now: int) -> None:
            try:
                box.append(event(node, now))
            except (NotLeaderError, ValueError, KafkaStorageError) as exc:
                box.append(exc)

        if not self.stopped:
            self._calls.add(done)
            try:
                await self._send_event.send((run, done))
                await done.wait()
            finally:
                self._calls.discard(done)
        if not box:
            # A caller cancelled with the driver (its node shutting down) ends as cancelled;
            # only one that is shielded learns that the driver stopped.
            await trio.lowlevel.checkpoint()
            raise NotControllerError("the metadata quorum's driver has stopped", -1)
        return box[0]

    # -- the task ---------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.running, self.stopped = True, False
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._flusher)
                nursery.start_soon(self._persister)
                task_status.started()
                await self._drive()
        finally:
            self.running = False
            self.stopped = True
            for waiting in self._calls:
                waiting.set()

    async def _drive(self) -> None:
        events: list[tuple[Event, trio.Event | None]] = []
        step = await self._run_step(events)
        self._carry_out(step, events)
        while True:
            now = self.clock.wall_ms()
            wait_s = max(0, self.node.poll(now) - now) / 1000
            events = []
            with trio.move_on_after(wait_s):
                events.append(await self._inbox.receive())
            while len(events) < STEP_EVENTS:
                try:
                    events.append(self._inbox.receive_nowait())
                except trio.WouldBlock:
                    break
            step = await self._run_step(events)
            self._carry_out(step, events)

    async def _run_step(self, events: list[tuple[Event, trio.Event | None]]) -> _Step:
        now = self.clock.wall_ms()
        if self.file_log is not None:
            # Not cancellable: a step that began runs to its end, so the node is never left half-way.
            return await trio.to_thread.run_sync(self._step, events, now)
        return self._step(events, now)

    def _step(self, events: list[tuple[Event, trio.Event | None]], now: int) -> _Step:
        """On a worker thread for a file log: the node's events, then its outputs collected."""
        node = self.node
        if self.file_log is not None:
            self.file_log.advance_clock(now)
        for event, _ in events:
            try:
                event(node, now)
            except KafkaStorageError as exc:
                # The log refused a write and is as it was before it (PartitionLog.append): the
                # event is lost as a dropped message would be, and the node sends again.
                log.error("node %d: metadata log write failed: %s", node.node_id, exc)
        node.tick(now)
        step = _Step()
        for output in node.outputs():
            if isinstance(output, SendMessage):
                step.sends.append(output.message)
            elif isinstance(output, FlushLog):
                prepared = self.file_log.prepare_flush(output.end_offset) if self.file_log is not None else None
                step.flushes.append((output.end_offset, prepared))
            elif isinstance(output, PersistQuorumState):
                step.persists.append(output)
        self._collect_commits(step)
        leader = (node.leader_id, node.epoch)
        if leader != self._leader and node.role in (Role.LEADER, Role.FOLLOWER, Role.RESIGNED):
            self._leader = leader
            step.leader = leader
        if node.endpoints != self._endpoints:
            step.endpoints = dict(node.endpoints)
        self.steps += 1
        return step

    def _collect_commits(self, step: _Step) -> None:
        """Committed batches not yet delivered (read here, on the step's thread)."""
        node, raft_log = self.node, self.node.log
        if self._delivered_offset < raft_log.start_offset or (self._snapshot_owed and raft_log.start_offset > 0):
            snapshot_id = raft_log.earliest_snapshot_id()
            if snapshot_id is not None and snapshot_id.offset == raft_log.start_offset:
                data = raft_log.read_snapshot(snapshot_id)
                if data is not None:
                    step.snapshot = (snapshot_id, data)
            self._delivered_offset = raft_log.start_offset
            self._snapshot_owed = False
        hw = node.high_watermark
        if hw is None:
            return
        end = min(hw, raft_log.durable_end_offset if isinstance(node.state, Leader) else raft_log.end_offset)
        for _ in range(64):  # bounded per step; the rest in the next one
            if self._delivered_offset >= end:
                return
            data = raft_log.read(self._delivered_offset, DELIVERY_READ_BYTES)
            if not data:
                return
            for pos, header in iter_batches(data, partial_ok=True):
                if header.last_offset >= end:
                    return
                values: tuple[bytes, ...] = ()
                if not header.is_control:
                    values = tuple(r.value or b"" for r in decode_records(data, pos, header))
                step.commits.append(
                    CommittedBatch(
                        header.base_offset,
                        header.last_offset,
                        header.partition_leader_epoch,
                        values,
                        header.is_control,
                    )
                )
                self._delivered_offset = header.last_offset + 1

    def _carry_out(self, step: _Step, events: list[tuple[Event, trio.Event | None]]) -> None:
        if step.endpoints is not None:
            self._endpoints = step.endpoints
            if self.transport is not None:
                self.transport.update_endpoints(step.endpoints)
        for message in step.sends:
            if message.is_response:
                waiting = self._responses.get(message.correlation_id)
                if waiting is not None:
                    waiting[1].append(message)
                    waiting[0].set()
            elif self.transport is not None:
                self.transport.send(message)
        for flush in step.flushes:
            self._flush_send.send_nowait(flush)
        for persist in step.persists:
            self._persist_send.send_nowait(persist)
        if step.leader is not None:
            leader_id, epoch = step.leader
            if leader_id == self.node.node_id and self.node.role is Role.LEADER:
                log.info("node %d: leader of epoch %d", leader_id, epoch)
            else:
                log.info(
                    "node %d: %s in epoch %d; the leader is %d",
                    self.node.node_id,
                    self.node.role.value,
                    epoch,
                    leader_id,
                )
        for listener in self.listeners:
            if step.leader is not None:
                listener.handle_leader_change(*step.leader)
            if step.snapshot is not None:
                listener.handle_load_snapshot(*step.snapshot)
            for batch in step.commits:
                listener.handle_commit(batch)
        for _, done in events:
            if done is not None:
                done.set()
        self._changed.set()
        self._changed = trio.Event()

    # -- disk work, off the loop ------------------------------------------------------------------

    async def _flusher(self) -> None:
        """The log's fsyncs, in order, on a worker thread; each reported with ``durable``."""
        async for end_offset, prepared in self._flush_receive:
            if prepared is None:  # a log in memory
                self._post(_flushed_in_memory(end_offset))
                continue
            while True:
                try:
                    await trio.to_thread.run_sync(prepared.syncs.run)
                    break
                except OSError as exc:
                    log.error("node %d: metadata log fsync failed (%s); retrying", self.node.node_id, exc)
                    await trio.sleep(DISK_RETRY_S)
            self._post(_flushed_file(end_offset, prepared))

    async def _persister(self) -> None:
        """Quorum-state writes, in order, on a worker thread; each reported when durable."""
        async for persist in self._persist_receive:
            if self.quorum_state_file is not None:
                await self._write_quorum_state(self.quorum_state_file, persist.state)
            version = persist.version
            self._post(lambda node, now, v=version: node.quorum_state_durable(v, now))  # type: ignore[misc]

    async def _write_quorum_state(self, file: QuorumStateFile, record: QuorumStateRecord) -> None:
        while True:
            try:
                await trio.to_thread.run_sync(file.write, record)
                return
            except OSError as exc:
                log.error("node %d: quorum-state write failed (%s); retrying", self.node.node_id, exc)
                await trio.sleep(DISK_RETRY_S)


def _flushed_in_memory(end_offset: int) -> Event:
    def event(node: RaftNode, now: int) -> None:
        node.log.flush(end_offset)
        node.durable(end_offset, now)

    return event


def _flushed_file(end_offset: int, prepared: PreparedFlush) -> Event:
    def event(node: RaftNode, now: int) -> None:
        assert isinstance(node.log, FileRaftLog)
        node.log.complete_flush(prepared)
        node.durable(end_offset, now)

    return event


def _voter_endpoints(node: RaftNode) -> tuple[VoterEndpoint, ...]:
    found = []
    for key in node.voters.keys:
        address = node.endpoints.get(key.node_id)
        if address is not None:
            found.append(VoterEndpoint(key, *address))
    return tuple(found)
