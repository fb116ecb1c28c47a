"""AlterPartition, ElectLeaders and the controller's elections over replicated partitions: each
check of Kafka's ReplicationControlManager in its order, and what fencing does with RF=3."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from kafkalike.controller.api_error import ApiError
from kafkalike.controller.broker_partition_changes import ELR_FEATURE
from kafkalike.controller.cluster_control import ClusterControlManager
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.image import METADATA_VERSION_FEATURE, NO_LEADER, MetadataImage, PartitionRegistration
from kafkalike.controller.partition_control import (
    alter_partition,
    balance_partition_leaders,
    elect_leaders,
    elect_unclean_leaders,
)
from kafkalike.controller.quorum_controller import QuorumController
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import MetadataRecordType, metadata_record
from kafkalike.testing.broker_simulation import ControllerLog, as_message

T = MetadataRecordType
E = ErrorCode
CLUSTER = "test-cluster-id-000000A"
TOPIC = uuid.UUID(int=0x70)
MV = 25  # 4.0-IV3: PartitionChangeRecord v2, no leader epoch bump on an ISR shrink


def registration(broker_id: int) -> Any:
    body = {
        "broker_id": broker_id,
        "cluster_id": CLUSTER,
        "incarnation_id": uuid.UUID(int=broker_id),
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092 + broker_id, "security_protocol": 0}],
        "features": [
            {"name": METADATA_VERSION_FEATURE, "min_supported_version": 7, "max_supported_version": 33},
            {"name": ELR_FEATURE, "min_supported_version": 0, "max_supported_version": 1},
        ],
        "rack": None,
        "log_dirs": [uuid.UUID(int=(broker_id + 1) << 64 | 0xD1)],
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


class Cluster:
    """An active cluster manager over its log, three brokers running and topic "t" (RF=3)."""

    def __init__(self, *, elr: bool = False, configs: dict[str, str] | None = None, partitions: int = 1) -> None:
        self.manager = ClusterControlManager(cluster_id=CLUSTER)
        boot = [metadata_record(T.FEATURE_LEVEL_RECORD, name=METADATA_VERSION_FEATURE, feature_level=MV)]
        if elr:
            boot.append(metadata_record(T.FEATURE_LEVEL_RECORD, name=ELR_FEATURE, feature_level=1))
        self.log = ControllerLog(self.manager, boot)
        self.manager.activate(self.log.image, 0)
        self.epochs = {b: self.start(b) for b in (1, 2, 3)}
        records = [metadata_record(T.TOPIC_RECORD, name="t", topic_id=TOPIC)]
        for p in range(partitions):
            replicas = [1 + (p + i) % 3 for i in range(3)]
            records.append(
                metadata_record(
                    T.PARTITION_RECORD,
                    partition_id=p,
                    topic_id=TOPIC,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                    leader_epoch=0,
                    partition_epoch=0,
                )
            )
        for name, value in (configs or {}).items():
            records.append(metadata_record(T.CONFIG_RECORD, resource_type=2, resource_name="t", name=name, value=value))
        self.log.append(records)

    @property
    def image(self) -> MetadataImage:
        return self.log.image

    def apply(self, result: ControllerResult[Any]) -> Any:
        self.log.append(result.records)
        return result.reply

    def start(self, broker_id: int) -> int:
        reply = self.apply(
            self.manager.register_broker(
                self.log.image, registration(broker_id), api_version=4, next_offset=self.log.next_offset, now_ms=0
            )
        )
        self.beat(broker_id, reply.broker_epoch)
        return int(reply.broker_epoch)

    def beat(self, broker_id: int, epoch: int, want_fence: bool = False, want_shut_down: bool = False) -> Any:
        request = heartbeat(broker_id, epoch, self.log.next_offset, want_fence, want_shut_down)
        return self.apply(self.manager.heartbeat(self.image, request, next_offset=self.log.next_offset, now_ms=0))

    def fence(self, broker_id: int) -> None:
        assert self.beat(broker_id, self.epochs[broker_id], want_fence=True).is_fenced

    def unfence(self, broker_id: int) -> None:
        assert not self.beat(broker_id, self.epochs[broker_id]).is_fenced

    def partition(self, p: int = 0) -> PartitionRegistration:
        found = self.image.partition(TOPIC, p)
        assert found is not None
        return found

    def alter(self, isr: list[int], *, version: int = 3, **overrides: Any) -> Any:
        """An AlterPartition from the current leader of partition 0 to ``isr``; its first
        partition's answer (or the whole response when the request is refused at the top)."""
        response = self.apply(self.alter_result(isr, version=version, **overrides)).to_response()
        if response["error_code"] != E.NONE:
            return response
        [topic] = response["topics"]
        [answer] = topic["partitions"]
        return answer

    def alter_result(self, isr: list[int], *, version: int = 3, **overrides: Any) -> ControllerResult[Any]:
        p = self.partition()
        epochs = overrides.pop("isr_epochs", {})
        requester = overrides.pop("broker_id", p.leader)
        partition: dict[str, Any] = {
            "partition_index": overrides.pop("partition_index", 0),
            "leader_epoch": overrides.pop("leader_epoch", p.leader_epoch),
            "partition_epoch": overrides.pop("partition_epoch", p.partition_epoch),
            "leader_recovery_state": overrides.pop("leader_recovery_state", p.leader_recovery_state),
        }
        if version >= 3:
            partition["new_isr_with_epochs"] = [
                {"broker_id": b, "broker_epoch": epochs.get(b, self.epochs.get(b, -1))} for b in isr
            ]
        else:
            partition["new_isr"] = isr
        topic = (
            {"topic_id": overrides.pop("topic_id", TOPIC)}
            if version >= 2
            else {"topic_name": overrides.pop("topic_name", "t")}
        )
        body = {
            "broker_id": requester,
            "broker_epoch": overrides.pop("broker_epoch", self.epochs.get(requester, -1)),
            "topics": [{**topic, "partitions": [partition]}],
        }
        assert not overrides, overrides
        request = as_message("AlterPartition", "request", version, body)
        return alter_partition(self.image, self.manager.partitions, request, version)

    def elect(self, election_type: int, topics: dict[str, list[int]] | None, version: int = 2) -> Any:
        asked = None if topics is None else [{"topic": n, "partitions": ps} for n, ps in topics.items()]
        body = {"election_type": election_type, "topic_partitions": asked, "timeout_ms": 1000}
        request = as_message("ElectLeaders", "request", version, body)
        return self.apply(elect_leaders(self.image, self.manager.partitions, request, version)).to_response()


