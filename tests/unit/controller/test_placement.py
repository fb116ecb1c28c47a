"""Kafka's StripedReplicaPlacer: striping from a random start, rounds, racks, fenced brokers."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from controllertest_harness import JavaRandom, cluster

from kafkalike.controller.api_error import ControllerApiError
from kafkalike.controller.placement import (
    PlacementError,
    StripedReplicaPlacer,
    UsableBroker,
    check_manual_assignment,
    usable_brokers,
)
from kafkalike.protocol.errors import ErrorCode


def brokers(*ids: int, racks: dict[int, str] | None = None, fenced: tuple[int, ...] = ()) -> list[UsableBroker]:
    racks = racks or {}
    return [UsableBroker(b, racks.get(b), b in fenced) for b in ids]


def test_each_round_places_every_unfenced_broker_once_as_leader() -> None:
    for seed in range(50):
        placed = StripedReplicaPlacer(brokers(1, 2, 3, 4), random.Random(seed)).place(12, 1)
        for start in range(0, 12, 4):
            assert sorted(r[0] for r in placed[start : start + 4]) == [1, 2, 3, 4], (seed, placed)


def test_the_first_partition_starts_at_a_random_broker_reproducibly_by_seed() -> None:
    firsts = {StripedReplicaPlacer(brokers(1, 2, 3), random.Random(seed)).place(1, 1)[0][0] for seed in range(40)}
    assert firsts == {1, 2, 3}
    again = [StripedReplicaPlacer(brokers(1, 2, 3), random.Random(5)).place(7, 2) for _ in range(2)]
    assert again[0] == again[1]


def test_many_partitions_spread_evenly() -> None:
    placed = StripedReplicaPlacer(brokers(1, 2, 3), random.Random(1)).place(300, 1)
    assert Counter(r[0] for r in placed) == {1: 100, 2: 100, 3: 100}


def test_replicas_are_distinct_and_land_on_every_rack() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for seed in range(30):
        for replicas in StripedReplicaPlacer(brokers(*racks, racks=racks), random.Random(seed)).place(20, 3):
            assert len(set(replicas)) == 3
            assert {racks[b] for b in replicas} == {"a", "b", "c"}, (seed, replicas)


def test_without_racks_replicas_are_still_distinct() -> None:
    for replicas in StripedReplicaPlacer(brokers(1, 2, 3), random.Random(3)).place(30, 3):
        assert sorted(replicas) == [1, 2, 3]


def test_a_fenced_broker_never_leads_and_is_taken_only_when_needed() -> None:
    placer = StripedReplicaPlacer(brokers(1, 2, 3, fenced=(3,)), random.Random(2))
    placed = placer.place(20, 1)
    assert {r[0] for r in placed} == {1, 2}
    for replicas in StripedReplicaPlacer(brokers(1, 2, 3, fenced=(3,)), random.Random(2)).place(20, 3):
        assert replicas[0] != 3 and sorted(replicas) == [1, 2, 3]


@pytest.mark.parametrize(
    ("usable", "factor", "message"),
    [
        (brokers(1, 2), 0, "Invalid replication factor 0: the replication factor must be positive."),
        (
            brokers(1, 2, fenced=(1, 2)),
            1,
            "All brokers are currently fenced, or have all their log directories cordoned.",
        ),
        (brokers(), 1, "All brokers are currently fenced, or have all their log directories cordoned."),
        (
            brokers(1, 2),
            3,
            "The target replication factor of 3 cannot be reached because only 2 broker(s) are registered or some brokers have all their log directories cordoned.",
        ),
    ],
)
def test_refusals_are_kafkas(usable: list[UsableBroker], factor: int, message: str) -> None:
    with pytest.raises(PlacementError) as caught:
        StripedReplicaPlacer(usable, random.Random(0)).place(1, factor)
    assert caught.value.error.code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert caught.value.message == message


def test_brokers_in_controlled_shutdown_are_not_usable_fenced_ones_are() -> None:
    image = cluster([1, 2, 3, 4], fenced=[2], shutting_down=[3])
    assert usable_brokers(image.brokers) == [
        UsableBroker(1, None, False),
        UsableBroker(2, None, True),
        UsableBroker(4, None, False),
    ]


@pytest.mark.parametrize(
    ("replicas", "factor", "message"),
    [
        ([], None, "The manual partition assignment includes an empty replica list."),
        ([1, 9], None, "The manual partition assignment includes broker 9, but no such broker is registered."),
        ([2, 1, 2], None, "The manual partition assignment includes the broker 2 more than once."),
        (
            [1, 2],
            1,
            "The manual partition assignment includes a partition with 2 replica(s), but this is not consistent "
            "with previous partitions, which have 1 replica(s).",
        ),
    ],
)
def test_manual_assignment_errors(replicas: list[int], factor: int | None, message: str) -> None:
    with pytest.raises(ControllerApiError) as caught:
        check_manual_assignment(replicas, cluster([1, 2, 3]).brokers, factor)
    assert caught.value.error.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert caught.value.error.message == message


def test_a_valid_manual_assignment_passes() -> None:
    check_manual_assignment([3, 1], cluster([1, 2, 3]).brokers, 2)


def test_leaders_stripe_over_racks_whatever_their_sizes() -> None:
    racks = {1: "a", 2: "a", 3: "b"}
    placed = StripedReplicaPlacer(brokers(1, 2, 3, racks=racks), random.Random(4)).place(300, 1)
    # Racks take turns for the leader, so the lone broker of b leads about half, not a third.
    by_rack = Counter(racks[r[0]] for r in placed)
    assert 120 <= by_rack["b"] <= 180, by_rack


def test_brokers_without_a_rack_are_one_rack_of_their_own() -> None:
    racks = {1: "a", 2: "b"}
    for replicas in StripedReplicaPlacer(brokers(1, 2, 3, racks=racks), random.Random(8)).place(30, 3):
        assert sorted(replicas) == [1, 2, 3]


KAFKA_PLACEMENTS = Path(__file__).with_name("kafka_placements.txt")


def kafka_cases() -> list[tuple[str, str]]:
    lines = KAFKA_PLACEMENTS.read_text().splitlines()
    return [tuple(part.strip() for part in line.split("|")) for line in lines if not line.startswith("#")]  # type: ignore[misc]


def place_as_the_fixture_says(case: str) -> str:
    seed, partitions, factor, *listed = case.split(" ")
    usable = []
    for entry in listed[0].split(",") if listed else []:
        broker_id, rack, fenced = entry.split(":")
        usable.append(UsableBroker(int(broker_id), None if rack == "-" else rack, fenced == "1"))
    try:
        placed = StripedReplicaPlacer(usable, JavaRandom(int(seed))).place(int(partitions), int(factor))
    except PlacementError as exc:
        return f"ERROR {exc.message}"
    return ";".join(" ".join(str(b) for b in replicas) for replicas in placed)


def test_the_same_placements_as_kafkas_placer_for_the_same_random_draws() -> None:
    """kafka_placements.txt holds what Kafka 4.4.0's StripedReplicaPlacer placed (4.0.2 placed
    the same, its refusals in older words), given ``new Random(seed)``, for 401 clusters (with and without racks, fenced brokers, factors 0 to
    brokers + 1); made by oracle/PlacementOracle.java. Our placer, drawing from a Random that
    draws as Java's, must place every one the same (or refuse with the same words)."""
    cases = kafka_cases()
    assert len(cases) > 400
    wrong = [(case, kafka, ours) for case, kafka in cases if (ours := place_as_the_fixture_says(case)) != kafka]
    assert not wrong, wrong[:3]


def test_the_fixture_comparison_notices_a_different_draw() -> None:
    """Negative control: Python's own Random (other draws) does not reproduce Kafka's choices."""
    placed = [c for c in kafka_cases() if not c[1].startswith("ERROR") and ";" in c[1]]
    differing = 0
    for case, kafka in placed:
        seed, partitions, factor, listed = case.split(" ")
        usable = [
            UsableBroker(int(i), None if r == "-" else r, f == "1")
            for i, r, f in (e.split(":") for e in listed.split(","))
        ]
        ours = StripedReplicaPlacer(usable, random.Random(int(seed))).place(int(partitions), int(factor))
        differing += ";".join(" ".join(map(str, r)) for r in ours) != kafka
    assert differing > len(placed) // 2
