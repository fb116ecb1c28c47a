"""Partition changes (Kafka's PartitionChangeBuilder rules). The expected records are what Kafka
4.0.2's own builder wrote for the same partitions (compat_tests/differential/test_partition_change.py
compares the two over thousands of random partitions)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from kafkalike.controller.image import PartitionRegistration
from kafkalike.controller.partition_change import Election, PartitionChange, java_hash_set_order

TOPIC = uuid.UUID(int=0x70)


def change(
    replicas: Sequence[int],
    isr: Sequence[int],
    leader: int,
    acceptable: Sequence[int],
    target_isr: Sequence[int],
    *,
    elr: Sequence[int] = (),
    last_known_elr: Sequence[int] = (),
    recovery: int = 0,
    min_isr: int = 1,
    elr_enabled: bool = False,
    election: Election = Election.ONLINE,
    unclean: Sequence[int] = (),
    mv: int = 25,
) -> dict[str, object] | None:
    partition = PartitionRegistration(
        replicas=tuple(replicas),
        isr=tuple(isr),
        leader=leader,
        leader_epoch=3,
        partition_epoch=5,
        leader_recovery_state=recovery,
        elr=tuple(elr),
        last_known_elr=tuple(last_known_elr),
    )
    record = PartitionChange(
        partition,
        TOPIC,
        0,
        set(acceptable).__contains__,
        metadata_version=mv,
        min_isr=min_isr,
        elr_enabled=elr_enabled,
        election=election,
        target_isr=target_isr,
        unclean_shutdown_replicas=unclean,
    ).build()
    if record is None:
        return None
    return {
        "version": record.version,
        "leader": record.leader,
        "isr": record.isr,
        "elr": record.eligible_leader_replicas,
        "lke": record.last_known_elr,
        "lrs": record.leader_recovery_state,
    }


def test_rf1_fenced_without_elr_keeps_the_last_isr_member_and_has_no_leader() -> None:
    assert change([1], [1], 1, [], []) == {"version": 2, "leader": -1, "isr": None, "elr": None, "lke": None, "lrs": -1}


def test_rf1_fenced_with_elr_empties_the_isr_into_the_elr() -> None:
    assert change([1], [1], 1, [], [], elr_enabled=True) == {
        "version": 2,
        "leader": -1,
        "isr": [],
        "elr": [1],
        "lke": [1],
        "lrs": -1,
    }


def test_balanced_recovery_elects_the_last_known_leader_uncleanly() -> None:
    result = change([1], [], -1, [1], [], elr=[1], last_known_elr=[1], elr_enabled=True, unclean=[1])
    assert result == {"version": 2, "leader": 1, "isr": [1], "elr": [], "lke": [], "lrs": 1}


def test_an_isr_below_min_isr_moves_the_leaver_into_the_elr() -> None:
    result = change([1, 2, 3], [1, 2], 1, [2, 3], [2], min_isr=2, elr_enabled=True, election=Election.UNCLEAN)
    assert result == {"version": 2, "leader": 2, "isr": [2], "elr": [1], "lke": None, "lrs": -1}


def test_an_unclean_election_forces_the_isr_and_marks_recovery() -> None:
    result = change([1, 2], [1], 1, [2], [], election=Election.UNCLEAN)
    assert result == {"version": 2, "leader": 2, "isr": [2], "elr": None, "lke": None, "lrs": 1}


def test_the_preferred_replica_is_elected_when_asked() -> None:
    assert change([2, 1], [1, 2], 1, [1, 2], [1, 2], election=Election.PREFERRED) == {
        "version": 2,
        "leader": 2,
        "isr": None,
        "elr": None,
        "lke": None,
        "lrs": -1,
    }
    assert change([2, 1], [1, 2], 1, [1, 2], [1, 2]) is None  # ONLINE keeps a valid leader


def test_older_metadata_versions_bump_the_leader_epoch_on_isr_shrink() -> None:
    assert change([1, 2], [1, 2], 1, [1, 2], [1], mv=11) == {
        "version": 0,
        "leader": 1,
        "isr": [1],
        "elr": None,
        "lke": None,
        "lrs": -1,
    }
    assert change([1, 2], [1, 2], 1, [1, 2], [1], mv=12)["leader"] == -2  # type: ignore[index]


@pytest.mark.parametrize(
    ("values", "initial", "order"),
    [([3, 1, 2], 0, [1, 2, 3]), ([33, 3], 0, [33, 3]), ([1, 33, 17], 1, [1, 33, 17]), ([17, 1], 0, [17, 1])],
)
def test_sets_iterate_as_javas_hash_set(values: list[int], initial: int, order: list[int]) -> None:
    assert java_hash_set_order(values, initial) == order
