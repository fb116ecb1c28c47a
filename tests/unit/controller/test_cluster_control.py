"""Broker registration, heartbeats, fencing and unregistration: each rule and error code."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkalike.controller.broker_partition_changes import ELR_FEATURE
from kafkalike.controller.cluster_control import BrokerHeartbeatReply, ClusterControlManager
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.features import LEVELS_BY_NAME
from kafkalike.controller.image import METADATA_VERSION_FEATURE, NO_LEADER, MetadataImage, PartitionRegistration
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import MetadataRecordType, metadata_record
from kafkalike.testing.broker_simulation import ControllerLog, as_message

T = MetadataRecordType
CLUSTER = "test-cluster-id-000000A"
TOPIC = uuid.UUID(int=0x70)
MV = 25


def directory(broker_id: int) -> uuid.UUID:
    return uuid.UUID(int=(broker_id + 1) << 64 | 0xD1)


def registration(broker_id: int, incarnation: int = 1, **overrides: Any) -> Any:
    body: dict[str, Any] = {
        "broker_id": broker_id,
        "cluster_id": CLUSTER,
        "incarnation_id": uuid.UUID(int=incarnation),
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092 + broker_id, "security_protocol": 0}],
        "features": [{"name": METADATA_VERSION_FEATURE, "min_supported_version": 7, "max_supported_version": 33}],
        "rack": "r1",
        "log_dirs": [directory(broker_id)],
        **overrides,
    }
    return as_message("BrokerRegistration", "request", 4, body)


def heartbeat(broker_id: int, epoch: int, offset: int, want_fence: bool = False, want_shut_down: bool = False) -> Any:
    body = {
        "broker_id": broker_id,
        "broker_epoch": epoch,
        "current_metadata_offset": offset,
        "want_fence": want_fence,
        "want_shut_down": want_shut_down,
    }
    return as_message("BrokerHeartbeat", "request", 1, body)


class Controller:
    """A manager with its log: what the facade does, records replayed as appended."""

    def __init__(
        self, elr: bool = False, partitions: dict[int, list[int]] | None = None, mv: int = MV, **config: Any
    ) -> None:
        self.manager = ClusterControlManager(cluster_id=CLUSTER, **config)
        boot = [metadata_record(T.FEATURE_LEVEL_RECORD, name=METADATA_VERSION_FEATURE, feature_level=mv)]
        if elr:
            boot.append(metadata_record(T.FEATURE_LEVEL_RECORD, name=ELR_FEATURE, feature_level=1))
        self.log = ControllerLog(self.manager, boot)
        self.manager.activate(self.log.image, 0)
        self.partitions = partitions or {}

    @property
    def image(self) -> MetadataImage:
        return self.log.image

    def apply(self, result: ControllerResult[Any]) -> Any:
        self.log.append(result.records)
        return result.reply

    def register(self, req: Any, now_ms: int = 0, version: int = 4) -> Any:
        return self.apply(
            self.manager.register_broker(
                self.image, req, api_version=version, next_offset=self.log.next_offset, now_ms=now_ms
            )
        )

    def heartbeat(self, req: Any, now_ms: int = 0) -> BrokerHeartbeatReply:
        reply: BrokerHeartbeatReply = self.apply(
            self.manager.heartbeat(self.image, req, next_offset=self.log.next_offset, now_ms=now_ms)
        )
        return reply

    def running(self, broker_id: int, now_ms: int = 0) -> int:
        """Register and unfence ``broker_id``; its epoch."""
        epoch: int = self.register(registration(broker_id), now_ms).broker_epoch
        reply = self.heartbeat(heartbeat(broker_id, epoch, self.log.next_offset), now_ms)
        assert not reply.is_fenced
        return epoch

    def create_topic(self, assignment: dict[int, int], min_isr: str | None = None) -> None:
        """Partitions of replication factor 1: partition -> broker (its leader)."""
        records = [metadata_record(T.TOPIC_RECORD, name="t", topic_id=TOPIC)]
        for p, b in assignment.items():
            records.append(
                metadata_record(
                    T.PARTITION_RECORD,
                    partition_id=p,
                    topic_id=TOPIC,
                    replicas=[b],
                    isr=[b],
                    leader=b,
                    leader_epoch=0,
                    partition_epoch=0,
                )
            )
        if min_isr is not None:
            records.append(
                metadata_record(
                    T.CONFIG_RECORD, resource_type=2, resource_name="t", name="min.insync.replicas", value=min_isr
                )
            )
        self.log.append(records)

    def partition(self, p: int) -> PartitionRegistration:
        part = self.image.partition(TOPIC, p)
        assert part is not None
        return part


def types(result: ControllerResult[Any]) -> list[MetadataRecordType]:
    return [r.type for r in result.records]


# -- registration ------------------------------------------------------------------------------------


def test_a_new_broker_gets_the_offset_of_its_record_as_epoch_and_starts_fenced() -> None:
    c = Controller()
    offset = c.log.next_offset
    reply = c.register(registration(1))
    assert reply.error_code == ErrorCode.NONE and reply.broker_epoch == offset
    record = c.log.records[offset]
    assert record.type == T.REGISTER_BROKER_RECORD and record.version == 3
    assert (record.broker_epoch, record.fenced, record.rack) == (offset, True, "r1")
    assert record.log_dirs == [directory(1)]
    assert [(e.name, e.port) for e in record.end_points] == [("PLAINTEXT", 9093)]
    broker = c.image.brokers[1]
    assert broker.fenced and broker.epoch == offset and c.manager.register_record_offsets[1] == offset


def test_the_same_incarnation_re_registering_keeps_its_epoch_and_state() -> None:
    c = Controller()
    epoch = c.running(1)
    reply = c.register(registration(1, rack="r2"), now_ms=100)
    assert reply.broker_epoch == epoch
    assert c.log.records[-1].broker_epoch == epoch and c.log.records[-1].fenced is False
    assert c.image.brokers[1].rack == "r2" and not c.image.brokers[1].fenced


def test_another_incarnation_within_the_session_is_a_duplicate_registration() -> None:
    c = Controller(session_timeout_ms=9000)
    epoch = c.running(1, now_ms=0)
    c.heartbeat(heartbeat(1, epoch, c.log.next_offset), now_ms=1000)
    before = len(c.log.records)
    reply = c.register(registration(1, incarnation=2), now_ms=10_000)
    assert reply.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert reply.broker_epoch == -1 and len(c.log.records) == before
    # Once the session has lapsed (last contact 1000 + 9000 < now) the new incarnation registers.
    reply = c.register(registration(1, incarnation=2), now_ms=10_001)
    assert reply.error_code == ErrorCode.NONE and reply.broker_epoch > epoch
    assert c.image.brokers[1].fenced and c.image.brokers[1].incarnation_id == uuid.UUID(int=2)


def test_a_fenced_broker_that_heartbeats_holds_its_session() -> None:
    """As Kafka 4.0: sessions are kept by (id, epoch) for fenced brokers too."""
    c = Controller()
    epoch = c.register(registration(1)).broker_epoch
    c.heartbeat(heartbeat(1, epoch, -1, want_fence=True), now_ms=5000)
    assert c.register(registration(1, incarnation=2), now_ms=9000).error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION


def test_a_registration_for_another_cluster_is_refused() -> None:
    reply = Controller().register(registration(1, cluster_id="other"))
    assert reply.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert reply.error_message == f"Expected cluster ID {CLUSTER}, but got cluster ID other"


def test_zookeeper_brokers_are_refused() -> None:
    reply = Controller().register(registration(1, is_migrating_zk_broker=True))
    assert reply.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED


@pytest.mark.parametrize(
    ("log_dirs", "message"),
    [
        ([], "No directories specified in request"),
        ([uuid.UUID(int=1)], "Reserved directory ID in request"),
        ([directory(1), directory(1)], "Duplicate directory ID in request"),
        ([directory(2)], f"Broker 2 is already registered with directory {directory(2)}"),
    ],
)
def test_log_directories_are_checked(log_dirs: list[uuid.UUID], message: str) -> None:
    c = Controller()
    c.register(registration(2))
    reply = c.register(registration(1, log_dirs=log_dirs))
    assert (reply.error_code, reply.error_message) == (ErrorCode.INVALID_REGISTRATION, message)


def test_a_broker_not_supporting_the_finalized_metadata_version_is_refused() -> None:
    features = [{"name": METADATA_VERSION_FEATURE, "min_supported_version": 7, "max_supported_version": 24}]
    reply = Controller().register(registration(1, features=features))
    assert reply.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert reply.error_message == (
        "Unable to register because the broker does not support finalized version 25 of metadata.version. "
        "The broker wants a version between 7 and 24, inclusive."
    )


def test_a_registration_must_name_metadata_version() -> None:
    reply = Controller().register(registration(1, features=[]))
    assert (reply.error_code, reply.error_message) == (
        ErrorCode.INVALID_REGISTRATION,
        "Request features do not contain 'metadata.version'",
    )


def test_a_finalized_feature_the_broker_does_not_name_is_unsupported() -> None:
    reply = Controller(elr=True).register(registration(1))
    assert reply.error_code == ErrorCode.UNSUPPORTED_VERSION and ELR_FEATURE in reply.error_message
    features = [
        {"name": METADATA_VERSION_FEATURE, "min_supported_version": 7, "max_supported_version": 25},
        {"name": ELR_FEATURE, "min_supported_version": 0, "max_supported_version": 1},
    ]
    assert Controller(elr=True).register(registration(1, features=features)).error_code == ErrorCode.NONE


def test_a_standby_controller_answers_not_controller() -> None:
    c = Controller()
    c.manager.deactivate()
    assert c.register(registration(1)).error_code == ErrorCode.NOT_CONTROLLER
    assert c.heartbeat(heartbeat(1, 1, 0)).error_code == ErrorCode.NOT_CONTROLLER


# -- heartbeats and unfencing ----------------------------------------------------------------------


def test_heartbeats_with_a_stale_epoch_or_before_registration_are_refused() -> None:
    c = Controller()
    reply = c.heartbeat(heartbeat(1, 5, 0))
    assert reply.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert reply.error_message == "Receive a heartbeat from broker 1 before registration"
    epoch = c.register(registration(1)).broker_epoch
    reply = c.heartbeat(heartbeat(1, epoch - 1, 100))
    assert reply.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert reply.error_message == f"Expected broker epoch {epoch}, but got broker epoch {epoch - 1}"


def test_a_broker_is_unfenced_only_once_caught_up_with_its_registration() -> None:
    c = Controller()
    epoch = c.register(registration(1)).broker_epoch
    behind = c.manager.heartbeat(c.image, heartbeat(1, epoch, epoch - 1), next_offset=c.log.next_offset, now_ms=1)
    assert behind.records == () and behind.reply.is_fenced and not behind.reply.is_caught_up
    # Caught up but still asking to stay fenced (not ready): caught up, fenced.
    waiting = c.heartbeat(heartbeat(1, epoch, epoch, want_fence=True), now_ms=2)
    assert waiting.is_caught_up and waiting.is_fenced
    result = c.manager.heartbeat(c.image, heartbeat(1, epoch, epoch), next_offset=c.log.next_offset, now_ms=3)
    assert result.reply == BrokerHeartbeatReply(is_caught_up=True, is_fenced=False)
    (record,) = result.records
    assert (record.type, record.version, record.broker_id, record.broker_epoch, record.fenced) == (
        T.BROKER_REGISTRATION_CHANGE_RECORD,
        0,
        1,
        epoch,
        -1,
    )
    c.apply(result)
    assert not c.image.brokers[1].fenced


def test_unfencing_elects_the_broker_for_partitions_without_a_leader() -> None:
    c = Controller()
    epoch = c.running(1)
    c.create_topic({0: 1, 1: 1})
    c.apply(c.manager.fence_stale_broker(c.image, 20_000))
    assert c.partition(0).leader == NO_LEADER and c.partition(0).isr == (1,)
    reply = c.heartbeat(heartbeat(1, epoch, c.log.next_offset), now_ms=20_001)
    assert not reply.is_fenced
    assert [(c.partition(p).leader, c.partition(p).leader_epoch) for p in (0, 1)] == [(1, 2), (1, 2)]


def test_a_broker_asking_to_be_fenced_is_fenced() -> None:
    c = Controller()
    epoch = c.running(1)
    reply = c.heartbeat(heartbeat(1, epoch, c.log.next_offset, want_fence=True))
    assert reply.is_fenced and not reply.should_shut_down and c.image.brokers[1].fenced


# -- fencing by session timeout --------------------------------------------------------------------


def test_a_broker_whose_heartbeats_stop_is_fenced_after_the_session_timeout() -> None:
    c = Controller(session_timeout_ms=9000)
    epoch = c.running(1, now_ms=0)
    c.create_topic({0: 1})
    c.heartbeat(heartbeat(1, epoch, c.log.next_offset), now_ms=1000)
    assert c.manager.poll(1000) == 1125  # a check every session timeout / 8
    not_yet = c.manager.fence_stale_broker(c.image, 10_000)  # 1000 + 9000 is not past the timeout
    assert not_yet.records == () and not_yet.reply is False and c.manager.poll(10_000) == 11_125
    result = c.manager.fence_stale_broker(c.image, 10_001)
    assert result.reply is True and c.manager.poll(10_001) == 10_001  # look again at once
    change, fence = result.records
    assert (change.type, change.leader, change.isr, change.eligible_leader_replicas) == (
        T.PARTITION_CHANGE_RECORD,
        NO_LEADER,
        None,  # without ELR the last ISR member stays
        None,
    )
    assert (fence.type, fence.broker_id, fence.broker_epoch, fence.fenced) == (
        T.BROKER_REGISTRATION_CHANGE_RECORD,
        1,
        epoch,
        1,
    )
    c.apply(result)
    assert c.image.brokers[1].fenced and c.partition(0).isr == (1,) and c.partition(0).leader_epoch == 1
    assert c.manager.fence_stale_broker(c.image, 10_002).records == ()


def test_with_elr_a_fenced_broker_moves_to_the_elr_and_leads_again_when_back() -> None:
    c = Controller(elr=True)
    features = [
        {"name": METADATA_VERSION_FEATURE, "min_supported_version": 7, "max_supported_version": 25},
        {"name": ELR_FEATURE, "min_supported_version": 0, "max_supported_version": 1},
    ]
    epoch = c.register(registration(1, features=features)).broker_epoch
    c.heartbeat(heartbeat(1, epoch, c.log.next_offset))
    c.create_topic({0: 1})
    c.apply(c.manager.fence_stale_broker(c.image, 10_000))
    p = c.partition(0)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (NO_LEADER, (), (1,), (1,))
    c.heartbeat(heartbeat(1, epoch, c.log.next_offset), now_ms=10_001)
    p = c.partition(0)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (1, (1,), (), ())


def test_a_failover_starts_every_session_at_activation() -> None:
    c = Controller(session_timeout_ms=9000)
    c.running(1, now_ms=0)
    c.manager.deactivate()
    assert c.manager.poll(5000) is None
    c.manager.activate(c.image, 5000)
    assert c.manager.fence_stale_broker(c.image, 14_000).records == ()
    assert c.manager.fence_stale_broker(c.image, 14_001).records != ()


def test_a_failover_starts_no_session_for_a_fenced_broker() -> None:
    """As Kafka 4.4's ClusterControlManager.activate: only unfenced brokers get a session, so a
    broker that shut down cleanly (fenced) registers a new incarnation at once after a failover,
    such as a combined node's restart."""
    c = Controller(session_timeout_ms=9000)
    epoch = c.running(1, now_ms=0)
    c.running(2, now_ms=0)
    c.heartbeat(heartbeat(1, epoch, c.log.next_offset, want_fence=True), now_ms=100)
    assert c.image.brokers[1].fenced and not c.image.brokers[2].fenced
    c.manager.deactivate()
    c.manager.activate(c.image, 5000)
    assert c.register(registration(1, incarnation=2), now_ms=5001).error_code == ErrorCode.NONE
    assert c.register(registration(2, incarnation=2), now_ms=5001).error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION


