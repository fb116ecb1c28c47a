"""The quorum controller: every metadata operation as a pure step, records out (Kafka's
QuorumController over its control managers).

Each operation method takes the request's data and ``now_ms`` and returns a
``ControllerResult(records, reply)``; it changes nothing by itself. The driver (the Raft
leader's side, ``server/quorum``) appends a result's records to the metadata log as one batch
and says so (``appended``), and answers the client with the reply once those records are
committed. Committed batches, from whichever controller wrote them, come back through
``replay`` (or ``load_snapshot``), which moves the image with the same ``MetadataLoader`` a
standby controller and a broker use: there is one replay path.

Operations are checked against ``latest_image``: the committed image plus the records appended
but not yet committed, in order, as Kafka's active controller applies its own records at once.
So two CreateTopics of one name in quick succession make one topic (the second is
TOPIC_ALREADY_EXISTS before the first is committed), and two producer id blocks in a row do not
overlap. When the driver loses leadership (or an append fails) it calls ``revert``: the
uncommitted records are dropped, and what is checked next is the committed image again.

Where the parts are: topics and partitions ``replication_control``, a leader's AlterPartition,
ElectLeaders and the controller's own unclean election and leader balancing passes
``partition_control`` (their timers come in through ``poll`` too), placement ``placement``,
configs ``configuration_control``, producer ids ``producer_id_control``, features and the
bootstrap records ``features``. Broker registration, heartbeats, fencing and controlled shutdown
are ``cluster_control`` (see "brokers" below): they run through ``run`` against the same latest
image, and ``poll`` is where their timers come in.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kafkalike.configs import DECLARED, declared_int
from kafkalike.controller.api_error import ApiError
from kafkalike.controller.broker_partition_changes import BrokerPartitionChanges
from kafkalike.controller.configuration_control import (
    AlterConfigsResourceResult,
    ConfigDefaults,
    ConfigurationControl,
)
from kafkalike.controller.delta import ControllerResult, MetadataDelta, MetadataReplayError
from kafkalike.controller.features import MIN_INSYNC_REPLICAS, activation_records, default_bootstrap_records
from kafkalike.controller.image import EMPTY_IMAGE, MetadataImage
from kafkalike.controller.loader import MetadataLoader
from kafkalike.controller.partition_control import (
    AlterPartitionReply,
    ElectLeadersReply,
    alter_partition,
    balance_partition_leaders,
    elect_leaders,
    elect_unclean_leaders,
)
from kafkalike.controller.producer_id_control import ProducerIdsBlock, allocate_producer_ids
from kafkalike.controller.reassignment_control import (
    AlterReassignmentsReply,
    alter_partition_reassignments,
    list_partition_reassignments,
)
from kafkalike.controller.replication_control import (
    CreatableTopicResult,
    CreatePartitionsTopicResult,
    DeletableTopicResult,
    ReplicationControl,
    TopicDefaults,
)
from kafkalike.log.snapshot_files import SnapshotId
from kafkalike.protocol.codec import Message
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataBatch

log = logging.getLogger("kafkalike.controller")
R = TypeVar("R")
DEFAULT_UNCLEAN_ELECTION_INTERVAL_MS = declared_int("unclean.leader.election.interval.ms")
DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS = declared_int("leader.imbalance.check.interval.seconds") * 1000
AGAIN_SOON_MS = 10  # Kafka's delay of a periodic task that asked to run again at once


@dataclass
class _Uncommitted:
    """One result's records, appended (``last_offset`` once the driver said where) or about to be."""

    records: tuple[ApiMessageAndVersion, ...]
    last_offset: int | None = None