# -- AlterPartition ----------------------------------------------------------------------------


def test_a_shrink_then_an_expansion_commit_and_answer_the_new_partition_state() -> None:
    c = Cluster()
    assert c.partition() == PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
    shrunk = c.alter([1, 2])
    assert shrunk == {
        "partition_index": 0,
        "error_code": E.NONE,
        "leader_id": 1,
        "leader_epoch": 0,  # from 3.6-IV0 a shrink keeps the leader epoch
        "isr": [1, 2],
        "leader_recovery_state": 0,
        "partition_epoch": 1,
    }
    assert c.partition().isr == (1, 2) and c.partition().partition_epoch == 1
    grown = c.alter([1, 2, 3])
    assert grown["error_code"] == E.NONE and grown["isr"] == [1, 2, 3] and grown["partition_epoch"] == 2


def test_the_same_isr_writes_nothing_and_answers_the_partition_as_it_is() -> None:
    c = Cluster()
    result = c.alter_result([1, 2, 3])
    assert result.records == ()
    [topic] = result.reply.to_response()["topics"]
    assert topic["partitions"][0]["isr"] == [1, 2, 3] and topic["partitions"][0]["partition_epoch"] == 0


def test_a_stale_broker_epoch_refuses_the_whole_request() -> None:
    c = Cluster()
    response = c.alter([1, 2], broker_epoch=c.epochs[1] + 1)
    assert response["error_code"] == E.STALE_BROKER_EPOCH and response["topics"] == []
    assert c.alter([1, 2], broker_id=9, broker_epoch=5)["error_code"] == E.STALE_BROKER_EPOCH