def test_an_expired_session_of_an_earlier_epoch_fences_nothing() -> None:
    c = Controller(session_timeout_ms=9000)
    epoch = c.running(1, now_ms=0)
    c.heartbeat(heartbeat(1, epoch - 1, 0), now_ms=0)  # a stale heartbeat still counts as contact
    c.heartbeat(heartbeat(1, epoch, c.log.next_offset), now_ms=5000)
    result = c.manager.fence_stale_broker(c.image, 9001)
    assert result.records == () and result.reply is True and not c.image.brokers[1].fenced


# -- controlled shutdown ---------------------------------------------------------------------------


def test_controlled_shutdown_moves_leaderships_then_lets_the_broker_go() -> None:
    c = Controller()
    epoch = c.running(1)
    c.create_topic({0: 1})
    offset = c.log.next_offset
    reply = c.heartbeat(heartbeat(1, epoch, offset, want_shut_down=True))
    assert reply.in_controlled_shutdown and not reply.should_shut_down and not reply.is_fenced
    change, moved = c.log.records[offset:]
    assert (change.type, change.version, change.in_controlled_shutdown) == (T.BROKER_REGISTRATION_CHANGE_RECORD, 1, 1)
    assert (moved.type, moved.leader) == (T.PARTITION_CHANGE_RECORD, NO_LEADER)
    assert c.image.brokers[1].in_controlled_shutdown
    reply = c.heartbeat(heartbeat(1, epoch, c.log.next_offset, want_shut_down=True))
    assert reply.should_shut_down and reply.is_fenced
    assert c.image.brokers[1].fenced and c.log.records[-1].fenced == 1


