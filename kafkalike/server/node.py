"""A kafkalike process: one :class:`Node` with the roles ``process.roles`` gives it.

Built from the node's ``server.properties`` (Kafka's names), a node runs, as its roles say:

- one :class:`~kafkalike.server.quorum.driver.QuorumDriver` over the ``__cluster_metadata-0`` log
  under ``metadata.log.dir`` (or the first of ``log.dirs``): a voter when ``node.id`` is in
  ``controller.quorum.voters``, an observer otherwise (a broker-only node follows the metadata log
  as Kafka's brokers do, fetching from the leader and voting never; without
  ``controller.quorum.voters`` it finds the leader through ``controller.quorum.bootstrap.servers``);
- a :class:`~kafkalike.server.controller_host.ControllerHost` with the controller role, served on
  the CONTROLLER listener together with the quorum's own APIs;
- a :class:`~kafkalike.server.broker.Broker` with the broker role.

The driver's committed batches, loaded snapshots and leader changes go to every subscriber, in log
order (:meth:`Node.subscribe`: the controller host, the broker's metadata publisher, the node's
own image). The node keeps the image of the committed log (:class:`NodeImage`, the loader every
node replays through) and writes metadata snapshots from it as Kafka's SnapshotGenerator decides
(``metadata.log.max.record.bytes.between.snapshots`` / ``metadata.log.max.snapshot.interval.ms``):
built from the image, handed to the driver, which keeps it as a ``.checkpoint`` file and deletes
the log before it; a restart starts from it.

Start order, as Kafka's: the metadata log and quorum state are opened (off the loop), the
controller host and the quorum start (so a voter can vote and lead before anything else), then the
broker, which serves clients only once its metadata has caught up with the leader's high
watermark (:meth:`Node.wait_caught_up`; the broker's registration reports
:attr:`Node.metadata_offset`). Stopping gracefully (:meth:`Node.stop`) is the other way round:
the broker's controlled shutdown and its listeners, then a leader's resignation (told to every
voter, bounded), then the logs closed on worker threads. :meth:`Node.kill` stops the node dead,
as a killed process (nothing resigned), though its files are still closed.

``kafkalike serve`` without a config is the single node: broker and controller in one process,
its own only voter, its broker reaching its controller in process (no second port). A data
directory an earlier release wrote (JSON metadata records) is migrated to Kafka's records at its
first start (``server/metadata_migration.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import signal
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import trio

from kafkalike.controller.api_error import ControllerError
from kafkalike.controller.delta import MetadataDelta
from kafkalike.controller.features import BOOTSTRAP_CHECKPOINT, bootstrap_metadata_version
from kafkalike.controller.image import MetadataImage
from kafkalike.controller.loader import MetadataLoader, build_image_snapshot
from kafkalike.controller.snapshot_policy import SnapshotPolicy
from kafkalike.log import LogManager
from kafkalike.log.dir_lock import DirLock, LogDirError, lock_log_dirs
from kafkalike.log.snapshot_files import SnapshotId, parse_snapshot_file_name
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import (
    ApiMessageAndVersion,
    MetadataBatch,
    MetadataRecordError,
    decode_metadata_record,
    read_snapshot,
)
from kafkalike.raft import config as quorum_config
from kafkalike.raft.config import NO_DIRECTORY_ID, QuorumConfigError, VoterEndpoint, VoterKey
from kafkalike.raft.log import MemoryRaftLog, OffsetAndEpoch
from kafkalike.raft.quorum_state_file import QuorumStateFileError, parse_kafka_uuid
from kafkalike.server.broker import Broker, NewTopic, StartupError, client_listeners
from kafkalike.server.clock import Clock, SystemClock
from kafkalike.server.config import BrokerConfig, parse_listener, parse_properties
from kafkalike.server.quorum.channel import NetworkFaults
from kafkalike.server.quorum.driver import CommitListener, CommittedBatch, QuorumDriver
from kafkalike.server.quorum.server import METADATA_PARTITION_DIR, QuorumServer, QuorumSettings

log = logging.getLogger("kafkalike")
META_PROPERTIES = "meta.properties"
BROKER, CONTROLLER = "broker", "controller"
# A resigning leader waits this long at most for every voter's acknowledgement.
RESIGN_WAIT_S = 1.0


def read_bootstrap(directory: Path) -> list[ApiMessageAndVersion] | None:
    """The bootstrap records ``kafkalike storage format`` wrote into the metadata directory, which
    the first active controller writes into an empty log (None without the file: the release
    defaults). StartupError when the file cannot be read. On a worker thread."""
    path = directory / BOOTSTRAP_CHECKPOINT
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StartupError(f"Unable to read the bootstrap metadata {path}: {exc}") from exc
    try:
        records = list(read_snapshot(data).records)
        bootstrap_metadata_version(records)
    except (MetadataRecordError, ValueError) as exc:
        raise StartupError(f"Unable to read the bootstrap metadata {path}: {exc}") from exc
    return records


class NodeConfigError(ValueError):
    """A node's configuration that cannot work, in one line (Kafka's words where Kafka has them)."""


# -- the configuration ------------------------------------------------------------------------------


def roles_of(config: BrokerConfig) -> list[str]:
    """``process.roles``, sorted; empty when unset."""
    return sorted({r.strip() for r in (config.get("process.roles") or "").split(",") if r.strip()})


def controller_listener_names(config: BrokerConfig) -> list[str]:
    return [n.strip().upper() for n in (config.get("controller.listener.names") or "").split(",") if n.strip()]


def security_protocols(config: BrokerConfig) -> dict[str, str]:
    """``listener.security.protocol.map`` (NAME:PROTOCOL,...); empty when unset."""
    mapping = {}
    for entry in (config.get("listener.security.protocol.map") or "").split(","):
        name, sep, protocol = entry.strip().partition(":")
        if sep:
            mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def controller_listener(config: BrokerConfig) -> tuple[str, str, int]:
    """(name, host, port) of the listener the controller serves: the first of
    ``controller.listener.names`` that ``listeners`` has."""
    names = controller_listener_names(config)
    if not names:
        raise NodeConfigError("controller.listener.names must contain at least one value when running KRaft")
    entries = {}
    for entry in (e.strip() for e in (config.get("listeners") or "").split(",") if e.strip()):
        name, sep, _ = entry.partition("://")
        if sep:
            entries[name.strip().upper()] = entry
    for name in names:
        if name in entries:
            host, port = parse_listener(entries[name])
            protocols = security_protocols(config)
            # As Kafka's effectiveListenerSecurityProtocolMap: with no map set, a controller
            # listener is PLAINTEXT.
            unset = "listener.security.protocol.map" not in config.explicit
            protocol = protocols.get(name, "PLAINTEXT" if unset else "")
            if protocol != "PLAINTEXT":
                shown = protocol or "no entry in listener.security.protocol.map"
                raise NodeConfigError(
                    f"listener {name} uses security protocol {shown}: only PLAINTEXT is available on a controller"
                )
            return name, host, port
    raise NodeConfigError(
        f"The listeners config must contain a listener named {names[0]} (from controller.listener.names) "
        "when running the KRaft controller role"
    )


def is_single_node(config: BrokerConfig) -> bool:
    """The node ``kafkalike serve`` ran before clusters: broker and controller (or no roles
    given), its own only voter (or no voters given), and no CONTROLLER listener in ``listeners``
    (a node that serves one is a quorum member others may follow, even as the only voter)."""
    roles = roles_of(config)
    voters = quorum_config.parse_voters(config.get(quorum_config.QUORUM_VOTERS) or "")
    if roles not in ([], [BROKER, CONTROLLER]) or not {v.key.node_id for v in voters} <= {config.node_id}:
        return False
    names = set(controller_listener_names(config))
    listed = {e.split("://", 1)[0].strip().upper() for e in (config.get("listeners") or "").split(",") if "://" in e}
    return not names & listed


def single_node_settings(config: BrokerConfig) -> QuorumSettings:
    """The single node's quorum: itself the only voter, served no CONTROLLER listener (its broker
    reaches its controller in process), its metadata log where a cluster node's would be."""
    props = dict(config.explicit.items())
    props.pop(quorum_config.QUORUM_VOTERS, None)
    props.pop(quorum_config.QUORUM_BOOTSTRAP_SERVERS, None)
    try:
        qconfig = quorum_config.from_properties(props)
    except QuorumConfigError as exc:
        raise NodeConfigError(str(exc)) from exc
    qconfig = dataclasses.replace(qconfig, voters=(VoterKey(config.node_id),), endpoints=())
    return QuorumSettings(config.node_id, "", qconfig, None, metadata_log_dir=metadata_log_dir(config))


