"""The active controller on the metadata quorum: Kafka's ``QuorumController`` event loop and
``ControllerApis``, over a :class:`~kafkalike.server.quorum.driver.QuorumDriver`.

The controller itself stays pure (:class:`~kafkalike.controller.quorum_controller.QuorumController`
with the :class:`~kafkalike.controller.cluster_control.ClusterControlManager` beside it); this is
what runs it:

- **Replay.** The host is the driver's :class:`CommitListener`: every committed batch goes through
  the facade's loader (the one replay path) and into the standby cluster manager; loaded
  snapshots replace the image.
- **Activation.** When the driver says this node leads an epoch, the host is not yet active: it
  waits until the first batch of that epoch (the LeaderChange record the new leader writes) has
  been delivered, so that everything an earlier leader committed has been replayed (Kafka's raft
  client tells its listener of the leadership only then). It then copies the standby cluster
  manager, activates it (every broker's session starts now), writes the bootstrap records when the
  log has none, and starts serving writes.
- **Writes.** One at a time (a lock, so that offsets are known): the operation runs against the
  latest image, its records are replayed into the active cluster manager at once (as Kafka's
  active controller replays its own records) and appended as one batch; the reply is released
  once the driver delivers the batch as committed. An operation that wrote nothing waits until
  everything appended before it is committed, as Kafka's deferred event queue makes it.
- **Renouncing.** A new leader, a resignation or a refused append: the uncommitted records are
  dropped (``revert``), the active cluster manager is discarded, and every pending reply answers
  NOT_CONTROLLER (what the old leader appended may still be committed by the next: it is then
  replayed from the log like any other record, once).
- **Timers.** The active cluster manager's ``poll`` says when a broker session check is due;
  ``run`` sleeps until then on the injected clock and fences what expired.

The APIs themselves (request in, response body out) are :mod:`.controller_apis`.
"""

from __future__ import annotations

import copy
import logging
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio

from kafkalike.configs import declared_int
from kafkalike.controller.broker_partition_changes import BrokerPartitionChanges
from kafkalike.controller.cluster_control import ClusterControlManager
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.image import MetadataImage
from kafkalike.controller.quorum_controller import QuorumController
from kafkalike.log.errors import KafkaStorageError
from kafkalike.log.snapshot_files import SnapshotId
from kafkalike.protocol.api import RequestHeader, decode_request, decode_response, encode_request, encode_response
from kafkalike.protocol.codec import Message
from kafkalike.protocol.metadata_records import (
    ApiMessageAndVersion,
    MetadataBatch,
    decode_metadata_record,
    encode_metadata_record,
)
from kafkalike.raft.config import VoterEndpoint
from kafkalike.raft.log import OffsetAndEpoch
from kafkalike.server.clock import Clock
from kafkalike.server.config import BrokerConfig
from kafkalike.server.quorum.describe import describe_quorum_answer, voter_nodes
from kafkalike.server.quorum.driver import CommittedBatch, NotControllerError, QuorumDriver

log = logging.getLogger("kafkalike.controller.host")
R = TypeVar("R")

# How long a request that reaches a leader not yet active (still replaying up to its epoch's
# start) waits for it before NOT_CONTROLLER; a brand new leader usually gets there in one round.
DEFAULT_ACTIVATION_WAIT_MS = 2000
DESCRIBE_QUORUM = 55
DEFAULT_HEARTBEAT_INTERVAL_MS = declared_int("broker.heartbeat.interval.ms")
# Sessions fenced in one go at most before other events get a turn (the manager fences one per
# call and asks to be called again while there was one).
FENCES_PER_ROUND = 64


class NotActiveError(Exception):
    """This controller is not (or no longer) the active one: NOT_CONTROLLER."""


class WriteTimedOutError(Exception):
    """The request's deadline passed before its records were committed: REQUEST_TIMED_OUT (they
    may still be committed later, as in Kafka)."""