def test_controlled_shutdown_waits_for_the_active_brokers_to_replay_it() -> None:
    c = Controller()
    epoch1, epoch2 = c.running(1), c.running(2)
    c.create_topic({0: 1})
    lagging = c.log.next_offset - 1
    c.heartbeat(heartbeat(2, epoch2, lagging))
    c.heartbeat(heartbeat(1, epoch1, c.log.next_offset, want_shut_down=True))
    shutdown_end = c.log.next_offset - 1
    assert not c.heartbeat(heartbeat(1, epoch1, c.log.next_offset, want_shut_down=True)).should_shut_down
    c.heartbeat(heartbeat(2, epoch2, shutdown_end))
    assert c.heartbeat(heartbeat(1, epoch1, c.log.next_offset, want_shut_down=True)).should_shut_down


def test_a_broker_leading_nothing_shuts_down_at_once() -> None:
    c = Controller()
    epoch = c.running(1)
    offset = c.log.next_offset
    reply = c.heartbeat(heartbeat(1, epoch, offset, want_shut_down=True))
    assert reply.should_shut_down and reply.is_fenced and not reply.in_controlled_shutdown
    assert [r.type for r in c.log.records[offset:]] == [T.BROKER_REGISTRATION_CHANGE_RECORD]


def test_a_fenced_broker_asking_to_shut_down_may() -> None:
    c = Controller()
    epoch = c.register(registration(1)).broker_epoch
    assert c.heartbeat(heartbeat(1, epoch, -1, want_fence=True, want_shut_down=True)).should_shut_down


