"""The server-side assignors of KIP-848 consumer groups: uniform (balanced, sticky) and range."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping

import pytest

from kafkalike.group.assignors import (
    ASSIGNORS,
    Assignment,
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    RangeAssignor,
    UniformAssignor,
    assignors_from_config,
)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
T3 = uuid.UUID(int=3)


def spec(members: Mapping[str, tuple[frozenset[uuid.UUID], Assignment]], partitions: dict[uuid.UUID, int]) -> GroupSpec:
    return GroupSpec({m: MemberSpec(None, topics, prior) for m, (topics, prior) in members.items()}, partitions)


def counts(result: dict[str, Assignment]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def owners(result: dict[str, Assignment]) -> dict[tuple[uuid.UUID, int], str]:
    out: dict[tuple[uuid.UUID, int], str] = {}
    for member, assignment in result.items():
        for topic, partitions in assignment.items():
            for p in partitions:
                assert (topic, p) not in out, f"{topic}-{p} assigned twice"
                out[(topic, p)] = member
    return out


def test_uniform_spreads_evenly_and_covers_everything() -> None:
    topics = frozenset({T1, T2})
    result = UniformAssignor().assign(spec({m: (topics, {}) for m in "abc"}, {T1: 6, T2: 2}))
    assert sorted(counts(result).values()) == [2, 3, 3]
    assert len(owners(result)) == 8


def test_uniform_is_sticky_when_a_member_joins_and_leaves() -> None:
    topics = frozenset({T1})
    first = UniformAssignor().assign(spec({m: (topics, {}) for m in "ab"}, {T1: 6}))
    members = {"a": (topics, first["a"]), "b": (topics, first["b"]), "c": (topics, {})}
    second = UniformAssignor().assign(spec(members, {T1: 6}))
    assert counts(second) == {"a": 2, "b": 2, "c": 2}
    # a and b each give up exactly one partition: nothing else moves.
    assert second["a"][T1] < first["a"][T1] and second["b"][T1] < first["b"][T1]
    third = UniformAssignor().assign(spec({"a": (topics, second["a"]), "c": (topics, second["c"])}, {T1: 6}))
    assert third["a"][T1] >= second["a"][T1] and third["c"][T1] >= second["c"][T1]
    assert counts(third) == {"a": 3, "c": 3}


def test_uniform_heterogeneous_subscriptions() -> None:
    members: dict[str, tuple[frozenset[uuid.UUID], Assignment]] = {
        "a": (frozenset({T1}), {}),
        "b": (frozenset({T1, T2}), {}),
        "c": (frozenset({T2, T3}), {}),
    }
    result = UniformAssignor().assign(spec(members, {T1: 3, T2: 3, T3: 3}))
    owned = owners(result)
    assert len(owned) == 9
    for (topic, _), member in owned.items():
        assert topic in members[member][0]
    assert max(counts(result).values()) - min(counts(result).values()) <= 1


def test_uniform_drops_what_a_member_no_longer_subscribes_to_or_that_no_longer_exists() -> None:
    prior: Assignment = {T1: frozenset({0, 1, 5}), T2: frozenset({0})}
    result = UniformAssignor().assign(spec({"a": (frozenset({T1}), prior)}, {T1: 4}))
    assert result == {"a": {T1: frozenset({0, 1, 2, 3})}}


@pytest.mark.parametrize("seed", range(10))
def test_uniform_random_memberships_stay_balanced_and_complete(seed: int) -> None:
    rng = random.Random(seed)
    partitions = {T1: rng.randint(1, 12), T2: rng.randint(1, 12)}
    previous: dict[str, Assignment] = {}
    for _ in range(8):
        names = sorted(rng.sample("abcdefg", rng.randint(1, 6)))
        members = {m: (frozenset({T1, T2}), previous.get(m, {})) for m in names}
        result = UniformAssignor().assign(spec(members, partitions))
        assert len(owners(result)) == sum(partitions.values())
        assert max(counts(result).values()) - min(counts(result).values()) <= 1
        previous = result


def test_range_gives_contiguous_ranges_extra_to_the_first() -> None:
    topics = frozenset({T1, T2})
    result = RangeAssignor().assign(spec({m: (topics, {}) for m in ("m2", "m1", "m3")}, {T1: 7, T2: 3}))
    assert result["m1"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0})}
    assert result["m2"] == {T1: frozenset({3, 4}), T2: frozenset({1})}
    assert result["m3"] == {T1: frozenset({5, 6}), T2: frozenset({2})}


def test_range_orders_static_members_first_by_instance_id() -> None:
    members = {
        "z": MemberSpec("i-2", frozenset({T1}), {}),
        "a": MemberSpec(None, frozenset({T1}), {}),
        "y": MemberSpec("i-1", frozenset({T1}), {}),
    }
    result = RangeAssignor().assign(GroupSpec(members, {T1: 3}))
    assert (result["y"], result["z"], result["a"]) == ({T1: frozenset({0})}, {T1: frozenset({1})}, {T1: frozenset({2})})


def test_assignors_refuse_topics_without_metadata() -> None:
    for assignor in ASSIGNORS.values():
        with pytest.raises(PartitionAssignorError):
            assignor.assign(spec({"a": (frozenset({T3}), {})}, {T1: 1}))
        assert assignor.assign(GroupSpec({}, {T1: 1})) == {}


def test_assignor_names_from_config() -> None:
    assert assignors_from_config(["range", " uniform", "range"]) == ("range", "uniform")
    kafka_names = [
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
    ]
    assert assignors_from_config(kafka_names) == ("uniform", "range")
    with pytest.raises(ValueError):
        assignors_from_config(["sticky"])
    with pytest.raises(ValueError):
        assignors_from_config([""])