def metadata_log_dir(config: BrokerConfig) -> Path:
    """Kafka's ``metadata.log.dir``, or the first of ``log.dirs``."""
    return Path(config.get("metadata.log.dir") or config.log_dirs[0])


def quorum_settings(config: BrokerConfig) -> QuorumSettings:
    """The quorum member a node of a cluster is, checked (NodeConfigError): everything but the
    directory's identity, which :func:`read_identity` reads."""
    roles = roles_of(config)
    unknown = [r for r in roles if r not in (BROKER, CONTROLLER)]
    if unknown or not roles:
        raise NodeConfigError(f"Unknown process role '{','.join(unknown)}' (must be broker, controller or both)")
    props = dict(config.explicit.items())
    try:
        qconfig = quorum_config.from_properties(props)
    except QuorumConfigError as exc:
        raise NodeConfigError(str(exc)) from exc
    node_id = config.node_id
    voters = props.get(quorum_config.QUORUM_VOTERS, "")
    if not qconfig.voter_ids and not qconfig.bootstrap_servers:
        raise NodeConfigError(
            f"If using process.roles, either {quorum_config.QUORUM_BOOTSTRAP_SERVERS} must contain the set of "
            f"bootstrap controllers or {quorum_config.QUORUM_VOTERS} must contain a parseable set of controllers."
        )
    # Without static voters a controller reads its quorum's voters from its directory at start
    # (:func:`read_formatted_voters`): they are not known here.
    if CONTROLLER in roles and qconfig.voter_ids and node_id not in qconfig.voter_ids:
        which = "just the 'controller' role" if roles == [CONTROLLER] else "the 'controller' role"
        raise NodeConfigError(
            f"If process.roles contains {which}, the node id {node_id} must be included in "
            f"the set of voters {quorum_config.QUORUM_VOTERS}={voters}"
        )
    if roles == [BROKER] and node_id in qconfig.voter_ids:
        raise NodeConfigError(
            f"If process.roles contains just the 'broker' role, the node id {node_id} must not be included "
            f"in the set of voters {quorum_config.QUORUM_VOTERS}={voters}"
        )
    listen: tuple[str, int] | None = None
    name = "CONTROLLER"
    if CONTROLLER in roles:
        name, host, port = controller_listener(config)
        listen = (host, port)
    elif not controller_listener_names(config):
        raise NodeConfigError("controller.listener.names must contain at least one value when running KRaft")
    else:
        name = controller_listener_names(config)[0]
    # The listener whose endpoint the quorum takes from each voter of a VotersRecord.
    qconfig = dataclasses.replace(qconfig, listener_name=name)
    return QuorumSettings(node_id, "", qconfig, listen, listener_name=name, metadata_log_dir=metadata_log_dir(config))