@pytest.mark.parametrize(
    ("overrides", "isr", "code"),
    [
        ({"topic_id": uuid.UUID(int=0x99)}, [1, 2], E.UNKNOWN_TOPIC_ID),
        ({"partition_index": 7}, [1, 2], E.UNKNOWN_TOPIC_OR_PARTITION),
        ({"leader_epoch": 1}, [1, 2], E.NOT_CONTROLLER),
        ({"partition_epoch": 1}, [1, 2], E.NOT_CONTROLLER),
        ({"broker_id": 2}, [1, 2], E.INVALID_REQUEST),  # not the leader
        ({}, [1, 4], E.INVALID_REQUEST),  # 4 is no replica
        ({}, [1, 2, 2], E.INVALID_REQUEST),
        ({}, [2, 3], E.INVALID_REQUEST),  # without the leader
        ({"leader_recovery_state": 1}, [1], E.INVALID_REQUEST),  # RECOVERED -> RECOVERING
        ({"isr_epochs": {2: 12345}}, [1, 2], E.INELIGIBLE_REPLICA),  # another broker epoch
    ],
)
def test_alter_partition_checks(overrides: dict[str, Any], isr: list[int], code: int) -> None:
    c = Cluster()
    version = overrides.pop("version", 3)
    result = c.alter_result(isr, version=version, **overrides)
    assert result.records == ()
    [topic] = result.reply.to_response()["topics"]
    assert [p["error_code"] for p in topic["partitions"]] == [code]


def test_older_epochs_are_fenced_and_out_of_date() -> None:
    c = Cluster()
    c.alter([1, 2])  # partition epoch 1
    c.fence(1)  # leader 2, leader epoch 1, partition epoch 2
    assert c.partition().leader == 2
    assert c.alter([2, 3], leader_epoch=0)["error_code"] == E.FENCED_LEADER_EPOCH
    assert c.alter([2, 3], partition_epoch=1)["error_code"] == E.INVALID_UPDATE_VERSION


def test_fenced_or_shutting_down_members_are_ineligible() -> None:
    c = Cluster()
    c.alter([1, 2])
    c.fence(3)
    assert c.alter([1, 2, 3], version=2)["error_code"] == E.INELIGIBLE_REPLICA
    assert c.alter([1, 2, 3], version=3)["error_code"] == E.INELIGIBLE_REPLICA
    c.unfence(3)
    assert c.alter([1, 2, 3], version=2)["isr"] == [1, 2, 3]  # v2: no broker epochs to check
    c.beat(1, c.epochs[1], want_shut_down=True)  # the leader: controlled shutdown moves it away first
    assert c.image.brokers[1].in_controlled_shutdown and not c.image.brokers[1].fenced
    assert (c.partition().leader, c.partition().isr) == (2, (2, 3))
    assert c.alter([2, 3, 1])["error_code"] == E.INELIGIBLE_REPLICA


def test_a_recovering_leader_may_only_report_itself_then_recovered() -> None:
    c = Cluster(configs={"unclean.leader.election.enable": "true"})
    c.alter([1])
    c.fence(1)  # no ISR member left: 2 is elected uncleanly
    p = c.partition()
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)
    assert c.alter([2, 3], leader_recovery_state=1)["error_code"] == E.INVALID_REQUEST
    recovered = c.alter([2], leader_recovery_state=0)
    assert recovered["error_code"] == E.NONE and recovered["leader_recovery_state"] == 0
    assert c.partition().leader_recovery_state == 0


def test_with_elr_a_shrink_below_min_isr_moves_the_members_leaving_to_the_elr() -> None:
    c = Cluster(elr=True, configs={"min.insync.replicas": "2"})
    assert c.alter([1, 2])["isr"] == [1, 2]
    assert c.partition().elr == ()  # still at min ISR
    assert c.alter([1])["isr"] == [1]
    assert c.partition().elr == (2,)  # 3 left while the ISR was still at min ISR: not eligible
    assert c.alter([1, 2])["isr"] == [1, 2]
    assert c.partition().elr == ()  # back at min ISR: cleared


# -- elections on broker events with RF=3 ------------------------------------------------------


def test_fencing_the_leader_passes_leadership_to_the_next_isr_member() -> None:
    c = Cluster()
    c.fence(1)
    p = c.partition()
    assert (p.leader, p.leader_epoch, p.isr) == (2, 1, (2, 3))
    c.fence(2)
    p = c.partition()
    assert (p.leader, p.leader_epoch, p.isr) == (3, 2, (3,))
    c.fence(3)  # without ELR the last member stays the ISR; no leader
    p = c.partition()
    assert (p.leader, p.isr) == (NO_LEADER, (3,))
    c.unfence(1)  # not in the ISR: does not lead
    assert c.partition().leader == NO_LEADER
    c.unfence(3)
    assert c.partition().leader == 3