@dataclass(frozen=True, slots=True)
class ControllerRequestContext:
    """What the controller's APIs know of a request besides its body."""

    header: RequestHeader
    listener_name: str = "CONTROLLER"
    principal: str = "User:ANONYMOUS"


@dataclass(slots=True)
class _PendingReply:
    """A reply held until ``offset`` is committed in ``epoch``."""

    offset: int
    epoch: int
    done: trio.Event = field(default_factory=trio.Event)
    committed: bool = False


def metadata_batch(batch: CommittedBatch) -> MetadataBatch:
    """A committed batch of the driver as the loader takes it (its records decoded)."""
    records = () if batch.control else tuple(decode_metadata_record(v) for v in batch.values)
    return MetadataBatch(batch.base_offset, batch.last_offset, batch.epoch, -1, records)


class ControllerHost:
    """The controller role of a node (see the module docstring)."""

    def __init__(
        self,
        driver: QuorumDriver,
        *,
        controller: QuorumController,
        cluster_factory: Callable[[], ClusterControlManager],
        clock: Clock,
        bootstrap: Sequence[ApiMessageAndVersion] | None = None,
        voters: Sequence[VoterEndpoint] = (),
        listener_name: str = "CONTROLLER",
        activation_wait_ms: int = DEFAULT_ACTIVATION_WAIT_MS,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
        topic_config_list: Callable[[Mapping[str, str]], list[dict[str, Any]]] | None = None,
    ) -> None:
        """``cluster_factory``: a new cluster manager; the standby one follows the committed log,
        the active one is a copy of it made at each activation. ``bootstrap``: the records of bootstrap.checkpoint
        (None: the release defaults). ``topic_config_list``: a created topic's configs as
        CreateTopics v5+ lists them (None: listed empty)."""
        self.driver = driver
        self.controller = controller
        self.cluster_factory = cluster_factory
        self.standby_cluster = cluster_factory()
        self.cluster: ClusterControlManager | None = None  # the active one
        self.clock = clock
        self.bootstrap = list(bootstrap) if bootstrap is not None else None
        self.voters = tuple(voters)
        self.voters_named = False  # True: DescribeQuorum names ``voters``, not the quorum's own
        self.listener_name = listener_name
        self.activation_wait_ms = activation_wait_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.topic_config_list = topic_config_list
        self.node_id = driver.node_id
        self.active_epoch: int | None = None
        self._claim_epoch: int | None = None  # leading this epoch, not yet replayed up to its start
        self._claimable_at: int | None = None  # the first offset after the epoch's first batch
        self._next_offset = 0
        self._last_appended = -1
        self._committed_offset = -1
        self._pending: list[_PendingReply] = []
        self._write_lock = trio.Lock()
        self._wake = trio.Event()
        self._activated = trio.Event()
        self._state_changed = trio.Event()  # set at every activation, renouncing and driver step
        self._resign_wanted = False
        self.fenced_by_timeout = 0

    # -- state --------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.active_epoch is not None

    @property
    def leader_id(self) -> int:
        return self.driver.leader_id

    @property
    def image(self) -> MetadataImage:
        """The committed image."""
        return self.controller.image

    def now_ms(self) -> int:
        return self.clock.wall_ms()

    # -- CommitListener -----------------------------------------------------------------------

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        if self.active_epoch is not None and (leader_id != self.node_id or epoch != self.active_epoch):
            self._renounce(f"the leader is now {leader_id} in epoch {epoch}")
        if leader_id == self.node_id and self.active_epoch != epoch:
            self._claim_epoch, self._claimable_at = epoch, None
        else:
            self._claim_epoch = None
        self._wake_up()

    def handle_commit(self, batch: CommittedBatch) -> None:
        try:
            decoded = metadata_batch(batch)
            self.controller.replay(decoded)
            for i, record in enumerate(decoded.records):
                self.standby_cluster.replay(record, batch.base_offset + i)
        except Exception as exc:  # told on the driver's loop, which must go on
            # The committed log holds what this controller cannot replay: it must not lead.
            log.error("node %d: committed metadata at %d cannot be replayed: %s", self.node_id, batch.base_offset, exc)
            self._give_up("the committed log cannot be replayed")
            return
        self._committed_offset = batch.last_offset
        if self._claim_epoch is not None and batch.epoch >= self._claim_epoch:
            self._claimable_at = batch.last_offset + 1
            self._wake_up()
        self._release_committed()

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        if self.active_epoch is not None:
            self._give_up("a snapshot replaced the image under the active controller")
        last_contained = snapshot_id.offset - 1  # what Kafka replays a snapshot's records at
        try:
            self.controller.load_snapshot(SnapshotId(snapshot_id.offset, snapshot_id.epoch), data)
            standby = self.cluster_factory()
            for record in self.controller.image.records():
                standby.replay(record, last_contained)
        except Exception as exc:  # told on the driver's loop, which must go on
            log.error("node %d: the snapshot at %d cannot be loaded: %s", self.node_id, snapshot_id.offset, exc)
            self._give_up("a snapshot that cannot be loaded")
            return
        self.standby_cluster = standby
        self._committed_offset = last_contained
        self._release_committed()

    def _release_committed(self) -> None:
        still = []
        for reply in self._pending:
            if reply.offset <= self._committed_offset:
                reply.committed = reply.epoch == self.active_epoch
                reply.done.set()
            else:
                still.append(reply)
        self._pending = still

    # -- activation and renouncing ------------------------------------------------------------

    def _wake_up(self) -> None:
        self._wake.set()

    async def _claim(self) -> None:
        """Become the active controller of ``_claim_epoch`` (its first batch is replayed)."""
        async with self._write_lock:
            epoch, at = self._claim_epoch, self._claimable_at
            if epoch is None or at is None or not self.driver.is_leader or self.driver.epoch != epoch:
                return
            self._claim_epoch = self._claimable_at = None
            now = self.now_ms()
            cluster = copy.deepcopy(self.standby_cluster)
            cluster.activate(self.controller.image, now)
            self.cluster = cluster
            self.active_epoch = epoch
            self._next_offset = at
            self._last_appended = at - 1
            log.info("node %d: the active controller in epoch %d, writing from offset %d", self.node_id, epoch, at)
            try:
                activation = self.controller.activate(self.bootstrap)
                await self._append_locked(activation)
            except NotActiveError:
                return
            self._activated.set()
            self._notify()

    def _renounce(self, why: str) -> None:
        if self.active_epoch is None:
            return
        log.info("node %d: no longer the active controller of epoch %d: %s", self.node_id, self.active_epoch, why)
        self.active_epoch = None
        self.controller.revert()
        self.controller.cancel_periodic()
        if self.cluster is not None:
            self.cluster.deactivate()
        self.cluster = None
        for reply in self._pending:
            reply.done.set()
        self._pending = []
        self._activated = trio.Event()
        self._notify()
        self._wake_up()

    def _give_up(self, why: str) -> None:
        """Renounce and leave the quorum's leadership too (a leader that is not the active
        controller would answer NOT_CONTROLLER until the next election)."""
        self._renounce(why)
        if self.driver.is_leader:
            self._resign_wanted = True
            self._wake_up()

    def _notify(self) -> None:
        self._state_changed.set()
        self._state_changed = trio.Event()

    async def wait_active(self, timeout_ms: int | None = None) -> None:
        """Until this controller is active; NotActiveError when another node leads, or when it
        is not active within ``timeout_ms`` (a leader still catching up)."""
        if self.active_epoch is not None and self._activated.is_set():
            return
        if not self.driver.is_leader:
            raise NotActiveError
        wait_ms = self.activation_wait_ms if timeout_ms is None else timeout_ms
        with trio.move_on_after(wait_ms / 1000):
            while not (self.active_epoch is not None and self._activated.is_set()):
                if not self.driver.is_leader:
                    raise NotActiveError
                await self._state_changed.wait()
            return
        raise NotActiveError

    # -- writes -------------------------------------------------------------------------------

    async def write(
        self,
        operation: Callable[[int], ControllerResult[R]],
        timeout_ms: int | None = None,
        *,
        start_within_ms: int | None = None,
        on_expired: Callable[[], None] | None = None,
    ) -> R:
        """Run ``operation(next_offset)`` (it goes through the facade, which holds its records as
        uncommitted), append its records and return its reply once they are committed.
        NotActiveError when this controller is not active, or stops being so before then;
        WriteTimedOutError when ``timeout_ms`` (the request's) passes first, or when the writes
        before it keep it from starting within ``start_within_ms`` (then ``on_expired()``; Kafka's
        deadline of a queued controller event)."""
        await self.wait_active()
        started = False
        with trio.move_on_after(math.inf if start_within_ms is None else start_within_ms / 1000):
            await self._write_lock.acquire()
            started = True
        if not started:
            if on_expired is not None and self.active_epoch is not None:
                on_expired()
            raise WriteTimedOutError
        try:
            if self.active_epoch is None:
                raise NotActiveError
            result = operation(self._next_offset)
            pending = await self._append_locked(result)
        finally:
            self._write_lock.release()
        with trio.move_on_after(math.inf if timeout_ms is None else max(0, timeout_ms) / 1000):
            await pending.done.wait()
        if not pending.done.is_set():
            if pending in self._pending:
                self._pending.remove(pending)
            raise WriteTimedOutError
        if not pending.committed:
            raise NotActiveError
        return result.reply

    async def _append_locked(self, result: ControllerResult[Any]) -> _PendingReply:
        """Append ``result`` (write lock held); the reply waiting for its commit."""
        epoch = self.active_epoch
        assert epoch is not None
        if not result.records:
            if self.cluster is not None:
                self.controller.schedule_periodic(self.cluster.partitions, self.now_ms())
            return self._hold(self._last_appended, epoch)
        try:
            values = [encode_metadata_record(r) for r in result.records]
        except Exception:
            # The facade holds these records as appended-to-be: nothing after them would line up.
            log.exception("node %d: metadata records that cannot be encoded", self.node_id)
            self._give_up("an operation produced records that cannot be encoded")
            raise NotActiveError from None
        try:
            with trio.CancelScope(shield=True):  # an append that started is seen through
                last = await self.driver.append(values)
        except NotControllerError:
            self._renounce("the quorum refused the append")
            raise NotActiveError from None
        except KafkaStorageError as exc:
            log.error("node %d: metadata append failed: %s; resigning", self.node_id, exc)
            self._give_up("an append failed")
            raise NotActiveError from None
        if self.active_epoch != epoch:
            raise NotActiveError
        first = last - len(values) + 1
        if first != self._next_offset:
            log.warning("node %d: records expected at %d were appended at %d", self.node_id, self._next_offset, first)
        assert self.cluster is not None
        for i, record in enumerate(result.records):
            self.cluster.replay(record, first + i)
        self.controller.appended(last)
        self._next_offset = last + 1
        self._last_appended = last
        self.controller.schedule_periodic(self.cluster.partitions, self.now_ms())
        self._wake_up()  # the cluster manager's next deadline may have moved
        return self._hold(last, epoch)

    def _hold(self, offset: int, epoch: int) -> _PendingReply:
        reply = _PendingReply(offset, epoch)
        if offset <= self._committed_offset:
            reply.committed = True
            reply.done.set()
        else:
            self._pending.append(reply)
        return reply

    def run_cluster(
        self, operation: Callable[[ClusterControlManager, MetadataImage, int], ControllerResult[R]]
    ) -> Callable[[int], ControllerResult[R]]:
        """An operation of the active cluster manager as a facade operation: ``operation(manager,
        image, next_offset)`` for :meth:`write`."""

        def at(next_offset: int) -> ControllerResult[R]:
            cluster = self.cluster
            if cluster is None:
                raise NotActiveError
            return self.controller.run(lambda image: operation(cluster, image, next_offset))

        return at

    def run_partitions(
        self, operation: Callable[[BrokerPartitionChanges], ControllerResult[R]]
    ) -> Callable[[int], ControllerResult[R]]:
        """A facade operation over the active cluster manager's partition indexes (AlterPartition,
        ElectLeaders) for :meth:`write`: ``operation(partitions)``."""

        def at(next_offset: int) -> ControllerResult[R]:
            cluster = self.cluster
            if cluster is None:
                raise NotActiveError
            return operation(cluster.partitions)

        return at

    # -- the task -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Activation, the session timers and the watch over the driver's role."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_role)
            task_status.started()
            while True:
                self._wake = trio.Event()
                if self._resign_wanted:
                    self._resign_wanted = False
                    await self.driver.resign()
                    continue
                if self._claim_epoch is not None and self._claimable_at is not None:
                    await self._claim()
                    continue
                await self._fence_due()
                await self._periodic_due()
                deadline = self._next_deadline()
                wait_s = math.inf if deadline is None else max(0, deadline - self.now_ms()) / 1000
                with trio.move_on_after(wait_s):
                    await self._wake.wait()

    def _next_deadline(self) -> int | None:
        """The earliest of the session check and the controller's own periodic work."""
        if self.cluster is None:
            return None
        now = self.now_ms()
        deadlines = [d for d in (self.cluster.poll(now), self.controller.poll(now)) if d is not None]
        return min(deadlines, default=None)

    async def _periodic_due(self) -> None:
        """The controller's own passes (Kafka's maybeElectUncleanLeaders and
        maybeBalancePartitionLeaders) that its poll says are due."""
        now = self.now_ms()
        for name in self.controller.due(now):
            async with self._write_lock:
                cluster = self.cluster
                if self.active_epoch is None or cluster is None:
                    return
                if name == "unclean":
                    result = self.controller.elect_unclean_leaders(cluster.partitions, now)
                else:
                    result = self.controller.balance_partition_leaders(cluster.partitions, now)
                try:
                    await self._append_locked(result)
                except NotActiveError:
                    return

    async def _fence_due(self) -> None:
        for _ in range(FENCES_PER_ROUND):
            cluster = self.cluster
            now = self.now_ms()
            deadline = cluster.poll(now) if cluster is not None else None
            if deadline is None or deadline > now:
                return
            before = self.active_epoch
            try:
                again = await self._fence_one(now)
            except NotActiveError:
                return
            if not again or self.active_epoch != before:
                return

    async def _fence_one(self, now: int) -> bool:
        async with self._write_lock:
            if self.active_epoch is None or self.cluster is None:
                raise NotActiveError
            cluster = self.cluster
            result = self.controller.run(lambda image: cluster.fence_stale_broker(image, now))
            if result.records:
                self.fenced_by_timeout += 1
            await self._append_locked(result)
        return result.reply

    async def _watch_role(self) -> None:
        """A leader that resigns (or is told of a higher epoch) is not always a leader change
        for the driver's listeners: its role is watched after every step."""
        while True:
            await self.driver.changed()
            if self.active_epoch is not None and not self.driver.is_leader:
                self._renounce("the quorum leadership was given up")
            self._notify()

    # -- the APIs -----------------------------------------------------------------------------

    async def handle(self, api_key: int, version: int, body: Message, context: ControllerRequestContext) -> Any:
        """The response body for one request to a controller API (see :mod:`.controller_apis`),
        or DescribeQuorum forwarded in process by this node's broker."""
        from kafkalike.server.controller_apis import handle_controller_request

        if api_key == DESCRIBE_QUORUM:
            # The voters in force, unless this node names its client listener for its only voter.
            voters = self.voters if self.voters_named else await self.driver.voter_endpoints()
            return await describe_quorum_answer(body, self.driver.describe, voter_nodes(voters, self.listener_name))

        return await handle_controller_request(self, api_key, version, body, context)

    async def handle_request(self, header: RequestHeader, body: Message, listener_name: str) -> Any:
        """The CONTROLLER listener's entry (``ControllerApis``)."""
        context = ControllerRequestContext(header, listener_name)
        return await self.handle(header.api_key, header.api_version, body, context)

    async def request(
        self, api_key: int, version: int, body: Mapping[str, Any], client_id: str | None = "in-process"
    ) -> Message:
        """A request from this process (a combined node's broker, tests), through the wire codec
        both ways so that it is answered exactly as over the network; the decoded response."""
        header = RequestHeader(api_key, version, 0, client_id)
        decoded_header, decoded = decode_request(memoryview(encode_request(header, body))[4:])
        answer = await self.handle(api_key, version, decoded, ControllerRequestContext(decoded_header, "in-process"))
        frame = encode_response(api_key, version, 0, answer)
        return decode_response(api_key, version, memoryview(frame)[4:])[1]

    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        from kafkalike.server.controller_apis import CONTROLLER_APIS

        return {key: (api.min_version, api.max_version) for key, api in CONTROLLER_APIS.items()}


