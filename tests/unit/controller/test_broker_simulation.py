"""Brokers and the cluster control manager under the deterministic simulation: invariants after
every event over many seeds, with and without ELR; one seed replays exactly; each invariant
catches a manager broken on purpose (its negative control)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalike.controller.cluster_control import BrokerHeartbeatReply, ClusterControlManager
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.heartbeats import BrokerControlState, BrokerHeartbeats
from kafkalike.controller.image import MetadataImage
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record
from kafkalike.testing.broker_simulation import FAMILIES, BrokerSimulation, InvariantViolation, SimConfig

T = MetadataRecordType
SEEDS_PER_FAMILY = 300


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def first_violation(
    config: SimConfig, seeds: range, factory: Any = ClusterControlManager, family: str = "rf1"
) -> InvariantViolation | None:
    for seed in seeds:
        try:
            BrokerSimulation(seed, config, manager_factory=factory, family=family).run()
        except InvariantViolation as violation:
            return violation
    return None


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_invariant_holds_over_many_seeds(family: str) -> None:
    violation = first_violation(FAMILIES[family], range(SEEDS_PER_FAMILY), family=family)
    assert violation is None, str(violation)


def test_the_runs_exercise_what_they_check() -> None:
    totals: dict[str, int] = {}
    for seed in range(20):
        for k, v in BrokerSimulation(seed, SimConfig(elr=True)).run().stats.items():
            totals[k] = totals.get(k, 0) + v
    assert totals["fenced_by_timeout"] >= 20 and totals["unfenced"] >= 60
    assert totals["failovers"] >= 10 and totals["shutdowns"] >= 10 and totals["registrations"] >= 60
    assert totals["balanced_recoveries"] >= 10  # the ELR exception of "a fenced broker leads nothing" is reached


def test_a_seed_replays_exactly() -> None:
    def run(seed: int) -> list[ApiMessageAndVersion]:
        return BrokerSimulation(seed, SimConfig(duration_ms=60_000)).run().log.records

    assert run(11) == run(11)
    assert run(11) != run(12)


def test_fencing_happens_within_one_timeout_and_one_check_interval() -> None:
    worst = max(BrokerSimulation(seed).run().stats["max_fence_delay_ms"] for seed in range(30))
    assert 9000 < worst <= 9000 + 1125


# -- negative controls: managers broken on purpose --------------------------------------------------


class NeverFences(ClusterControlManager):
    def fence_stale_broker(self, image: MetadataImage, now_ms: int) -> ControllerResult[bool]:
        super().fence_stale_broker(image, now_ms)  # keeps its check schedule, drops the records
        return ControllerResult.of((), False)


class IgnoresTheOffset(BrokerHeartbeats):
    def next_state(self, broker_id: int, **kwargs: Any) -> tuple[BrokerControlState, BrokerControlState]:
        kwargs["current_metadata_offset"] = kwargs["register_record_offset"]
        return super().next_state(broker_id, **kwargs)


class UnfencesBeforeCaughtUp(ClusterControlManager):
    def activate(self, image: MetadataImage, now_ms: int) -> None:
        super().activate(image, now_ms)
        assert self.heartbeats is not None
        broken = IgnoresTheOffset(self.session_timeout_ms)
        broken.__dict__.update(self.heartbeats.__dict__)
        self.heartbeats = broken


class FencingKeepsLeaders(ClusterControlManager):
    def _handle_fenced(self, image: MetadataImage, broker_id: int, records: list[ApiMessageAndVersion]) -> None:
        epoch = image.brokers[broker_id].epoch
        records.append(
            metadata_record(T.BROKER_REGISTRATION_CHANGE_RECORD, 0, broker_id=broker_id, broker_epoch=epoch, fenced=1)
        )


class EpochsFall(ClusterControlManager):
    def register_broker(self, image: MetadataImage, request: Any, **kw: Any) -> Any:
        kw["next_offset"] = 100_000 - kw["next_offset"]
        return super().register_broker(image, request, **kw)


class LetsLeadersShutDown(ClusterControlManager):
    def heartbeat(self, image: MetadataImage, request: Any, **kw: Any) -> ControllerResult[BrokerHeartbeatReply]:
        result = super().heartbeat(image, request, **kw)
        if request.want_shut_down and not result.reply.error_code:
            return ControllerResult.of((), dataclasses.replace(result.reply, should_shut_down=True))
        return result


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (NeverFences, "ms after its last heartbeat"),
        (UnfencesBeforeCaughtUp, "before its registration at"),
        (FencingKeepsLeaders, "which is fenced"),
        (EpochsFall, "epoch fell"),
        (LetsLeadersShutDown, "told to shut down"),
    ],
)
def test_each_invariant_catches_a_broken_manager(factory: Any, message: str) -> None:
    violation = first_violation(SimConfig(), range(50), factory)
    assert violation is not None, f"{factory.__name__} passed every seed"
    assert message in str(violation)
    seed = str(violation).split()[1]
    assert f"python scripts/simulate_brokers.py --family rf1 --seed {seed}" in str(violation)
