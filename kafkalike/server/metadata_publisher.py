"""The broker's side of the metadata log: committed batches in, the broker moved, the image out
(Kafka's BrokerMetadataPublisher over its MetadataLoader).

The publisher is a :class:`~kafkalike.server.quorum.driver.CommitListener` of the node's quorum
driver: each committed batch (and a loaded snapshot) is queued on the event loop at once, and
its ``run`` task applies them in log order, one at a time:

1. the loader replays the batch into a :class:`~kafkalike.controller.delta.MetadataDelta`;
2. the replica manager takes ``delta.local_changes(node_id)``: deleted partitions stopped first,
   new ones opened on worker threads, leadership and follower roles taken
   (``replica_files.apply_replica_changes``); changes a disk error kept from being taken are
   taken again, with later ones, until they are (``_take``);
3. what that changed is told to the coordinators (``on_replica_changes``: the group and
   transaction coordinators load the shards of ``__consumer_offsets`` / ``__transaction_state``
   partitions this broker now leads and unload those it no longer leads);
4. changed configs take effect: the open partitions' LogConfig, the broker's dynamic configs
   (``on_configs``);
5. the new image is published (``image``): what handlers answer from from now on.

Handlers therefore never see a partition in the image before this broker has made its log, so a
client told of a new topic by Metadata can produce to it at once. Kafka publishes to its
metadata cache first and lets clients retry NOT_LEADER_OR_FOLLOWER meanwhile; the order here is
stricter and answers the same once both are done.

A batch that cannot be replayed (a record this release cannot read, or one that does not follow
the image) is logged and skipped, as Kafka's broker reports a metadata fault and goes on;
``replay_errors`` counts them.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import trio

from kafkalike.controller.delta import NO_LOCAL_CHANGES, LocalReplicaChanges, MetadataDelta
from kafkalike.controller.image import BROKER_RESOURCE, EMPTY, EMPTY_IMAGE, ConfigResource, MetadataImage
from kafkalike.controller.loader import MetadataLoader
from kafkalike.log import LogConfig
from kafkalike.log.errors import LogError
from kafkalike.log.snapshot_files import SnapshotId
from kafkalike.protocol.metadata_records import MetadataBatch, MetadataRecordError, decode_metadata_record
from kafkalike.raft.log import OffsetAndEpoch
from kafkalike.replica import AppliedChanges, ReplicaManager
from kafkalike.server.clock import Clock
from kafkalike.server.quorum.driver import CommittedBatch
from kafkalike.server.replica_files import apply_replica_changes

log = logging.getLogger("kafkalike.metadata")
NO_LEADER = -1
# Partitions whose logs could not be opened are tried again after this long, doubling each
# time up to the maximum (a directory that stays broken is not retried in a busy loop).
PARTITION_RETRY_FIRST_S = 0.5
PARTITION_RETRY_MAX_S = 30.0


def metadata_batch(batch: CommittedBatch) -> MetadataBatch:
    """A committed batch of the driver as the loader takes it (its records decoded)."""
    records = () if batch.control else tuple(decode_metadata_record(v) for v in batch.values)
    return MetadataBatch(batch.base_offset, batch.last_offset, batch.epoch, -1, records)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    snapshot_id: OffsetAndEpoch
    data: bytes


class MetadataPublisher:
    """See the module docstring."""

    def __init__(
        self,
        node_id: int,
        replicas: ReplicaManager,
        *,
        clock: Clock,
        log_config: Callable[[Mapping[str, str]], LogConfig],
        on_replica_changes: Sequence[Callable[[AppliedChanges], None]] = (),
        on_configs: Callable[[Mapping[str, str], Mapping[str, str]], None] | None = None,
        image: MetadataImage = EMPTY_IMAGE,
    ) -> None:
        """``log_config``: a topic's LogConfig from its overrides (the broker's defaults under
        them). ``on_configs(cluster_default, this_broker)``: the broker resource's dynamic
        configs, whenever they changed."""
        self.node_id = node_id
        self.replicas = replicas
        self.clock = clock
        self.log_config = log_config
        self.on_replica_changes = list(on_replica_changes)
        self.on_configs = on_configs
        self.loader = MetadataLoader(image)
        self.image = image
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.replay_errors = 0
        self.replica_errors = 0
        self._pending: deque[CommittedBatch | _Snapshot] = deque()
        self._arrived = trio.Event()
        self._published = trio.Event()
        self._running = False
        # Replica changes not taken yet (a log could not be opened), taken again at _retry_at.
        self._untaken = NO_LOCAL_CHANGES
        self._retry_s = PARTITION_RETRY_FIRST_S
        self._retry_at = math.inf
        self._taken = trio.Event()

    # -- CommitListener (on the event loop: quick) -------------------------------------------

    def handle_commit(self, batch: CommittedBatch) -> None:
        self._pending.append(batch)
        self._arrived.set()

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self._pending.append(_Snapshot(snapshot_id, data))
        self._arrived.set()

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        self.leader_id, self.leader_epoch = leader_id, epoch

    # -- what handlers see -------------------------------------------------------------------

    @property
    def published_offset(self) -> int:
        """The last offset of the metadata log the published image holds (-1: none)."""
        return self.image.provenance.last_offset

    @property
    def caught_up(self) -> bool:
        """Nothing committed is waiting to be applied."""
        return not self._pending

    async def wait_until(self, predicate: Callable[[MetadataImage], bool], deadline_s: float = math.inf) -> bool:
        """Until the published image satisfies ``predicate`` (True) or ``deadline_s`` passes
        on trio's clock (False)."""
        with trio.move_on_at(deadline_s):
            while not predicate(self.image):
                await self._published.wait()
            return True
        return predicate(self.image)

    async def wait_for_offset(self, offset: int, deadline_s: float = math.inf) -> bool:
        """Until the published image holds the metadata log up to ``offset``."""
        return await self.wait_until(lambda image: image.provenance.last_offset >= offset, deadline_s)

    # -- the task ------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Apply what was committed, in order, for as long as the broker runs."""
        self._running = True
        task_status.started()
        try:
            while True:
                await self.publish_pending()
                if not self._untaken:
                    await self._arrived.wait()
                    continue
                with trio.move_on_after(max(0.0, self._retry_at - self.clock.monotonic_s())):
                    await self._arrived.wait()
                if not self._pending and self._untaken and self.clock.monotonic_s() >= self._retry_at:
                    await self._take(self._untaken, self.image)
        finally:
            self._running = False

    async def publish_pending(self) -> None:
        """Apply every queued batch and snapshot now (``run`` calls it; so may a start-up that
        replays the log before serving)."""
        while self._pending:
            item = self._pending.popleft()
            if not self._pending:
                self._arrived = trio.Event()
            delta = self._load_snapshot(item) if isinstance(item, _Snapshot) else self._replay(item)
            if delta is not None:
                await self._publish(delta, self.loader.image)

    def _replay(self, batch: CommittedBatch) -> MetadataDelta | None:
        try:
            return self.loader.apply_batch(metadata_batch(batch))
        except (MetadataRecordError, ValueError) as exc:
            self.replay_errors += 1
            log.error(
                "node %d: committed metadata at offsets %d-%d cannot be replayed, skipped: %s",
                self.node_id,
                batch.base_offset,
                batch.last_offset,
                exc,
            )
            return None

    def _load_snapshot(self, snapshot: _Snapshot) -> MetadataDelta | None:
        try:
            return self.loader.load_snapshot(
                SnapshotId(snapshot.snapshot_id.offset, snapshot.snapshot_id.epoch), snapshot.data
            )
        except (MetadataRecordError, ValueError) as exc:
            self.replay_errors += 1
            log.error("node %d: metadata snapshot %s cannot be loaded: %s", self.node_id, snapshot.snapshot_id, exc)
            return None

    async def _publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        old = self.image
        changes = delta.local_changes(self.node_id)
        if changes:  # with those not taken before (else they wait for their retry time)
            await self._take(self._untaken.then(changes), image)
        if image.configs != old.configs:
            # The broker's dynamic configs first: the topics' log configs fall back on them.
            if self.on_configs is not None:
                self.on_configs(
                    image.configs.get(ConfigResource(BROKER_RESOURCE, ""), EMPTY),
                    image.configs.get(ConfigResource(BROKER_RESOURCE, str(self.node_id)), EMPTY),
                )
            self.replicas.apply_configs(lambda name: self._config_if_known(image, name))
        self.image = image
        published, self._published = self._published, trio.Event()
        published.set()

    async def _take(self, changes: LocalReplicaChanges, image: MetadataImage) -> None:
        """The replica manager takes ``changes``. If a partition's log cannot be opened (a full
        or failing disk), the image moves on regardless (it is what was committed), the deletes
        stand, and no new partition or role is taken: those partitions answer KAFKA_STORAGE_ERROR
        (Kafka's offline partitions) and the changes are taken again later (``run``), so that
        they are hosted once the disk takes them, without a restart."""

        def config_for(name: str) -> LogConfig:
            return self.log_config(image.topic_configs(name))

        try:
            applied = await apply_replica_changes(self.replicas, changes, config_for, self.clock.wall_ms())
        except (OSError, LogError) as exc:  # a full or failing disk, a directory of another topic
            self.replica_errors += 1
            first = not self._untaken
            self._untaken = changes.roles()
            self.replicas.set_offline(
                (p.topic_name, p.partition_id) for p in [*changes.leaders.values(), *changes.followers.values()]
            )
            self._retry_s = PARTITION_RETRY_FIRST_S if first else min(self._retry_s * 2, PARTITION_RETRY_MAX_S)
            self._retry_at = self.clock.monotonic_s() + self._retry_s
            log.error(
                "node %d: partitions of metadata offset %d not opened (trying again in %.1f s): %s",
                self.node_id,
                image.provenance.last_offset,
                self._retry_s,
                exc,
            )
            return
        if self._untaken:
            log.info("node %d: the partitions not opened before are open now", self.node_id)
        self._untaken = NO_LOCAL_CHANGES
        self.replicas.set_offline(())
        for listener in self.on_replica_changes:
            listener(applied)
        taken, self._taken = self._taken, trio.Event()
        taken.set()

    @property
    def offline(self) -> bool:
        """Whether some partition this broker should host is not open (see ``_take``)."""
        return bool(self._untaken)

    async def wait_all_open(self) -> None:
        """Until every partition the published image gives this broker is open."""
        while self._untaken:
            await self._taken.wait()

    def _config_if_known(self, image: MetadataImage, name: str) -> LogConfig | None:
        if image.topic(name) is None:
            return None
        try:
            return self.log_config(image.topic_configs(name))
        except ValueError as exc:
            # Committed by a controller that checked less than this broker does: the topic's
            # partitions keep the config they run with, and the log says why.
            log.error("node %d: the new configs of topic %s not applied: %s", self.node_id, name, exc)
            return None