def build_controller_host(
    driver: QuorumDriver,
    config: BrokerConfig,
    *,
    cluster_id: str,
    clock: Clock,
    rng: random.Random,
    bootstrap: Sequence[ApiMessageAndVersion] | None = None,
    voters: Sequence[VoterEndpoint] = (),
    listener_name: str = "CONTROLLER",
    broker_problem: Callable[[str, Mapping[str, str]], str | None] | None = None,
) -> ControllerHost:
    """A controller host configured from a node's ``server.properties`` (``config``): topic
    defaults from num.partitions and default.replication.factor, topic config defaults and
    broker values from the config, sessions from broker.session.timeout.ms.
    ``broker_problem``: the broker's own check of broker-resource configs (a combined node's
    Broker.broker_config_problem; none on a controller-only node)."""
    from kafkalike.controller.configuration_control import ConfigDefaults
    from kafkalike.controller.replication_control import TopicDefaults
    from kafkalike.server.controller_apis import topic_config_lister

    hooks: dict[str, Any] = {"topic_default": config.topic_default, "broker_value": config.get}
    if broker_problem is not None:
        hooks["broker_problem"] = broker_problem
    controller = QuorumController(
        node_id=driver.node_id,
        rng=rng,
        topic_defaults=TopicDefaults(
            num_partitions=config.get_int("num.partitions"),
            replication_factor=config.get_int("default.replication.factor"),
        ),
        config_defaults=ConfigDefaults(**hooks),
        delete_topic_enable=config.get_bool("delete.topic.enable"),
        unclean_election_interval_ms=config.get_int("unclean.leader.election.interval.ms"),
        leader_imbalance_check_interval_ms=(
            config.get_int("leader.imbalance.check.interval.seconds") * 1000
            if config.get_bool("auto.leader.rebalance.enable")
            else None
        ),
    )

    def cluster() -> ClusterControlManager:
        return ClusterControlManager(
            cluster_id=cluster_id,
            session_timeout_ms=config.get_int("broker.session.timeout.ms"),
            default_min_insync_replicas=config.get_int("min.insync.replicas"),
            default_unclean_leader_election=config.get_bool("unclean.leader.election.enable"),
            node_id=driver.node_id,
        )

    return ControllerHost(
        driver,
        controller=controller,
        cluster_factory=cluster,
        clock=clock,
        bootstrap=bootstrap,
        voters=voters,
        listener_name=listener_name,
        heartbeat_interval_ms=config.get_int("broker.heartbeat.interval.ms"),
        topic_config_list=topic_config_lister(config),
    )