def test_an_unregistered_or_shutting_down_leader_leaves_the_isr_and_another_member_leads() -> None:
    c = Cluster()
    c.apply(c.manager.unregister_broker(c.image, 1))
    p = c.partition()
    assert (p.leader, p.leader_epoch, p.isr) == (2, 1, (2, 3)) and 1 not in c.image.brokers
    c.beat(2, c.epochs[2], want_shut_down=True)
    p = c.partition()
    assert (p.leader, p.leader_epoch, p.isr) == (3, 2, (3,))


def test_with_elr_fencing_every_replica_keeps_them_eligible_and_the_first_back_leads() -> None:
    c = Cluster(elr=True, configs={"min.insync.replicas": "2"})
    c.fence(1)
    assert c.partition().isr == (2, 3) and c.partition().elr == ()
    c.fence(2)
    p = c.partition()
    assert (p.leader, p.isr, p.elr) == (3, (3,), (2,))  # KIP-966: 2 left an ISR below min ISR
    c.fence(3)
    p = c.partition()
    assert (p.leader, p.isr, set(p.elr)) == (NO_LEADER, (), {2, 3})
    c.unfence(1)  # neither in the ISR nor the ELR
    assert c.partition().leader == NO_LEADER
    c.unfence(2)
    p = c.partition()
    assert (p.leader, p.isr, p.elr) == (2, (2,), (3,))


def test_with_unclean_election_enabled_a_live_replica_outside_the_isr_leads_recovering() -> None:
    c = Cluster(configs={"unclean.leader.election.enable": "true"})
    c.alter([1])
    c.fence(1)
    p = c.partition()
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)
    assert c.manager.partitions.unclean_elections == 1


def test_the_cluster_wide_default_enables_unclean_election_too() -> None:
    c = Cluster()
    c.log.append(
        [
            metadata_record(
                T.CONFIG_RECORD, resource_type=4, resource_name="", name="unclean.leader.election.enable", value="true"
            )
        ]
    )
    c.alter([1])
    c.fence(1)
    assert c.partition().leader == 2


def test_the_periodic_pass_elects_uncleanly_once_the_topic_allows_it() -> None:
    c = Cluster()
    c.alter([1])
    c.fence(1)
    assert c.partition().leader == NO_LEADER
    assert elect_unclean_leaders(c.image, c.manager.partitions).records == ()  # not allowed yet
    c.log.append(
        [
            metadata_record(
                T.CONFIG_RECORD, resource_type=2, resource_name="t", name="unclean.leader.election.enable", value="true"
            )
        ]
    )
    result = elect_unclean_leaders(c.image, c.manager.partitions)
    assert result.reply is False  # under the per-pass limit
    c.apply(result)
    p = c.partition()
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)


def test_the_quorum_controller_schedules_the_unclean_pass_after_a_write_leaving_a_partition_leaderless() -> None:
    c = Cluster(configs={"unclean.leader.election.enable": "false"})

    def controller_over(image: MetadataImage) -> QuorumController:
        return QuorumController(
            node_id=1,
            rng=random.Random(1),
            image=image,
            unclean_election_interval_ms=1000,
            leader_imbalance_check_interval_ms=None,  # auto.leader.rebalance.enable=false
        )

    controller = controller_over(c.image)
    controller.schedule_periodic(c.manager.partitions, 0)
    assert controller.poll(0) is None  # every partition has a leader
    c.alter([1])
    c.fence(1)
    controller = controller_over(c.image)
    controller.schedule_periodic(c.manager.partitions, 50)
    assert controller.poll(50) == 1050
    controller.schedule_periodic(c.manager.partitions, 900)  # already due: not pushed back
    assert controller.poll(900) == 1050
    result = controller.elect_unclean_leaders(c.manager.partitions, 1050)
    assert result.records == () and controller.poll(1050) is None
    controller.cancel_periodic()
    assert controller.poll(2000) is None