# -- a new incarnation: clean and unclean shutdowns (KIP-966) --------------------------------------


def test_a_new_incarnation_first_takes_its_predecessor_out_of_leadership() -> None:
    c = Controller(session_timeout_ms=9000)
    epoch = c.running(1, now_ms=0)
    c.create_topic({0: 1})
    offset = c.log.next_offset
    reply = c.register(registration(1, incarnation=2), now_ms=9001)
    assert reply.broker_epoch == offset  # the batch's first offset, as Kafka
    change, register = c.log.records[offset:]
    assert (change.type, change.leader) == (T.PARTITION_CHANGE_RECORD, NO_LEADER)
    assert register.type == T.REGISTER_BROKER_RECORD and register.broker_epoch == offset > epoch
    assert c.manager.register_record_offsets[1] == offset + 1


def test_with_elr_an_unclean_restart_elects_the_last_known_leader_recovering() -> None:
    """Balanced recovery: ISR and ELR empty, one last known leader -> elected once it may lead
    (Kafka 4.1+: when it is unfenced; 4.0 elected it at registration, still fenced)."""
    c = Controller(elr=True, session_timeout_ms=9000)
    features = [
        {"name": METADATA_VERSION_FEATURE, "min_supported_version": 7, "max_supported_version": 25},
        {"name": ELR_FEATURE, "min_supported_version": 0, "max_supported_version": 1},
    ]
    epoch = c.register(registration(1, features=features)).broker_epoch
    c.heartbeat(heartbeat(1, epoch, c.log.next_offset))
    c.create_topic({0: 1})
    c.apply(c.manager.fence_stale_broker(c.image, 9001))
    again = c.register(registration(1, incarnation=2, features=features), now_ms=9002, version=4)  # previous epoch -1
    p = c.partition(0)
    assert (p.leader, p.isr, p.elr, p.last_known_elr, p.leader_recovery_state) == (-1, (), (), (1,), 0)
    c.heartbeat(heartbeat(1, again.broker_epoch, c.log.next_offset))
    p = c.partition(0)
    assert (p.leader, p.isr, p.elr, p.last_known_elr, p.leader_recovery_state) == (1, (1,), (), (), 1)