@dataclasses.dataclass(frozen=True)
class FormattedVoters:
    """The voters a quorum without ``controller.quorum.voters`` was formatted with
    (``kafka-storage format --standalone`` or ``--initial-controllers``): its snapshots' VotersRecord."""

    endpoints: tuple[quorum_config.VoterEndpoint, ...]


def read_formatted_voters(directory: Path, listener_name: str) -> FormattedVoters | None:
    """The VotersRecord of the newest snapshot of ``directory``'s metadata partition that has one
    (the bootstrap snapshot 0-0 until a newer one replaces it); None without one: the voters a
    restarted controller first reaches (its quorum log says which are in force). Disk work."""
    partition = directory / METADATA_PARTITION_DIR
    try:
        names = [n.name for n in partition.iterdir()]
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StartupError(f"Unable to read {partition}: {exc.strerror}") from exc
    ids = sorted((i for i in map(parse_snapshot_file_name, names) if i is not None), reverse=True)
    for snapshot_id in ids:
        path = partition / snapshot_id.file_name
        try:
            contents = read_snapshot(path.read_bytes())
        except (OSError, MetadataRecordError) as exc:
            raise StartupError(f"Unable to read the voters from {path}: {exc}") from exc
        if contents.voters is None:
            continue
        endpoints = []
        for voter in contents.voters.voters:
            address = next((e for e in voter.endpoints if e.name.upper() == listener_name.upper()), None)
            if address is None:
                raise StartupError(
                    f"Voter {voter.voter_id} in {path} has no endpoint for the controller listener {listener_name}"
                )
            key = quorum_config.VoterKey(voter.voter_id, voter.voter_directory_id)
            endpoints.append(quorum_config.VoterEndpoint(key, address.host, address.port))
        return FormattedVoters(tuple(endpoints))
    return None


def read_identity(directory: Path, node_id: int) -> tuple[str, uuid.UUID]:
    """(cluster id, directory id) from a formatted directory's meta.properties (StartupError).
    Disk work: call it from a worker thread."""
    path = directory / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StartupError(
            f"No readable meta.properties files found in {directory}: format it first with "
            "`kafkalike storage format -t CLUSTER_ID -c server.properties`"
        ) from None
    except OSError as exc:
        raise StartupError(f"Unable to read {path}: {exc.strerror}") from exc
    values = parse_properties(text)
    cluster_id = values.get("cluster.id")
    if not cluster_id:
        raise StartupError(f"cluster.id was not specified in {path}")
    stored_node = values.get("node.id")
    if stored_node is None or stored_node.strip() != str(node_id):
        raise StartupError(f"Stored node id {stored_node} doesn't match previous node id {node_id} in {path}")
    directory_text = values.get("directory.id")
    try:
        directory_id = parse_kafka_uuid(directory_text) if directory_text else NO_DIRECTORY_ID
    except ValueError:
        raise StartupError(f"Invalid directory.id {directory_text!r} in {path}") from None
    return cluster_id, directory_id


# -- the metadata fan-out and the node's image -----------------------------------------------------


class ImagePublisher(Protocol):
    """Told of each new image of the committed metadata and the delta that made it (Kafka's
    MetadataPublisher), on the event loop, in log order."""

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None: ...


def metadata_batch(batch: CommittedBatch) -> MetadataBatch:
    """A committed batch as the loader takes it (its records decoded)."""
    records = () if batch.control else tuple(decode_metadata_record(v) for v in batch.values)
    return MetadataBatch(batch.base_offset, batch.last_offset, batch.epoch, -1, records)