def test_leader_balancing_gives_the_leadership_back_once_the_preferred_replica_is_in_sync() -> None:
    c = Cluster(partitions=3)
    c.fence(1)
    c.unfence(1)
    assert [c.partition(p).leader for p in range(3)] == [2, 2, 3]  # partition 0 moved off broker 1
    controller = QuorumController(
        node_id=1, rng=random.Random(1), image=c.image, leader_imbalance_check_interval_ms=300_000
    )
    controller.schedule_periodic(c.manager.partitions, 0)
    assert controller.poll(0) == 300_000 and controller.due(299_999) == []
    assert controller.due(300_000) == ["balance"]
    # 1 is not in the ISR yet: nothing to elect, and the pass is due again an interval later.
    assert controller.balance_partition_leaders(c.manager.partitions, 300_000).records == ()
    assert controller.poll(300_000) is None
    c.alter([2, 3, 1])
    result = balance_partition_leaders(c.image, c.manager.partitions)
    assert result.reply is False and len(result.records) == 1
    c.apply(result)
    assert [c.partition(p).leader for p in range(3)] == [1, 2, 3]
    assert dict(c.manager.partitions.imbalanced) == {}
    controller.schedule_periodic(c.manager.partitions, 600_000)
    assert controller.poll(600_000) is None  # balanced: nothing due


# -- ElectLeaders ------------------------------------------------------------------------------


def results(response: dict[str, Any]) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {
        (t["topic"], r["partition_id"]): (r["error_code"], r["error_message"])
        for t in response["replica_election_results"]
        for r in t["partition_result"]
    }


def test_a_preferred_election_moves_leadership_back_to_the_first_replica() -> None:
    c = Cluster()
    c.fence(1)
    assert results(c.elect(0, {"t": [0]})) == {
        ("t", 0): (E.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available.")
    }
    c.unfence(1)
    assert results(c.elect(0, {"t": [0]})) == {
        ("t", 0): (E.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available.")
    }  # not in ISR
    c.alter([2, 3, 1])  # leader 2 takes 1 back into the ISR
    assert results(c.elect(0, {"t": [0]})) == {("t", 0): (E.NONE, None)}
    p = c.partition()
    assert (p.leader, p.leader_epoch) == (1, 2)
    assert results(c.elect(0, {"t": [0]})) == {
        ("t", 0): (E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
    }


def test_an_unclean_election_needs_a_leaderless_partition_and_an_acceptable_replica() -> None:
    c = Cluster()
    assert results(c.elect(1, {"t": [0]})) == {
        ("t", 0): (E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
    }
    c.alter([1])
    c.fence(1)
    c.fence(2)
    c.fence(3)
    assert results(c.elect(1, {"t": [0]})) == {
        ("t", 0): (E.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Eligible topic partition leaders are not available.")
    }
    c.unfence(3)
    assert results(c.elect(1, {"t": [0]})) == {("t", 0): (E.NONE, None)}
    p = c.partition()
    assert (p.leader, p.isr, p.leader_recovery_state) == (3, (3,), 1)
    assert c.manager.partitions.unclean_elections == 1


def test_elect_leaders_unknown_topics_and_partitions() -> None:
    c = Cluster()
    assert results(c.elect(0, {"t": [5], "nope": [0]})) == {
        ("t", 5): (E.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t-5"),
        ("nope", 0): (E.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope"),
    }


def test_all_partitions_leave_out_those_needing_no_election() -> None:
    c = Cluster(partitions=3)  # leaders 1, 2, 3
    c.fence(1)
    c.unfence(1)
    c.alter([2, 3, 1])  # partition 0 led by 2 with 1 back in its ISR
    response = c.elect(0, None)
    assert results(response) == {("t", 0): (E.NONE, None)}
    assert c.partition(0).leader == 1


def test_an_unknown_election_type_refuses_every_partition() -> None:
    c = Cluster()
    response = c.elect(2, {"t": [0]})
    message = "Unknown election type 2"
    assert response["error_code"] == E.INVALID_REQUEST
    assert results(response) == {("t", 0): (E.INVALID_REQUEST, message)}


def test_elect_leaders_v0_is_a_preferred_election() -> None:
    c = Cluster()
    c.fence(1)
    c.unfence(1)
    c.alter([2, 3, 1])
    assert results(c.elect(0, {"t": [0]}, version=0)) == {("t", 0): (E.NONE, None)}
    assert ApiError.NONE.ok