def test_with_elr_a_clean_restart_keeps_the_broker_in_the_elr() -> None:
    c = Controller(elr=True, session_timeout_ms=9000)
    features = [
        {"name": METADATA_VERSION_FEATURE, "min_supported_version": 7, "max_supported_version": 25},
        {"name": ELR_FEATURE, "min_supported_version": 0, "max_supported_version": 1},
    ]
    epoch = c.register(registration(1, features=features)).broker_epoch
    c.heartbeat(heartbeat(1, epoch, c.log.next_offset))
    c.create_topic({0: 1})
    c.apply(c.manager.fence_stale_broker(c.image, 9001))
    before = c.partition(0)
    c.register(registration(1, incarnation=2, features=features, previous_broker_epoch=epoch), now_ms=9002)
    assert c.partition(0) == before and c.log.records[-1].type == T.REGISTER_BROKER_RECORD


# -- unregistration --------------------------------------------------------------------------------


def test_unregistering_an_unknown_broker_is_refused() -> None:
    reply = Controller().manager.unregister_broker(Controller().image, 7)
    assert reply.records == ()
    assert (reply.reply.error_code, reply.reply.error_message) == (
        ErrorCode.BROKER_ID_NOT_REGISTERED,
        "Broker ID 7 is not currently registered",
    )