class NodeImage:
    """The image of the committed metadata log on this node (a CommitListener), with Kafka's
    snapshot policy counting what it replays: ``snapshot_due`` is set when one should be written."""

    def __init__(self, clock: Clock, policy: SnapshotPolicy) -> None:
        self.clock = clock
        self.loader = MetadataLoader()
        self.policy = policy
        self.publishers: list[ImagePublisher] = []
        self.snapshot_due = trio.Event()
        self.snapshot_reason = ""

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    def handle_commit(self, batch: CommittedBatch) -> None:
        delta = self.loader.apply_batch(metadata_batch(batch))
        self._publish(delta)
        size = sum(len(v) for v in batch.values)
        reason = self.policy.on_batch_replayed(size, self.clock.wall_ms(), in_transaction=self.loader.in_transaction)
        if reason is not None and not self.snapshot_due.is_set():
            self.snapshot_reason = reason
            self.snapshot_due.set()

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        delta = self.loader.load_snapshot(SnapshotId(snapshot_id.offset, snapshot_id.epoch), data)
        self.policy.on_snapshot(self.clock.wall_ms())
        self._publish(delta)

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        pass

    def _publish(self, delta: MetadataDelta) -> None:
        image = self.loader.image
        for publisher in self.publishers:
            publisher.on_metadata_update(delta, image)


# -- the node ---------------------------------------------------------------------------------------