class QuorumController:
    """The controller's operations over one image, and the replay of what was committed."""

    def __init__(
        self,
        *,
        node_id: int,
        rng: random.Random,
        topic_defaults: TopicDefaults | None = None,
        config_defaults: ConfigDefaults | None = None,
        image: MetadataImage = EMPTY_IMAGE,
        delete_topic_enable: bool = True,
        unclean_election_interval_ms: int = DEFAULT_UNCLEAN_ELECTION_INTERVAL_MS,
        leader_imbalance_check_interval_ms: int | None = DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS,
    ) -> None:
        """``leader_imbalance_check_interval_ms``: None when auto.leader.rebalance.enable is false."""
        self.node_id = node_id
        self.leader_imbalance_check_interval_ms = leader_imbalance_check_interval_ms
        self._balance_due_ms: int | None = None
        self._balance_again = False
        self.unclean_election_interval_ms = unclean_election_interval_ms
        self._unclean_election_due_ms: int | None = None
        self._unclean_election_again = False
        self.loader = MetadataLoader(image)
        self.replication = ReplicationControl(rng, topic_defaults, config_defaults, delete_topic_enable)
        self.configuration = ConfigurationControl(config_defaults or ConfigDefaults(), node_id)
        self._uncommitted: deque[_Uncommitted] = deque()
        self._latest = image

    # -- images ------------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        """The committed image."""
        return self.loader.image

    @property
    def latest_image(self) -> MetadataImage:
        """The committed image with every appended, uncommitted record on top."""
        return self._latest

    @property
    def uncommitted_records(self) -> int:
        return sum(len(u.records) for u in self._uncommitted)

    def replay(self, batch: MetadataBatch) -> MetadataDelta:
        """Take one committed batch (from this controller or another); the delta it made."""
        delta = self.loader.apply_batch(batch)
        while self._uncommitted and (offset := self._uncommitted[0].last_offset) is not None:
            if offset > batch.last_offset:
                break
            self._uncommitted.popleft()
        self._rebuild_latest()
        return delta

    def load_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> MetadataDelta:
        """Replace the committed image by a snapshot's (a standby far behind, or at start-up)."""
        delta = self.loader.load_snapshot(snapshot_id, data)
        self._uncommitted.clear()
        self._latest = self.loader.image
        return delta

    def appended(self, last_offset: int) -> None:
        """The driver appended the oldest result not yet placed, ending at ``last_offset``."""
        for entry in self._uncommitted:
            if entry.last_offset is None:
                entry.last_offset = last_offset
                return
        raise ValueError(f"appended at {last_offset}, but no result is waiting to be appended")

    def revert(self) -> None:
        """Leadership lost or an append failed: the uncommitted records will never be committed
        by this controller; checks go back to the committed image."""
        if self._uncommitted:
            log.info("dropping %d uncommitted metadata record(s)", self.uncommitted_records)
        self._uncommitted.clear()
        self._latest = self.loader.image

    def _rebuild_latest(self) -> None:
        if not self._uncommitted:
            self._latest = self.loader.image
            return
        delta = MetadataDelta(self.loader.image)
        try:
            for entry in self._uncommitted:
                delta.replay_all(entry.records)
        except MetadataReplayError as exc:
            # The committed log went another way (another leader's records): ours are void.
            log.warning("uncommitted metadata records no longer apply (%s): dropped", exc)
            self.revert()
            return
        self._latest = delta.apply()

    def _pending(self, result: ControllerResult[R]) -> ControllerResult[R]:
        """Hold a result's records as uncommitted: the next operations see them."""
        if result.records:
            self._uncommitted.append(_Uncommitted(result.records))
            self._latest = MetadataDelta(self._latest).replay_all(result.records).apply()
        return result

    def run(self, operation: Callable[[MetadataImage], ControllerResult[R]]) -> ControllerResult[R]:
        """Any operation of another control module (e.g. ``cluster_control``): checked against
        the latest image, its records held as uncommitted like every other operation's."""
        return self._pending(operation(self._latest))

    # -- features ----------------------------------------------------------------------------

    def activate(self, bootstrap: Sequence[ApiMessageAndVersion] | None = None) -> ControllerResult[None]:
        """On becoming the active controller: over an empty log, the bootstrap records (those of
        ``bootstrap.checkpoint``, else the release defaults); over a log that has them, nothing."""
        if self._latest.metadata_version:
            return ControllerResult.of([], None)
        records = list(bootstrap) if bootstrap is not None else default_bootstrap_records()
        partial = self.loader.in_transaction
        log.info("the metadata log is empty: appending %d bootstrap record(s)", len(records))
        static = self.configuration.defaults.broker_value(MIN_INSYNC_REPLICAS) or DECLARED[MIN_INSYNC_REPLICAS].default
        min_isr = int(static or 1)
        return self._pending(activation_records(records, partial_transaction=partial, min_insync_replicas=min_isr))

    # -- topics and partitions ---------------------------------------------------------------

    def create_topics(self, request: Message, now_ms: int) -> ControllerResult[list[CreatableTopicResult]]:
        result = self.replication.create_topics(self._latest, request)
        _log_refusals("CreateTopics", ((r.name, r.error) for r in result.reply))
        return self._pending(result)

    def create_partitions(self, request: Message, now_ms: int) -> ControllerResult[list[CreatePartitionsTopicResult]]:
        result = self.replication.create_partitions(self._latest, request)
        _log_refusals("CreatePartitions", ((r.name, r.error) for r in result.reply))
        return self._pending(result)

    def delete_topics(
        self, request: Message, version: int, now_ms: int
    ) -> ControllerResult[list[DeletableTopicResult]]:
        result = self.replication.delete_topics(self._latest, request, version)
        _log_refusals("DeleteTopics", ((r.name or str(r.topic_id), r.error) for r in result.reply))
        return self._pending(result)

    # -- configs -----------------------------------------------------------------------------

    def incremental_alter_configs(
        self, request: Message, now_ms: int
    ) -> ControllerResult[list[AlterConfigsResourceResult]]:
        result = self.configuration.incremental_alter_configs(self._latest, request)
        _log_refusals("IncrementalAlterConfigs", ((r.resource_name, r.error) for r in result.reply))
        return self._pending(result)

    def alter_configs(self, request: Message, now_ms: int) -> ControllerResult[list[AlterConfigsResourceResult]]:
        result = self.configuration.alter_configs(self._latest, request)
        _log_refusals("AlterConfigs", ((r.resource_name, r.error) for r in result.reply))
        return self._pending(result)

    # -- producer ids ------------------------------------------------------------------------

    def allocate_producer_ids(self, request: Message, now_ms: int) -> ControllerResult[ProducerIdsBlock]:
        result = allocate_producer_ids(self._latest, request.broker_id, request.broker_epoch)
        _log_refusals("AllocateProducerIds", [(str(request.broker_id), result.reply.error)])
        return self._pending(result)

    # -- brokers -----------------------------------------------------------------------------
    #
    # BrokerRegistration, BrokerHeartbeat, UnregisterBroker, fencing after a session timeout
    # and controlled shutdown live in ``controller/cluster_control.py``. Their request methods
    # plug in here the way the ones above do: ``self.run(lambda image: cluster.register(image,
    # request, now_ms))``; their timers (the session timeouts) through ``poll``.

    # -- partitions: AlterPartition, ElectLeaders, the periodic unclean elections --------------
    #
    # They read the partition indexes and the min ISR and unclean election defaults of the
    # active cluster manager (``partitions``: its ``BrokerPartitionChanges``).

    def alter_partition(
        self, partitions: BrokerPartitionChanges, request: Message, version: int, now_ms: int
    ) -> ControllerResult[AlterPartitionReply]:
        return self._pending(alter_partition(self._latest, partitions, request, version))

    def elect_leaders(
        self, partitions: BrokerPartitionChanges, request: Message, version: int, now_ms: int
    ) -> ControllerResult[ElectLeadersReply]:
        result = elect_leaders(self._latest, partitions, request, version)
        return self._pending(result)

    # -- reassignments: AlterPartitionReassignments, ListPartitionReassignments ------------------

    def alter_partition_reassignments(
        self, partitions: BrokerPartitionChanges, request: Message, version: int
    ) -> ControllerResult[AlterReassignmentsReply]:
        return self._pending(alter_partition_reassignments(self._latest, partitions, request, version))

    def list_partition_reassignments(self, request: Message) -> dict[str, Any]:
        """A read of the committed image, as Kafka's appendReadEvent."""
        return list_partition_reassignments(self.image, request)

    def schedule_periodic(self, partitions: BrokerPartitionChanges, now_ms: int) -> None:
        """After every write, as Kafka's QuorumController: when some partition has no leader and
        no unclean election pass is due yet, one is due in ``unclean_election_interval_ms``; when
        some partition is not led by its preferred replica and leader balancing is on, a balancing
        pass is due in ``leader_imbalance_check_interval_ms``. A pass that stopped at its limit is
        due again in 10 ms. A pass already due is not pushed back."""
        if self._unclean_election_due_ms is None and partitions.has_leaderless():
            delay = AGAIN_SOON_MS if self._unclean_election_again else self.unclean_election_interval_ms
            self._unclean_election_due_ms = now_ms + delay
        interval = self.leader_imbalance_check_interval_ms
        if self._balance_due_ms is None and interval is not None and partitions.imbalanced:
            self._balance_due_ms = now_ms + (AGAIN_SOON_MS if self._balance_again else interval)

    def cancel_periodic(self) -> None:
        """No longer the active controller: nothing is due."""
        self._unclean_election_due_ms = self._balance_due_ms = None
        self._unclean_election_again = self._balance_again = False

    def balance_partition_leaders(self, partitions: BrokerPartitionChanges, now_ms: int) -> ControllerResult[bool]:
        """The leader balancing pass that ``poll`` said is due."""
        self._balance_due_ms = None
        result = balance_partition_leaders(self._latest, partitions)
        self._balance_again = result.reply
        if result.records:
            log.info("leader balancing pass: %d preferred leader election(s)", len(result.records))
        return self._pending(result)

    def due(self, now_ms: int) -> list[str]:
        """The periodic passes due at ``now_ms``: "unclean", "balance"."""
        out = []
        if self._unclean_election_due_ms is not None and self._unclean_election_due_ms <= now_ms:
            out.append("unclean")
        if self._balance_due_ms is not None and self._balance_due_ms <= now_ms:
            out.append("balance")
        return out

    def elect_unclean_leaders(self, partitions: BrokerPartitionChanges, now_ms: int) -> ControllerResult[bool]:
        """The unclean election pass that ``poll`` said is due."""
        self._unclean_election_due_ms = None
        result = elect_unclean_leaders(self._latest, partitions)
        self._unclean_election_again = result.reply
        if result.records:
            log.info("unclean election pass: %d partition change(s)", len(result.records))
        return self._pending(result)

    def poll(self, now_ms: int) -> int | None:
        """The next time (ms) the controller has something to do by itself (an unclean election
        or leader balancing pass); None: nothing yet. The brokers' session timeouts are
        cluster_control's."""
        due = [d for d in (self._unclean_election_due_ms, self._balance_due_ms) if d is not None]
        return min(due, default=None)


def _log_refusals(operation: str, outcomes: Iterable[tuple[str, ApiError]]) -> None:
    """One line per operation that refused something: how many, and the first one's reason."""
    refused = [(name, error) for name, error in outcomes if not error.ok]
    if refused:
        name, error = refused[0]
        log.info("%s refused %d resource(s); %s: %s %s", operation, len(refused), name, error.code.name, error.message)