def test_unregistering_takes_the_broker_out_of_its_partitions_then_removes_it() -> None:
    c = Controller()
    epoch = c.running(1)
    c.create_topic({0: 1})
    result = c.manager.unregister_broker(c.image, 1)
    assert types(result) == [T.PARTITION_CHANGE_RECORD, T.UNREGISTER_BROKER_RECORD]
    assert (result.records[1].broker_id, result.records[1].broker_epoch) == (1, epoch)
    c.apply(result)
    assert 1 not in c.image.brokers and 1 not in c.manager.register_record_offsets
    assert c.partition(0).leader == NO_LEADER
    assert c.heartbeat(heartbeat(1, epoch, 100)).error_code == ErrorCode.STALE_BROKER_EPOCH


# -- offline log directories -----------------------------------------------------------------------


def test_a_directory_reported_offline_takes_the_broker_out_of_its_partitions() -> None:
    c = Controller()
    first, second = directory(1), uuid.UUID(int=(9 << 64) | 0xD2)
    epoch = c.register(registration(1, log_dirs=[first, second])).broker_epoch
    c.heartbeat(heartbeat(1, epoch, c.log.next_offset))
    records = [metadata_record(T.TOPIC_RECORD, name="t", topic_id=TOPIC)]
    for p, d in ((0, first), (1, second)):
        records.append(
            metadata_record(
                T.PARTITION_RECORD,
                partition_id=p,
                topic_id=TOPIC,
                replicas=[1],
                isr=[1],
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
                directories=[d],
            )
        )
    c.log.append(records)
    offset = c.log.next_offset
    body = {"broker_id": 1, "broker_epoch": epoch, "current_metadata_offset": offset, "offline_log_dirs": [first]}
    reply = c.heartbeat(as_message("BrokerHeartbeat", "request", 1, body))
    assert reply.error_code == ErrorCode.NONE and not reply.is_fenced
    moved, change = c.log.records[offset:]
    assert (moved.type, moved.partition_id, moved.leader) == (T.PARTITION_CHANGE_RECORD, 0, NO_LEADER)
    assert (change.type, change.version, change.log_dirs) == (T.BROKER_REGISTRATION_CHANGE_RECORD, 2, [second])
    assert c.image.brokers[1].directories == (second,) and c.partition(1).leader == 1
    # Reported again: nothing new.
    assert (
        c.manager.heartbeat(c.image, as_message("BrokerHeartbeat", "request", 1, body), next_offset=0, now_ms=1).records
        == ()
    )


