"""Replication throttles: which replicas a topic's throttled-replicas list names for a broker,
and the byte rate measured as Kafka's Rate over its samples."""

from __future__ import annotations

import pytest

from kafkalike.replica.quota import (
    ALL_PARTITIONS,
    LEADER_THROTTLED_REPLICAS,
    UNLIMITED,
    ReplicationQuota,
    throttled_partitions,
)


@pytest.mark.parametrize(
    ("value", "broker", "expected"),
    [
        ("*", 1, ALL_PARTITIONS),
        (" * ", 3, ALL_PARTITIONS),
        ("", 1, frozenset()),
        ("0:1,1:2,2:1", 1, frozenset({0, 2})),
        ("0:1,1:2,2:1", 2, frozenset({1})),
        ("0:1", 4, frozenset()),
        ("0 : 1, 5:1", 1, frozenset({0, 5})),
    ],
)
def test_the_partitions_a_list_names_for_a_broker(value: str, broker: int, expected: frozenset[int] | None) -> None:
    assert throttled_partitions(value, broker) == expected


def test_a_topic_is_throttled_where_its_list_names_this_broker() -> None:
    quota = ReplicationQuota(LEADER_THROTTLED_REPLICAS, broker_id=2)
    configs = {
        (2, "some"): {LEADER_THROTTLED_REPLICAS: "0:1,1:2"},
        (2, "every"): {LEADER_THROTTLED_REPLICAS: "*"},
        (2, "elsewhere"): {LEADER_THROTTLED_REPLICAS: "0:1"},
        (2, "other-config"): {"follower.replication.throttled.replicas": "*"},
        (4, "2"): {LEADER_THROTTLED_REPLICAS: "*"},  # a broker resource: not a topic's list
    }
    quota.update(configs)
    assert [quota.is_throttled("some", p) for p in (0, 1, 2)] == [False, True, False]
    assert quota.is_throttled("every", 7)
    assert not quota.is_throttled("elsewhere", 0)
    assert not quota.is_throttled("other-config", 0)
    assert not quota.is_throttled("2", 0)
    quota.update({})
    assert not quota.is_throttled("every", 7) and not quota.any_throttled


def test_the_rate_counts_at_least_all_but_one_window() -> None:
    quota = ReplicationQuota(LEADER_THROTTLED_REPLICAS, 1, samples=11, sample_ms=1000)
    quota.record(1000, now_ms=0)
    # One burst at the start: measured over 10 whole windows, not over no time at all.
    assert quota.rate(0) == 100.0
    assert quota.rate(500) == pytest.approx(1000 / 10.5)
    for second in range(1, 11):
        quota.record(1000, now_ms=second * 1000)
    # 11 windows of 1000 bytes, the oldest begun 10 s ago.
    assert quota.rate(10_000) == pytest.approx(1100.0)
    # The first window is 11 s old at 11 s: purged, 10 windows left over at least 10 s.
    assert quota.rate(11_000) == pytest.approx(1000.0)
    assert quota.rate(30_000) == 0.0


def test_a_replica_is_throttled_only_outside_the_isr_and_above_the_bound() -> None:
    quota = ReplicationQuota(LEADER_THROTTLED_REPLICAS, 1, samples=2, sample_ms=1000)
    quota.update({(2, "t"): {LEADER_THROTTLED_REPLICAS: "0:1"}})
    quota.record(5000, now_ms=0)  # 5000 B/s over one window
    assert quota.throttles("t", 0, in_sync=False, bound=4000, now_ms=0)
    assert not quota.throttles("t", 0, in_sync=True, bound=4000, now_ms=0)
    assert not quota.throttles("t", 1, in_sync=False, bound=4000, now_ms=0)  # not listed
    assert not quota.throttles("t", 0, in_sync=False, bound=5000, now_ms=0)  # at the bound: acceptable
    assert not quota.throttles("t", 0, in_sync=False, bound=UNLIMITED, now_ms=0)
    assert not quota.throttles("t", 0, in_sync=False, bound=4000, now_ms=2000)  # the window expired
