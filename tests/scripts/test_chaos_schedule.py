"""The chaos run's fault schedule (scripts/chaos_lib/schedule.py): seeded and deterministic, every
safe kind covered, pauses and isolations past the broker session timeout."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from chaos_lib.schedule import (  # noqa: E402
    ISOLATE_NODE,
    KILL_LEADER,
    PAUSE_NODE,
    SAFE_KINDS,
    SESSION_TIMEOUT_S,
    STRAND_LEADER,
    make_schedule,
)


def test_the_same_seed_gives_the_same_schedule() -> None:
    assert make_schedule(7, 20) == make_schedule(7, 20)
    assert make_schedule(7, 20) != make_schedule(8, 20)


def test_a_longer_schedule_starts_as_the_shorter_one_of_the_same_seed_does() -> None:
    """The kinds of the first faults do not depend on the count, so --faults N replays a prefix."""
    assert [f.kind for f in make_schedule(3, 5)] == [f.kind for f in make_schedule(3, 20)[:5]]


@pytest.mark.parametrize("seed", range(5))
def test_every_safe_kind_comes_once_in_the_first_faults(seed: int) -> None:
    faults = make_schedule(seed, 25)
    assert len(faults) == 25
    assert sorted(f.kind for f in faults[: len(SAFE_KINDS)]) == sorted(SAFE_KINDS)


@pytest.mark.parametrize("short", [False, True])
def test_targets_and_hold_times_fit_the_cluster(short: bool) -> None:
    for fault in make_schedule(11, 50, nodes=3, partitions=6, short=short):
        assert (0 <= fault.partition < 6) == (fault.kind == KILL_LEADER)
        assert fault.node_id == -1 or 1 <= fault.node_id <= 3
        if fault.kind in (PAUSE_NODE, ISOLATE_NODE):
            assert fault.hold_s > SESSION_TIMEOUT_S  # long enough for the node to be fenced
        assert fault.gap_s > 0


def test_the_unsafe_schedule_strands_leaders_only() -> None:
    faults = make_schedule(1, 4, unsafe=True)
    assert {f.kind for f in faults} == {STRAND_LEADER}
    assert all(0 <= f.partition < 6 for f in faults)


def test_a_negative_count_is_refused() -> None:
    with pytest.raises(ValueError):
        make_schedule(1, -1)