# -- cordoned log directories (metadata.version 4.3-IV0 on) ----------------------------------------


def test_cordoned_directories_are_recorded_when_first_reported_and_when_they_change() -> None:
    c = Controller(mv=LEVELS_BY_NAME["4.4-IV2"])
    first, second = directory(1), uuid.UUID(int=(9 << 64) | 0xD2)
    epoch = c.register(registration(1, log_dirs=[first, second])).broker_epoch
    register = c.log.records[-1]
    assert (register.version, register.cordoned_log_dirs) == (4, None)

    def report(cordoned: list[uuid.UUID] | None) -> list[Any]:
        offset = c.log.next_offset
        body = {"broker_id": 1, "broker_epoch": epoch, "current_metadata_offset": offset, "cordoned_log_dirs": cordoned}
        assert c.heartbeat(as_message("BrokerHeartbeat", "request", 2, body)).error_code == ErrorCode.NONE
        return [r for r in c.log.records[offset:] if r.type == T.BROKER_REGISTRATION_CHANGE_RECORD and r.fenced != -1]

    assert report(None) == []  # not yet known (before the broker's recovery)
    (change,) = report([])  # known now, though none is cordoned
    assert (change.version, change.broker_epoch, change.cordoned_log_dirs, change.fenced) == (3, epoch, [], 0)
    assert c.image.brokers[1].cordoned_directories == ()
    assert report([]) == []
    (change,) = report([second])
    assert change.cordoned_log_dirs == [second] and c.image.brokers[1].cordoned_directories == (second,)
    assert report([second]) == []
    # A snapshot keeps them (RegisterBrokerRecord v4).
    (snapshot,) = [r for r in c.image.records() if r.type == T.REGISTER_BROKER_RECORD]
    assert (snapshot.version, snapshot.cordoned_log_dirs) == (4, [second])


def test_before_4_3_cordoned_directories_are_not_recorded() -> None:
    c = Controller(mv=LEVELS_BY_NAME["4.2-IV1"])
    epoch = c.register(registration(1)).broker_epoch
    assert c.log.records[-1].version == 3
    body = {"broker_id": 1, "broker_epoch": epoch, "current_metadata_offset": 0, "cordoned_log_dirs": []}
    result = c.manager.heartbeat(c.image, as_message("BrokerHeartbeat", "request", 2, body), next_offset=0, now_ms=0)
    assert result.records == ()


def test_a_heartbeat_expired_in_the_queue_keeps_the_session_but_changes_nothing() -> None:
    c = Controller(session_timeout_ms=9000)
    epoch = c.register(registration(1)).broker_epoch
    c.manager.expired_heartbeat(c.image, heartbeat(1, epoch, c.log.next_offset), now_ms=5000)
    assert c.image.brokers[1].fenced  # caught up and willing, but not unfenced by an expired heartbeat
    assert (
        c.register(registration(1, incarnation=2), now_ms=14_000).error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    )
    c.manager.expired_heartbeat(c.image, heartbeat(1, epoch + 100, 0), now_ms=5001)  # stale: ignored
    c.manager.expired_heartbeat(c.image, heartbeat(7, 3, 0), now_ms=5002)  # unknown: ignored
