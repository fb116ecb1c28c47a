"""Broker registration, heartbeats, fencing and unregistration in the controller (pure).

Kafka 4.0's ``ClusterControlManager`` with the broker parts of ``ReplicationControlManager`` and
``QuorumController``. Every operation takes the controller's current image (its state with
every record it has appended) and ``now_ms``, and returns a ``ControllerResult(records,
reply)``; nothing here changes the image: the records do, once replayed. Soft state (last
contact, reported offsets, controlled shutdown) lives in ``BrokerHeartbeats`` and exists only
while this controller is active (``activate`` / ``deactivate``). ``replay(record, offset)`` must
see every record the controller replays, in order, to learn the offset of each broker's
RegisterBrokerRecord.

Rules (Kafka's; the error codes are what the reply carries):

- **BrokerRegistration (62).** Cluster id must match (INCONSISTENT_CLUSTER_ID). A registered
  broker with a live session (a heartbeat within the session timeout at its current epoch)
  and another incarnation id is DUPLICATE_BROKER_REGISTRATION; ZooKeeper-migrating brokers are
  refused (BROKER_ID_NOT_REGISTERED). From metadata.version 3.7-IV2 the log directories must be
  given, unreserved, distinct and not another broker's (INVALID_REGISTRATION). Every feature
  the broker names must include its finalized level (default 1 for metadata.version, 0 for
  others), ``metadata.version`` must be named, and every finalized feature it does not name
  must be at level 0 (UNSUPPORTED_VERSION). A new incarnation gets the broker epoch
  ``next_offset`` (the offset its batch starts at) and is fenced; first its previous
  incarnation leaves every ISR (with ELR on and an unclean shutdown — v3+ requests whose
  ``previous_broker_epoch`` is not the registered epoch — it also leaves every ELR). The same
  incarnation re-registering keeps its epoch, fencing and controlled-shutdown state.
- **BrokerHeartbeat (63).** Recorded as contact first; then a broker never registered or with
  another epoch gets STALE_BROKER_EPOCH. The transitions are ``heartbeats.next_state``'s; each
  writes what Kafka writes: unfence (BrokerRegistrationChangeRecord fenced=-1, then leaders
  for partitions that have none), fence (the broker leaves every ISR and leadership, then
  BrokerRegistrationChangeRecord fenced=1), controlled shutdown (in_controlled_shutdown=1,
  then leaderships moved away); as Kafka 4.0, fencing and unfencing are
  BrokerRegistrationChangeRecords (Fence/UnfenceBrokerRecord were written before 3.3-IV2; both
  are replayed). Log directories it reports offline (from 3.7-IV2) leave its
  registration, and it leaves the partitions in them. ``is_caught_up`` is
  ``current_metadata_offset`` >= the offset of its RegisterBrokerRecord.
- **Session timeout.** Every ``fence_check_interval_ms`` (Kafka: session timeout / 8) one
  expired session is looked at; a registered broker at that epoch is fenced, and the check
  runs again at once while there was one. A broker that stops heartbeating is fenced within
  one session timeout plus one check interval.
- **UnregisterBroker (64).** BROKER_ID_NOT_REGISTERED when unknown; else the broker leaves
  every ISR and ELR, then UnregisterBrokerRecord.

Driving it (the quorum controller facade): ``activate(image, now)`` on becoming the active
controller and ``deactivate()`` on losing it (or when appended records are dropped: the soft state
may have run ahead of them); every request and ``fence_stale_broker`` against the latest image
(committed plus appended), with ``next_offset`` the offset its records will get; ``replay(record,
offset)`` for every record as it is appended or replayed (as Kafka's active controller replays its
own records at once: the order of partitions in later batches follows it); ``fence_stale_broker``
whenever ``poll`` says it is due. Replies go out once their records are committed.

Which partitions each event touches, and in what order, is ``broker_partition_changes``; each
partition's change follows ``partition_change``: with replication factor 1, a fenced broker's
partitions have no leader; without ELR the broker stays their ISR, with ELR (feature
``eligible.leader.replicas.version`` >= 1) the ISR becomes empty and the broker moves to the
ELR and last known ELR, so it leads again when unfenced.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from kafkalike.configs import declared_int
from kafkalike.controller.api_error import ApiError, ControllerApiError
from kafkalike.controller.broker_partition_changes import (
    BrokerPartitionChanges,
    elr_enabled,
    replica_directory,
)
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.features import KRAFT_VERSION_FEATURE, MV_3_3_IV3, MV_3_7_IV2, MV_4_3_IV0
from kafkalike.controller.heartbeats import BrokerControlState, BrokerHeartbeats
from kafkalike.controller.image import METADATA_VERSION_FEATURE, MetadataImage, register_broker_record_version
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record

log = logging.getLogger(__name__)
T = MetadataRecordType

DEFAULT_SESSION_TIMEOUT_MS = declared_int("broker.session.timeout.ms")
RESERVED_DIRECTORY_IDS = 100  # Kafka's DirectoryId: the first 100 UUIDs (high bits 0) are reserved
FENCE, UNFENCE = 1, -1  # BrokerRegistrationFencingChange
IN_CONTROLLED_SHUTDOWN = 1


@dataclass(frozen=True, slots=True)
class _Refusable:
    """A reply's outcome, as every controller operation's: ``error`` is an ApiError."""

    error: ApiError = ApiError.NONE

    @property
    def error_code(self) -> ErrorCode:
        return self.error.code

    @property
    def error_message(self) -> str | None:
        return self.error.message


@dataclass(frozen=True, slots=True)
class BrokerRegistrationReply(_Refusable):
    broker_epoch: int = -1

    def to_response(self) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": self.error_code, "broker_epoch": self.broker_epoch}


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatReply(_Refusable):
    is_caught_up: bool = False
    is_fenced: bool = True
    in_controlled_shutdown: bool = False
    should_shut_down: bool = False

    def to_response(self) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "error_code": self.error_code,
            "is_caught_up": self.is_caught_up,
            "is_fenced": self.is_fenced,
            "should_shut_down": self.should_shut_down,
        }


@dataclass(frozen=True, slots=True)
class UnregisterBrokerReply(_Refusable):
    def to_response(self) -> dict[str, Any]:
        # Kafka's UnregisterBrokerResponse leaves the message at its default "" on success.
        message = "" if self.error_message is None else self.error_message
        return {"throttle_time_ms": 0, "error_code": self.error_code, "error_message": message}


class ClusterControlManager:
    """Registration, heartbeats and fencing; the facade holds one and calls it with its image."""

    def __init__(
        self,
        *,
        cluster_id: str,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        fence_check_interval_ms: int | None = None,
        default_min_insync_replicas: int = 1,
        default_unclean_leader_election: bool = False,
        node_id: int | None = None,
    ) -> None:
        """``node_id``: the controller's (its own dynamic configs count for its partition rules)."""
        self.cluster_id = cluster_id
        self.session_timeout_ms = session_timeout_ms
        self.fence_check_interval_ms = fence_check_interval_ms or max(1, session_timeout_ms // 8)
        self.register_record_offsets: dict[int, int] = {}
        self.partitions = BrokerPartitionChanges(
            default_min_insync_replicas=default_min_insync_replicas,
            default_unclean_leader_election=default_unclean_leader_election,
            node_id=node_id,
        )
        self.heartbeats: BrokerHeartbeats | None = None
        self._next_check_ms: int | None = None

    # -- active or standby

    def activate(self, image: MetadataImage, now_ms: int) -> None:
        """Become the active controller: every unfenced broker's session starts now (as Kafka's
        activate: a fenced one, such as a broker that shut down cleanly, has none, so it may
        register again at once)."""
        self.heartbeats = BrokerHeartbeats(self.session_timeout_ms)
        for broker in image.brokers.values():
            self.heartbeats.register(broker.broker_id, broker.fenced)
            if not broker.fenced:
                self.heartbeats.track(broker.broker_id, broker.epoch, now_ms)
        self._next_check_ms = now_ms + self.fence_check_interval_ms

    def deactivate(self) -> None:
        self.heartbeats = None
        self._next_check_ms = None

    @property
    def active(self) -> bool:
        return self.heartbeats is not None

    def poll(self, now_ms: int) -> int | None:
        """When ``fence_stale_broker`` is next due (None while standby)."""
        return self._next_check_ms

    # -- replay: the same path on every controller

    def replay(self, record: ApiMessageAndVersion, offset: int) -> None:
        """Follow a replayed record (the image itself is moved by the delta)."""
        hb = self.heartbeats
        if record.type in (T.PARTITION_RECORD, T.PARTITION_CHANGE_RECORD, T.REMOVE_TOPIC_RECORD):
            self.partitions.replay(record)
        elif record.type == T.REGISTER_BROKER_RECORD:
            self.register_record_offsets[record.broker_id] = offset
            if hb is not None:
                hb.remove(record.broker_id)
                hb.register(record.broker_id, record.fenced)
        elif record.type == T.UNREGISTER_BROKER_RECORD:
            self.register_record_offsets.pop(record.broker_id, None)
            if hb is not None:
                hb.remove(record.broker_id)
        elif hb is not None and record.type in (T.FENCE_BROKER_RECORD, T.UNFENCE_BROKER_RECORD):
            hb.register(record.id, record.type == T.FENCE_BROKER_RECORD)
        elif hb is not None and record.type == T.BROKER_REGISTRATION_CHANGE_RECORD and record.broker_id in hb.brokers:
            fenced = {FENCE: True, UNFENCE: False}.get(record.fenced, hb.brokers[record.broker_id].fenced)
            hb.register(record.broker_id, fenced)

    def _require_active(self) -> BrokerHeartbeats:
        if self.heartbeats is None:
            raise ControllerApiError(ErrorCode.NOT_CONTROLLER, "This controller is not active.")
        return self.heartbeats

    # -- BrokerRegistration

    def register_broker(
        self,
        image: MetadataImage,
        request: Any,
        *,
        api_version: int,
        next_offset: int,
        now_ms: int,
        kraft_version: int = 0,
    ) -> ControllerResult[BrokerRegistrationReply]:
        """A BrokerRegistration request; ``next_offset`` is where the result's records will start."""
        try:
            records, epoch = self._register(image, request, api_version, next_offset, now_ms, kraft_version)
        except ControllerApiError as e:
            log.info("broker %s registration refused: %s (%s)", request.broker_id, e.error.message, e.error.code.name)
            return ControllerResult.of((), BrokerRegistrationReply(e.error, -1))
        return ControllerResult.of(records, BrokerRegistrationReply(broker_epoch=epoch))

    def _register(
        self, image: MetadataImage, req: Any, api_version: int, next_offset: int, now_ms: int, kraft_version: int
    ) -> tuple[list[ApiMessageAndVersion], int]:
        hb = self._require_active()
        if req.cluster_id != self.cluster_id:
            raise ControllerApiError(
                ErrorCode.INCONSISTENT_CLUSTER_ID,
                f"Expected cluster ID {self.cluster_id}, but got cluster ID {req.cluster_id}",
            )
        broker_id = req.broker_id
        existing = image.brokers.get(broker_id)
        same_incarnation = existing is not None and existing.incarnation_id == req.incarnation_id
        if existing is not None and not same_incarnation and hb.has_valid_session(broker_id, existing.epoch, now_ms):
            raise ControllerApiError(
                ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                "Another broker is registered with that broker id. If the broker was recently restarted this "
                "should self-resolve once the heartbeat manager expires the broker's session.",  # Kafka 4.4's
            )
        if req.get("is_migrating_zk_broker"):
            raise ControllerApiError(
                ErrorCode.BROKER_ID_NOT_REGISTERED, "Controller does not support registering ZK brokers."
            )
        mv = image.metadata_version
        log_dirs = list(req.get("log_dirs") or [])
        if mv >= MV_3_7_IV2:
            self._check_directories(image, broker_id, log_dirs)
        features = self._checked_features(image, broker_id, req.features, kraft_version)
        fields: dict[str, Any] = {
            "broker_id": broker_id,
            "is_migrating_zk_broker": False,
            "incarnation_id": req.incarnation_id,
            "rack": req.rack,
            "end_points": [
                {"name": e.name, "host": e.host, "port": e.port, "security_protocol": e.security_protocol}
                for e in req.listeners
            ],
            "features": features,
        }
        if mv >= MV_3_7_IV2:
            fields["log_dirs"] = log_dirs
        records: list[ApiMessageAndVersion] = []
        if not same_incarnation:
            previous_epoch = existing.epoch if existing is not None else -2
            clean = api_version >= 3 and previous_epoch == req.get("previous_broker_epoch", -1)
            self._handle_broker_shutdown(image, broker_id, clean, records)
            fields.update(broker_epoch=next_offset, fenced=True, in_controlled_shutdown=False)
            log.info(
                "registering broker %d incarnation %s, broker epoch %d", broker_id, req.incarnation_id, next_offset
            )
        else:
            assert existing is not None
            fields.update(
                broker_epoch=existing.epoch,
                fenced=existing.fenced,
                in_controlled_shutdown=existing.in_controlled_shutdown,
            )
        version = register_broker_record_version(mv)
        if version < 1:
            fields.pop("in_controlled_shutdown")
        if version < 2:
            fields.pop("is_migrating_zk_broker")
        records.append(metadata_record(T.REGISTER_BROKER_RECORD, version, **fields))
        if not same_incarnation:
            hb.remove(broker_id)
        hb.register(broker_id, fields["fenced"])
        return records, fields["broker_epoch"]

    @staticmethod
    def _check_directories(image: MetadataImage, broker_id: int, log_dirs: list[uuid.UUID]) -> None:
        bad = ErrorCode.INVALID_REGISTRATION
        if not log_dirs:
            raise ControllerApiError(bad, "No directories specified in request")
        if any(d.int >> 64 == 0 and (d.int & (2**64 - 1)) < RESERVED_DIRECTORY_IDS for d in log_dirs):
            raise ControllerApiError(bad, "Reserved directory ID in request")
        if len(set(log_dirs)) != len(log_dirs):
            raise ControllerApiError(bad, "Duplicate directory ID in request")
        for other in image.brokers.values():
            if other.broker_id != broker_id:
                for d in log_dirs:
                    if d in other.directories:
                        raise ControllerApiError(
                            bad, f"Broker {other.broker_id} is already registered with directory {d}"
                        )

    @staticmethod
    def _checked_features(
        image: MetadataImage, broker_id: int, wanted: Any, kraft_version: int
    ) -> list[dict[str, Any]]:
        finalized = {**image.features, KRAFT_VERSION_FEATURE: kraft_version}
        if image.metadata_version:
            finalized[METADATA_VERSION_FEATURE] = image.metadata_version

        def check(name: str, low: int, high: int) -> None:
            level = finalized.get(name, 1 if name == METADATA_VERSION_FEATURE else 0)
            if not low <= level <= high:
                raise ControllerApiError(
                    ErrorCode.UNSUPPORTED_VERSION,
                    f"Unable to register because the broker does not support finalized version {level} of "
                    f"{name}. The broker wants a version between {low} and {high}, inclusive.",
                )

        out = []
        for f in wanted:
            check(f.name, f.min_supported_version, f.max_supported_version)
            out.append(
                {
                    "name": f.name,
                    "min_supported_version": f.min_supported_version,
                    "max_supported_version": f.max_supported_version,
                }
            )
        named = {f.name for f in wanted}
        if METADATA_VERSION_FEATURE not in named:
            raise ControllerApiError(
                ErrorCode.INVALID_REGISTRATION, "Request features do not contain 'metadata.version'"
            )
        for name, level in finalized.items():
            if level != 0 and name not in named:
                check(name, 0, 0)
        return out

    # -- BrokerHeartbeat

    def heartbeat(
        self, image: MetadataImage, request: Any, *, next_offset: int, now_ms: int
    ) -> ControllerResult[BrokerHeartbeatReply]:
        """A BrokerHeartbeat request; ``next_offset`` is where the result's records will start."""
        try:
            return self._heartbeat(image, request, next_offset, now_ms)
        except ControllerApiError as e:
            log.info("broker %s heartbeat refused: %s (%s)", request.broker_id, e.error.message, e.error.code.name)
            return ControllerResult.of((), BrokerHeartbeatReply(e.error))

    def _heartbeat(
        self, image: MetadataImage, req: Any, next_offset: int, now_ms: int
    ) -> ControllerResult[BrokerHeartbeatReply]:
        hb = self._require_active()
        broker_id, epoch = req.broker_id, req.broker_epoch
        hb.track(broker_id, epoch, now_ms)
        register_offset = self.register_record_offsets.get(broker_id)
        if register_offset is None:
            raise ControllerApiError(
                ErrorCode.STALE_BROKER_EPOCH, f"Receive a heartbeat from broker {broker_id} before registration"
            )
        check_broker_epoch(image, broker_id, epoch)
        if broker_id not in hb.brokers:  # registered in an image this manager was not activated on
            hb.register(broker_id, image.brokers[broker_id].fenced)
        current, following = hb.next_state(
            broker_id,
            want_fence=req.want_fence,
            want_shut_down=req.want_shut_down,
            current_metadata_offset=req.current_metadata_offset,
            register_record_offset=register_offset,
            has_leaderships=lambda: any(True for _ in self.partitions.led_by(image, broker_id)),
        )
        records: list[ApiMessageAndVersion] = []
        S = BrokerControlState
        if current is not following:
            if following in (S.FENCED, S.SHUTDOWN_NOW):
                self._handle_fenced(image, broker_id, records)
            elif following is S.UNFENCED:
                self._handle_unfenced(image, broker_id, epoch, records)
            else:
                self._handle_in_controlled_shutdown(image, broker_id, epoch, records)
        hb.touch(broker_id, following.fenced, req.current_metadata_offset)
        if image.metadata_version >= MV_3_7_IV2:
            self._handle_directories_offline(image, broker_id, epoch, list(req.get("offline_log_dirs") or []), records)
        if image.metadata_version >= MV_4_3_IV0:
            self._handle_directories_cordoned(image, broker_id, epoch, req.get("cordoned_log_dirs"), records)
        if following.in_controlled_shutdown:
            hb.update_controlled_shutdown_offset(broker_id, next_offset + len(records) - 1)
        reply = BrokerHeartbeatReply(
            is_caught_up=req.current_metadata_offset >= register_offset,
            is_fenced=following.fenced,
            in_controlled_shutdown=following.in_controlled_shutdown,
            should_shut_down=following.should_shut_down,
        )
        return ControllerResult.of(records, reply)

    def expired_heartbeat(self, image: MetadataImage, request: Any, now_ms: int) -> None:
        """A heartbeat that waited past its deadline in the controller's queue: it still counts as
        contact and reports the broker's offset, but changes no state (Kafka's
        processExpiredBrokerHeartbeat)."""
        hb = self.heartbeats
        if hb is None:
            return
        hb.track(request.broker_id, request.broker_epoch, now_ms)
        try:
            check_broker_epoch(image, request.broker_id, request.broker_epoch)
        except ControllerApiError as e:
            log.info("expired heartbeat from broker %d ignored: %s", request.broker_id, e.error.message)
            return
        hb.touch(request.broker_id, image.brokers[request.broker_id].fenced, request.current_metadata_offset)
        log.error("heartbeat from broker %d timed out in the controller's queue", request.broker_id)

    # -- session timeouts

    def fence_stale_broker(self, image: MetadataImage, now_ms: int) -> ControllerResult[bool]:
        """Fence one broker whose session expired; the reply says whether to look again at once."""
        hb = self._require_active()
        expired = hb.remove_expired(now_ms)
        if expired is None:
            self._next_check_ms = now_ms + self.fence_check_interval_ms
            return ControllerResult.of((), False)
        self._next_check_ms = now_ms
        broker_id, epoch = expired
        registration = image.brokers.get(broker_id)
        if registration is None:
            hb.remove(broker_id)
            return ControllerResult.of((), True)
        if registration.epoch != epoch:
            return ControllerResult.of((), True)
        log.info("fencing broker %d at epoch %d because its session has timed out", broker_id, epoch)
        records: list[ApiMessageAndVersion] = []
        self._handle_fenced(image, broker_id, records)
        hb.fence(broker_id)
        return ControllerResult.of(records, True)

    # -- UnregisterBroker

    def unregister_broker(self, image: MetadataImage, broker_id: int) -> ControllerResult[UnregisterBrokerReply]:
        registration = image.brokers.get(broker_id)
        if registration is None:
            message = f"Broker ID {broker_id} is not currently registered"
            error = ApiError(ErrorCode.BROKER_ID_NOT_REGISTERED, message)
            return ControllerResult.of((), UnregisterBrokerReply(error))
        records: list[ApiMessageAndVersion] = []
        self.partitions.updates(image, self.partitions.in_isr(image, broker_id), records, remove=broker_id)
        self.partitions.updates(image, self.partitions.in_elr(image, broker_id), records, remove=broker_id)
        records.append(
            metadata_record(T.UNREGISTER_BROKER_RECORD, 0, broker_id=broker_id, broker_epoch=registration.epoch)
        )
        return ControllerResult.of(records, UnregisterBrokerReply())

    # -- what each transition writes

    def _handle_fenced(self, image: MetadataImage, broker_id: int, records: list[ApiMessageAndVersion]) -> None:
        registration = image.brokers[broker_id]
        self.partitions.updates(image, self.partitions.in_isr(image, broker_id), records, remove=broker_id)
        records.append(
            metadata_record(
                T.BROKER_REGISTRATION_CHANGE_RECORD,
                0,
                broker_id=broker_id,
                broker_epoch=registration.epoch,
                fenced=FENCE,
            )
        )

    def _handle_unfenced(
        self, image: MetadataImage, broker_id: int, epoch: int, records: list[ApiMessageAndVersion]
    ) -> None:
        records.append(
            metadata_record(
                T.BROKER_REGISTRATION_CHANGE_RECORD, 0, broker_id=broker_id, broker_epoch=epoch, fenced=UNFENCE
            )
        )
        self.partitions.updates(image, self.partitions.leaderless(image), records, add=broker_id)

    def _handle_in_controlled_shutdown(
        self, image: MetadataImage, broker_id: int, epoch: int, records: list[ApiMessageAndVersion]
    ) -> None:
        if image.metadata_version >= MV_3_3_IV3 and not image.brokers[broker_id].in_controlled_shutdown:
            records.append(
                metadata_record(
                    T.BROKER_REGISTRATION_CHANGE_RECORD,
                    1,
                    broker_id=broker_id,
                    broker_epoch=epoch,
                    in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN,
                )
            )
        self.partitions.updates(image, self.partitions.in_isr(image, broker_id), records, remove=broker_id)

    def _handle_directories_offline(
        self,
        image: MetadataImage,
        broker_id: int,
        epoch: int,
        offline: list[uuid.UUID],
        records: list[ApiMessageAndVersion],
    ) -> None:
        """Directories newly reported offline: the broker leaves the partitions in them, and its
        registration keeps only the others."""
        registration = image.brokers[broker_id]
        newly_offline = [d for d in registration.directories if d in offline]
        if not newly_offline:
            return
        for d in newly_offline:
            in_dir = [
                ref
                for ref in self.partitions.partitions(image)
                if broker_id in ref[3].replicas and replica_directory(ref[3], broker_id) == d
            ]
            self.partitions.updates(image, in_dir, records, remove=broker_id)
        online = [d for d in registration.directories if d not in offline]
        records.append(
            metadata_record(
                T.BROKER_REGISTRATION_CHANGE_RECORD, 2, broker_id=broker_id, broker_epoch=epoch, log_dirs=online
            )
        )
        log.warning("directories %s of broker %d marked offline, remaining: %s", newly_offline, broker_id, online)

    @staticmethod
    def _handle_directories_cordoned(
        image: MetadataImage,
        broker_id: int,
        epoch: int,
        cordoned: list[uuid.UUID] | None,
        records: list[ApiMessageAndVersion],
    ) -> None:
        """The cordoned directories a heartbeat reports (null: not yet known, as before the broker's
        recovery), recorded when they differ as a set from the registration's, or the registration
        has none yet (Kafka's handleDirectoriesCordoned and cordonedDirChanged)."""
        if cordoned is None:
            return
        known = image.brokers[broker_id].cordoned_directories
        if known is not None and set(known) == set(cordoned):
            return
        records.append(
            metadata_record(
                T.BROKER_REGISTRATION_CHANGE_RECORD,
                3,
                broker_id=broker_id,
                broker_epoch=epoch,
                cordoned_log_dirs=list(cordoned),
            )
        )
        log.debug("directories %s in broker %d marked cordoned", cordoned, broker_id)

    def _handle_broker_shutdown(
        self, image: MetadataImage, broker_id: int, clean: bool, records: list[ApiMessageAndVersion]
    ) -> None:
        """A new incarnation registers: its previous one leaves the ISRs (and, unclean, the ELRs)."""
        if elr_enabled(image) and not clean:
            self.partitions.updates(image, self.partitions.in_isr(image, broker_id), records, unclean=broker_id)
            self.partitions.updates(image, self.partitions.in_elr(image, broker_id), records, unclean=broker_id)
        else:
            self.partitions.updates(image, self.partitions.in_isr(image, broker_id), records, remove=broker_id)


def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> None:
    """STALE_BROKER_EPOCH unless ``broker_id`` is registered at ``broker_epoch`` (KIP-841/903
    callers: heartbeats, AllocateProducerIds, AlterPartition, fetch-from-follower checks)."""
    registration = image.brokers.get(broker_id)
    if registration is None:
        raise ControllerApiError(
            ErrorCode.STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}"
        )
    if registration.epoch != broker_epoch:
        raise ControllerApiError(
            ErrorCode.STALE_BROKER_EPOCH,
            f"Expected broker epoch {registration.epoch}, but got broker epoch {broker_epoch}",
        )
