"""Any sequence of registrations, heartbeats, unregistrations and session checks, with wrong
ids, epochs, offsets, incarnations, features and directories: the manager never raises, every
reply is an error code Kafka answers these APIs with, and every record it writes replays onto
the image it was written for."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from kafkalike.controller.cluster_control import ClusterControlManager
from kafkalike.controller.delta import MetadataDelta, MetadataReplayError
from kafkalike.controller.image import METADATA_VERSION_FEATURE, MetadataImage
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record
from tests.unit.controller.test_cluster_control import TOPIC, Controller, heartbeat, registration

T = MetadataRecordType
ANSWERS = {
    ErrorCode.NONE,
    ErrorCode.DUPLICATE_BROKER_REGISTRATION,
    ErrorCode.INCONSISTENT_CLUSTER_ID,
    ErrorCode.INVALID_REGISTRATION,
    ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.BROKER_ID_NOT_REGISTERED,
    ErrorCode.STALE_BROKER_EPOCH,
}


ELR_FEATURES = [
    {"name": METADATA_VERSION_FEATURE, "min_supported_version": 7, "max_supported_version": 25},
    {"name": "eligible.leader.replicas.version", "min_supported_version": 0, "max_supported_version": 1},
]


def random_registration(rng: random.Random, elr: bool) -> Any:
    broker_id = rng.randint(0, 4)
    overrides: dict[str, Any] = {"features": ELR_FEATURES} if elr and rng.random() < 0.8 else {}
    if rng.random() < 0.1:
        overrides["cluster_id"] = "wrong"
    if rng.random() < 0.1:
        overrides["log_dirs"] = rng.choice([[], [uuid.UUID(int=3)], [uuid.UUID(int=(9 << 64) | 1)] * 2])
    if rng.random() < 0.1:
        top = rng.choice([3, 24, 25, 30])
        overrides["features"] = [
            {"name": METADATA_VERSION_FEATURE, "min_supported_version": 1, "max_supported_version": top}
        ]
    if rng.random() < 0.3:
        overrides["previous_broker_epoch"] = rng.randint(-1, 60)
    return registration(broker_id, incarnation=rng.randint(1, 3), **overrides)


@pytest.mark.parametrize("seed", range(20))
def test_random_requests_never_break_the_manager(seed: int) -> None:
    rng = random.Random(seed)
    elr = seed % 2 == 1
    c = Controller(elr=elr, session_timeout_ms=9000)
    now_ms = 0
    epochs: dict[int, int] = {}
    outcomes: set[tuple[str, ErrorCode]] = set()
    for step in range(600):
        now_ms += rng.choice([0, 1, 50, 500, 3000])
        image_before = c.image
        kind = rng.random()
        if kind < 0.3:
            req = random_registration(rng, elr)
            result: Any = c.manager.register_broker(
                c.image, req, api_version=rng.choice([2, 4]), next_offset=c.log.next_offset, now_ms=now_ms
            )
            if result.reply.error_code == ErrorCode.NONE:
                epochs[req.broker_id] = result.reply.broker_epoch
        elif kind < 0.8:
            b = rng.randint(0, 5)
            epoch = epochs.get(b, -1) + rng.choice([0, 0, 0, -1, 1])
            req = heartbeat(b, epoch, c.log.next_offset - rng.randint(0, 3), rng.random() < 0.2, rng.random() < 0.15)
            result = c.manager.heartbeat(c.image, req, next_offset=c.log.next_offset, now_ms=now_ms)
        elif kind < 0.85:
            result = c.manager.unregister_broker(c.image, rng.randint(0, 5))
        elif kind < 0.9 and not c.image.topics_by_id and c.image.unfenced_brokers():
            leaders = [b.broker_id for b in c.image.unfenced_brokers()]
            records = [metadata_record(T.TOPIC_RECORD, name="t", topic_id=TOPIC)]
            for p in range(6):
                b = leaders[p % len(leaders)]
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
            c.log.append(records)
            continue
        else:
            result = c.manager.fence_stale_broker(c.image, now_ms)
        reply = result.reply
        if hasattr(reply, "error_code"):
            outcomes.add((type(reply).__name__, reply.error_code))
            assert reply.error_code in ANSWERS, (step, reply)
            if reply.error_code != ErrorCode.NONE:
                assert result.records == () and reply.error_message
        MetadataDelta(image_before).replay_all(result.records).apply()  # raises if they do not follow
        c.apply(result)
    # The run reached the rules, not only the refusals.
    assert {("BrokerRegistrationReply", ErrorCode.NONE), ("BrokerHeartbeatReply", ErrorCode.NONE)} <= outcomes
    assert ("BrokerHeartbeatReply", ErrorCode.STALE_BROKER_EPOCH) in outcomes
    assert any(not b.fenced for b in c.image.brokers.values()) or any(
        r.type == T.BROKER_REGISTRATION_CHANGE_RECORD for r in c.log.records
    )


class FencesAtTheWrongEpoch(ClusterControlManager):
    def _handle_fenced(self, image: MetadataImage, broker_id: int, records: list[ApiMessageAndVersion]) -> None:
        epoch = image.brokers[broker_id].epoch + 1
        records.append(
            metadata_record(T.BROKER_REGISTRATION_CHANGE_RECORD, 0, broker_id=broker_id, broker_epoch=epoch, fenced=1)
        )


def test_records_that_do_not_follow_their_image_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a manager fencing at the wrong epoch fails the replay check."""
    monkeypatch.setattr(ClusterControlManager, "_handle_fenced", FencesAtTheWrongEpoch._handle_fenced)
    with pytest.raises(MetadataReplayError):
        test_random_requests_never_break_the_manager(0)