class Node:
    """One process of the cluster (see the module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Clock | None = None,
        faults: NetworkFaults | None = None,
        rng: random.Random | None = None,
        ephemeral: bool = False,
        memory_log: MemoryRaftLog | None = None,
        logs: LogManager | None = None,
        controller_bound: list[trio.SocketListener] | None = None,
        client_bound: list[trio.SocketListener] | None = None,
        seed_topics: list[tuple[str, int]] | None = None,
    ) -> None:
        """``faults``: what every inter-node channel of this node consults (the test kit's
        isolate/heal); ``ephemeral``: the broker's logs in memory; ``memory_log``: the metadata log
        in memory, kept across restarts by the caller (None: on disk); ``logs``: the broker's
        log storage of a previous start (an ephemeral broker's, kept by the caller); ``controller_bound`` /
        ``client_bound``: listeners already bound (tests bind every port first).
        Raises NodeConfigError (ValueError) for a configuration that cannot work."""
        config.check()
        self.config = config
        self.node_id = config.node_id
        self.clock: Clock = clock or SystemClock()
        self.faults = faults or NetworkFaults()
        self.rng = rng or random.Random()
        self.ephemeral = ephemeral
        self.single = is_single_node(config)
        self.roles = [BROKER, CONTROLLER] if self.single and not roles_of(config) else roles_of(config)
        # The single node runs its own quorum: its only voter, no CONTROLLER listener.
        self.settings = single_node_settings(config) if self.single else quorum_settings(config)
        self._memory_log = memory_log
        self._logs = logs
        self._controller_bound = controller_bound
        self._client_bound = client_bound
        self._seed_topics = list(seed_topics or [])
        self._subscribers: list[CommitListener] = []
        self._image_publishers: list[ImagePublisher] = []
        self.image = self._new_image()
        self.cluster_id = ""
        self.quorum: QuorumServer | None = None
        self.driver: QuorumDriver | None = None
        self.controller: Any = None  # the ControllerHost, with the controller role in a cluster
        self.broker: Broker | None = None
        self.client_address: tuple[str, int] | None = None
        self.controller_address: tuple[str, int] | None = None
        self.snapshots_written: list[OffsetAndEpoch] = []
        self._locks: list[DirLock] = []
        self._stop = trio.Event()
        self._stopped = trio.Event()
        self._scope: trio.CancelScope | None = None
        self._token: trio.lowlevel.TrioToken | None = None

    def _new_image(self) -> NodeImage:
        """Each start replays the log from its start (or its snapshot) into a new image."""
        image = NodeImage(
            self.clock,
            SnapshotPolicy(
                self.clock.wall_ms(),
                max_record_bytes_between_snapshots=self.config.get_int(
                    "metadata.log.max.record.bytes.between.snapshots"
                ),
                max_snapshot_interval_ms=self.config.get_int("metadata.log.max.snapshot.interval.ms"),
            ),
        )
        image.publishers = self._image_publishers
        return image

    # -- the subscription API ---------------------------------------------------------------------

    def subscribe(self, listener: CommitListener) -> None:
        """Be told of every committed batch, loaded snapshot and leader change, in log order, from
        the start of the log at each start of the node. Before :meth:`run`."""
        self._subscribers.append(listener)

    def subscribe_image(self, publisher: ImagePublisher) -> None:
        """Be told of each new image of the committed metadata with its delta. Before :meth:`run`."""
        self._image_publishers.append(publisher)

    @property
    def metadata_offset(self) -> int:
        """The last offset of the metadata log replayed on this node (-1: none yet)."""
        return -1 if self.driver is None else self.driver.delivered_offset - 1

    def caught_up(self) -> bool:
        """This node knows the leader, and has replayed the log up to the high watermark it was
        last told of."""
        driver = self.driver
        if driver is None:
            return False
        hw = driver.high_watermark
        return driver.leader_id >= 0 and hw is not None and driver.delivered_offset >= hw

    async def wait_caught_up(self) -> None:
        """Until :meth:`caught_up` (callers bound it with a deadline)."""
        if self.driver is None:
            return
        await self.driver.wait_for(self.caught_up)

    async def wait_metadata_offset(self, offset: int) -> None:
        """Until the batch holding ``offset`` has been replayed here (a registration's offset)."""
        if self.driver is not None:
            await self.driver.wait_committed(offset)

    # -- running ----------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[Node] = trio.TASK_STATUS_IGNORED) -> None:
        """Start every role, report ``started`` once the node serves, run until :meth:`stop` (a
        graceful stop) or cancellation (:meth:`kill`). StartupError for what stops the start."""
        self._stop = trio.Event()
        self._stopped = trio.Event()
        self._token = trio.lowlevel.current_trio_token()
        self.image = self._new_image()
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                async with trio.open_nursery() as nursery:
                    await self._start(nursery)
                    task_status.started(self)
                    await self._stop.wait()
                    await self._shut_down()
                    nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await self._close()
            self._scope = None
            self._stopped.set()

    async def stop(self) -> None:
        """A graceful stop (controlled shutdown, resignation); returns once the node has stopped."""
        self._stop.set()
        await self._stopped.wait()

    async def kill(self) -> None:
        """Stop dead, as a killed process: nothing resigned or handed over (files still closed)."""
        if self._scope is not None:
            self._scope.cancel()
        await self._stopped.wait()

    async def wait_coordinators_loaded(self, timeout_s: float) -> None:
        """Until the group and transaction coordinator shards this node's broker leads have
        loaded (for at most ``timeout_s``): until then they answer COORDINATOR_LOAD_IN_PROGRESS,
        which not every client retries (aiokafka's admin client returns no offsets)."""
        broker = self.broker
        if broker is None:
            return
        with trio.move_on_after(timeout_s):
            for runtime in (broker.groups.runtime, broker.txn.runtime):
                await runtime.wait_loaded(timeout_s)

    def request_stop(self) -> None:
        """:meth:`stop` without waiting, from any thread (the test kit runs nodes in threads)."""
        token = self._token
        if token is None:
            return
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(self._stop.set)

    def request_kill(self) -> None:
        """:meth:`kill` without waiting, from any thread."""
        token, scope = self._token, self._scope
        if token is None or scope is None:
            return
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(scope.cancel)

    # -- start ------------------------------------------------------------------------------------

    async def _start(self, nursery: trio.Nursery) -> None:
        self.broker = None
        if BROKER in self.roles:
            # Made before the quorum runs: its metadata publisher follows the log from the start.
            self.broker = self._new_broker()
        await self._start_quorum(nursery)
        if BROKER in self.roles:
            await self._start_broker(nursery)

    async def _read_formatted_voters(self, directory: Path, settings: QuorumSettings) -> None:
        """A controller without static voters starts from the voters of its directory's newest
        snapshot that has any (its quorum's log may have changed them since: the quorum reads
        that itself). Without any (``--no-initial-controllers``) it starts as an observer that
        finds the quorum through controller.quorum.bootstrap.servers, until a voter change adds
        it (KIP-853); so does a controller the voters do not, or no longer, hold."""
        found = await trio.to_thread.run_sync(read_formatted_voters, directory, settings.listener_name)
        if found is None:
            log.info("no voters in %s: an observer of the quorum until added as a voter", directory)
            return
        settings.config = dataclasses.replace(
            settings.config, voters=tuple(e.key for e in found.endpoints), endpoints=found.endpoints
        )

    def _migrate_metadata(self, directory: Path, settings: QuorumSettings) -> None:
        """An earlier release's JSON metadata log: migrated when this node is its quorum's only
        voter (it alone wrote the log), refused otherwise (StartupError, one line). On a worker
        thread."""
        from kafkalike.server.metadata_migration import METADATA_DIR, LogKind, MigrationRefused, inspect, migrate

        path = directory / METADATA_DIR
        try:
            found = inspect(path)
            if found.kind is not LogKind.JSON:
                return
            if set(settings.config.voter_ids) != {self.node_id}:
                raise MigrationRefused(
                    f"The metadata log in {path} was written by an earlier kafkalike release (JSON records) and "
                    f"can only be migrated by a node that is its quorum's only voter: start node {self.node_id} "
                    "alone first, or move the directory aside to join the cluster empty"
                )
            migrate(path, self.node_id, self.clock.wall_ms())
        except MigrationRefused as exc:
            raise StartupError(str(exc)) from None
        except OSError as exc:
            raise StartupError(f"Failed to migrate the metadata log in {path}: {exc}") from exc

    def _new_broker(self) -> Broker:
        try:
            return Broker(self.config, ephemeral=self.ephemeral, logs=self._logs, clock=self.clock)
        except OSError as exc:
            raise StartupError(f"Failed to create or validate data directory {self.config.log_dirs[0]}: {exc}") from exc

    def _attach_broker(self, broker: Broker, driver: QuorumDriver, settings: QuorumSettings) -> None:
        """A cluster node's broker: admin requests to the active controller (this node's own
        host in process when it is the active one), metadata from the committed log."""
        from kafkalike.server.controller_channel import DEFAULT_REQUEST_TIMEOUT_MS, ControllerChannel
        from kafkalike.server.controller_host import ControllerRequestContext

        channel = ControllerChannel(
            self.node_id,
            driver,
            {e.key.node_id: (e.host, e.port) for e in settings.config.endpoints},
            local=self.controller,
            local_context=ControllerRequestContext,
            clock=self.clock,
            faults=self.faults,
            request_timeout_ms=int(self.config.get("request.timeout.ms") or DEFAULT_REQUEST_TIMEOUT_MS),
            learned_endpoint=driver.endpoint_of,
        )
        broker.describe_quorum = driver.describe
        broker.attach_controller(channel, lambda: None if driver.high_watermark is None else driver.high_watermark - 1)

    async def _start_quorum(self, nursery: trio.Nursery) -> None:
        settings = self.settings
        assert settings.metadata_log_dir is not None
        directory = settings.metadata_log_dir
        if self._memory_log is None and self.single and self.ephemeral:
            self._memory_log = MemoryRaftLog()
        if self.single:
            # The single node formats an empty directory itself, as it always has.
            assert self.broker is not None
            self.cluster_id = await trio.to_thread.run_sync(self.broker.prepare_identity)
        elif self._memory_log is None:
            self.cluster_id, settings.directory_id = await trio.to_thread.run_sync(
                read_identity, directory, self.node_id
            )
        else:
            self.cluster_id = self.config.get("cluster.id") or "kafkalike-node-cluster0"
        if not settings.config.voters and CONTROLLER in self.roles:
            await self._read_formatted_voters(directory, settings)
        if self._memory_log is None:
            # The broker locks its own log.dirs; the metadata directory is locked here only when
            # it is not one of them.
            if BROKER not in self.roles or directory not in self.config.log_dirs:
                try:
                    self._locks = await trio.to_thread.run_sync(lock_log_dirs, [directory])
                except LogDirError as exc:
                    raise StartupError(str(exc)) from exc
            await trio.to_thread.run_sync(self._migrate_metadata, directory, settings)
        settings.cluster_id = self.cluster_id
        server = QuorumServer(
            settings,
            clock=self.clock,
            faults=self.faults,
            rng=random.Random(self.rng.getrandbits(64)),
            bound=self._controller_bound,
            memory_log=self._memory_log,
        )
        self._controller_bound = None  # a restart binds again
        self.quorum = server
        try:
            driver = await server.open()
        except (OSError, QuorumStateFileError) as exc:
            raise StartupError(f"Failed to load the metadata log in {directory}: {exc}") from exc
        self.driver = driver
        if CONTROLLER in self.roles:
            from kafkalike.server.controller_host import build_controller_host

            bootstrap = await trio.to_thread.run_sync(read_bootstrap, directory)
            host = build_controller_host(
                driver,
                self.config,
                cluster_id=self.cluster_id,
                clock=self.clock,
                rng=random.Random(self.rng.getrandbits(64)),
                bootstrap=bootstrap,
                voters=settings.config.endpoints,
                listener_name=settings.listener_name,
                # A combined node's controller refuses broker configs its own broker could not run with.
                broker_problem=None if self.broker is None else self.broker.broker_config_problem,
            )
            self.controller = host
            server.apis = host
            driver.add_listener(host)
        driver.add_listener(self.image)
        if self.broker is not None:
            driver.add_listener(self.broker.publisher)
            self._attach_broker(self.broker, driver, settings)
        for listener in self._subscribers:
            driver.add_listener(listener)
        if self.controller is not None:
            await nursery.start(self.controller.run)
        try:
            self.controller_address = await nursery.start(server.run)
        except OSError as exc:
            host_name, port = settings.listen or ("", 0)
            raise StartupError(f"Socket server failed to bind to {host_name}:{port}: {exc.strerror or exc}.") from exc
        nursery.start_soon(self._snapshotter, driver)

    async def _start_broker(self, nursery: trio.Nursery) -> None:
        entries = client_listeners(self.config)
        if not entries:
            raise StartupError("listeners must name a listener for clients when the node has the broker role")
        host, port = parse_listener(entries[0])
        broker = self.broker
        assert broker is not None
        try:
            broker.open()
        except OSError as exc:
            raise StartupError(f"Failed to load data directory {broker.data_dir}: {exc}") from exc
        # As Kafka's BrokerServer: clients are served once the metadata has caught up, and the
        # broker's partitions are open for it.
        await nursery.start(broker.publisher.run)
        await self.wait_caught_up()
        await broker.publisher.wait_for_offset(self.metadata_offset)
        broker.remove_stray_partitions()
        broker.hold_clients = not self.single
        try:
            self.client_address = await nursery.start(broker.serve, host, port)
        except OSError as exc:
            host, port = getattr(exc, "host", host), getattr(exc, "port", port)  # the listener that failed
            raise StartupError(f"Socket server failed to bind to {host}:{port}: {exc.strerror or exc}.") from exc
        if self.single and self.controller is not None:
            # No CONTROLLER listener to name: DescribeQuorum v2 gives the only voter's client
            # listener, where its clients reach the quorum.
            name = entries[0].split("://", 1)[0].strip().upper() if "://" in entries[0] else "PLAINTEXT"
            self.controller.voters = (VoterEndpoint(VoterKey(self.node_id), *broker.advertised),)
            self.controller.voters_named = True
            self.controller.listener_name = name
        await self._register_broker(nursery, broker)
        broker.clients_enabled.set()  # unfenced: clients are served from now on, as Kafka does

    async def _register_broker(self, nursery: trio.Nursery, broker: Broker) -> None:
        """Registration and heartbeats with the active controller (the broker lifecycle task),
        until the controller unfences this broker. The client ports are bound first: the
        registration names every advertised listener (a port 0 in the config is only known once
        bound), the inter-broker one first, as Kafka's ListenerInfo orders them."""
        from kafkalike.server.broker_lifecycle_task import BrokerLifecycleTask, lifecycle_from_config, registered

        assert broker.cluster is not None
        lifecycle = lifecycle_from_config(
            self.config,
            cluster_id=self.cluster_id,
            listeners=registered(self.config, broker.advertised_endpoints),
            log_dirs=[self._log_dir_id()],
            # KIP-966: the epoch a clean shutdown left in the log dirs (-1 after a crash).
            previous_broker_epoch=broker.logs.previous_broker_epoch(),
            rng=random.Random(self.rng.getrandbits(64)),
        )
        task = BrokerLifecycleTask(
            lifecycle, broker.cluster.channel, self.clock, lambda: broker.publisher.published_offset
        )
        broker.lifecycle = task
        await nursery.start(task.run)
        published = broker.publisher

        async def first_publish() -> None:
            await published.wait_for_offset(self.metadata_offset)

        await task.startup(first_publish)
        broker.cluster.broker_epoch = task.broker_epoch
        broker.logs.broker_epoch = task.broker_epoch  # written into the clean shutdown files
        for name, partitions in self._seed_topics:
            if name in broker.controller.image.topics:
                continue
            (result,) = await broker.cluster.create_topics([NewTopic(name, partitions, {})])
            if isinstance(result, ControllerError) and result.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise StartupError(f"Failed to create the seed topic {name}: {result.message}")

    def _log_dir_id(self) -> uuid.UUID:
        """The log directory's id from its meta.properties (``directory.id``, as kafka-storage
        format writes it). A directory without one (or with a reserved one: Kafka reserves the
        ids below 100 in a zero high half) gets an id derived from the cluster, the node and the
        path, the same at every start: the controller assigns partitions to a directory id, and
        a broker back with another id would find none of its replicas online."""
        found = self.settings.directory_id
        if found is not None and found.int >= 100:
            return found
        return uuid.uuid5(uuid.NAMESPACE_URL, f"kafkalike:{self.cluster_id}/{self.node_id}/{self.config.log_dirs[0]}")

    # -- snapshots --------------------------------------------------------------------------------

    async def _snapshotter(self, driver: QuorumDriver) -> None:
        """Write a snapshot of the image whenever the policy says one is due."""
        while True:
            await self.image.snapshot_due.wait()
            self.image.snapshot_due = trio.Event()
            await self.write_snapshot(driver, self.image.snapshot_reason)

    async def write_snapshot(
        self, driver: QuorumDriver | None = None, reason: str = "asked to"
    ) -> OffsetAndEpoch | None:
        """A snapshot of the current image, handed to the driver (which deletes the log before it);
        its id, or None when there is nothing new to snapshot or the log cannot take it yet."""
        driver = driver or self.driver
        if driver is None:
            return None
        image = self.image.image
        end_offset = image.provenance.last_offset + 1
        latest = driver.node.log.latest_snapshot_id()
        if end_offset <= 0 or (latest is not None and latest.offset >= end_offset):
            return None
        now_ms = self.clock.wall_ms()  # read here: the clock may follow trio's, not readable off the loop
        # A dynamic quorum's snapshots keep the voters in force at their end, as Kafka's do.
        voter_set, kraft_version = await driver.voters_at(end_offset - 1)

        def build() -> tuple[SnapshotId, bytes]:
            if kraft_version < 1 or not voter_set.nodes:
                return build_image_snapshot(image, now_ms=now_ms)
            return build_image_snapshot(
                image, now_ms=now_ms, kraft_version=kraft_version, voters=voter_set.to_message()
            )

        snapshot_id, data = await trio.to_thread.run_sync(build)
        try:
            written = await driver.snapshot(snapshot_id.end_offset, data)
        except (ValueError, OSError) as exc:
            log.info("node %d: no metadata snapshot at %d yet: %s", self.node_id, end_offset, exc)
            return None
        self.image.policy.on_snapshot(self.clock.wall_ms())
        self.snapshots_written.append(written)
        log.info(
            "node %d: wrote metadata snapshot %d-%d because %s", self.node_id, written.offset, written.epoch, reason
        )
        return written

    # -- stop -------------------------------------------------------------------------------------

    async def _shut_down(self) -> None:
        """The graceful part of a stop: the broker's controlled shutdown, then a leader resigns."""
        broker = self.broker
        shutdown: Callable[[], Any] | None = getattr(broker, "controlled_shutdown", None)
        if shutdown is not None:
            # Bounded by the broker's own deadline, Kafka's: BrokerServer.shutdown() waits up to
            # five minutes for the controller's approval, then logs that it timed out and goes on.
            await shutdown()
        driver = self.driver
        if driver is not None and driver.is_leader and not await driver.resign_gracefully(RESIGN_WAIT_S):
            log.info("not every voter acknowledged the resignation within %.0f s; stopping anyway", RESIGN_WAIT_S)

    async def _close(self) -> None:
        """Logs closed on worker threads: the broker's first (it stopped serving), then the quorum's."""
        broker, self.broker = self.broker, None
        if broker is not None:
            await broker.aclose()
        server, self.quorum = self.quorum, None
        if server is not None:
            await server.aclose()
        self.driver = None
        self.controller = None
        for lock in self._locks:
            lock.release()
        self._locks = []


# -- a node as a process ----------------------------------------------------------------------------


# How long the single node's ready line waits for its coordinator shards to load.
READY_LOAD_WAIT_S = 30.0


async def run_node(
    config: BrokerConfig,
    *,
    ephemeral: bool = False,
    port_file: Path | None = None,
    seed_topics: list[tuple[str, int]] | None = None,
    write_port_file: Callable[[Path, int], None] | None = None,
) -> None:
    """Serve until SIGTERM or SIGINT, handled once: the first starts a graceful stop, later ones
    are logged and ignored. StartupError for what stops the start."""
    node = Node(config, ephemeral=ephemeral, seed_topics=seed_topics)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            address = node.client_address or node.controller_address
            assert address is not None
            if node.single:
                # Ready means ready for a drop-in broker: its coordinators serve what it had.
                await node.wait_coordinators_loaded(READY_LOAD_WAIT_S)
            if port_file is not None and write_port_file is not None:
                write_port_file(port_file, address[1])
            _log_ready(node, address)
            nursery.start_soon(_watch_stopped, node, nursery.cancel_scope)
            stopping = False
            async for signum in signals:
                name = signal.Signals(signum).name
                if stopping:
                    log.info("received %s while shutting down; already stopping", name)
                    continue
                stopping = True
                log.info("received %s, shutting down", name)
                node.request_stop()
    log.info("kafkalike stopped; logs flushed" if BROKER in node.roles else "kafkalike controller stopped")


async def _watch_stopped(node: Node, scope: trio.CancelScope) -> None:
    await node._stopped.wait()
    scope.cancel()


def _listeners_text(broker: Broker | None) -> str:
    """Every client listener as bound: NAME://host:port,..."""
    bound = {} if broker is None else broker.bound_listeners
    return ",".join(f"{name}://{host}:{port}" for name, (host, port) in bound.items())


def _log_ready(node: Node, address: tuple[str, int]) -> None:
    if node.single:
        broker = node.broker
        assert broker is not None
        log.info(
            "kafkalike ready on %s:%d (node %d, cluster %s, data %s; listeners %s)",
            address[0],
            address[1],
            node.node_id,
            broker.cluster_id,
            broker.data_dir,
            _listeners_text(broker),
        )
        return
    assert node.settings is not None
    voters = ",".join(str(v) for v in sorted(node.settings.config.voter_ids))
    parts = []
    if node.client_address is not None:
        parts.append(f"clients on {_listeners_text(node.broker)}")
    if node.controller_address is not None:
        parts.append(f"controller on {node.controller_address[0]}:{node.controller_address[1]}")
    log.info(
        "kafkalike ready on %s:%d (node %d, cluster %s, roles %s, voters %s; %s; metadata %s)",
        address[0],
        address[1],
        node.node_id,
        node.cluster_id,
        ",".join(node.roles),
        voters,
        ", ".join(parts),
        node.settings.metadata_log_dir,
    )


__all__ = [
    "ImagePublisher",
    "Node",
    "NodeConfigError",
    "NodeImage",
]
