"""A fault hook makes a real consumer group rebalance: the kit used the way a user tests rebalances.

Two kafka-python members share a topic. Holding one member's heartbeats (``delay`` for its
client id) past its session timeout makes the broker drop it: the group rebalances and its
partitions move to the other member. Releasing the hold lets it rejoin, and the partitions are
split again. Each rebalance is a new generation, seen in the members' SyncGroup requests
(observed by ``intercept`` without changing them).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.coordinator.assignors.range import RangePartitionAssignor

from kafkalike.protocol.api import RequestHeader
from kafkalike.protocol.codec import Message
from kafkalike.testing import InProcessBroker

HEARTBEAT, SYNC_GROUP = 12, 14
PARTITIONS = 4
SESSION_TIMEOUT_MS = 1000
HEARTBEAT_INTERVAL_MS = 100
# Far longer than the session: the broker must give up on the member before the hold ends.
HOLD_S = 5.0
WAIT_S = 30.0


class Group:
    """What the members report, under one condition: owned partitions and SyncGroup generations."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.owned: dict[str, frozenset[int]] = {}
        self.generations: dict[str, list[int]] = {}
        self.errors: list[BaseException] = []

    def report_owned(self, member: str, owned: frozenset[int]) -> None:
        with self.changed:
            if self.owned.get(member) != owned:
                self.owned[member] = owned
                self.changed.notify_all()

    def observe_sync(self, header: RequestHeader, request: Message) -> Mapping[str, Any] | None:
        """Runs on the broker's loop: records the generation, lets the broker answer."""
        with self.changed:
            self.generations.setdefault(str(header.client_id), []).append(int(request.generation_id))
            self.changed.notify_all()
        return None

    def generation(self, member: str) -> int:
        with self.changed:
            return max(self.generations.get(member, [-1]))

    def wait(self, condition: Callable[[], bool], what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: condition() or bool(self.errors), WAIT_S):
                raise AssertionError(
                    f"timed out waiting for {what}: owned {self.owned}, generations {self.generations}"
                )
            assert not self.errors, self.errors


class Member:
    """A consumer polled by a thread of its own until ``stop``; reports its assignment."""

    def __init__(self, group: Group, name: str, bootstrap: str, topic: str, group_id: str) -> None:
        self.name = name
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            client_id=name,
            group_id=group_id,
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            partition_assignment_strategy=(RangePartitionAssignor,),
            reconnect_backoff_max_ms=200,
        )
        self.consumer.subscribe([topic])
        # A metadata update with the subscription in place before the first join: without it
        # kafka-python may assign from no metadata and rebalance once more.
        assert topic in self.consumer.topics()
        self._group = group
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self.consumer.poll(timeout_ms=100)
                self._group.report_owned(self.name, frozenset(tp.partition for tp in self.consumer.assignment()))
        except BaseException as exc:  # handed to the waiting test
            with self._group.changed:
                self._group.errors.append(exc)
                self._group.changed.notify_all()
        finally:
            self.consumer.close(autocommit=False)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), f"{self.name} did not stop"


@pytest.fixture
def group() -> Iterator[Group]:
    yield Group()


def split_evenly(group: Group) -> bool:
    a, b = group.owned.get("member-a", frozenset()), group.owned.get("member-b", frozenset())
    return len(a) == len(b) == PARTITIONS // 2 and a | b == set(range(PARTITIONS))


@pytest.mark.kafka_topic(partitions=PARTITIONS)
def test_held_heartbeats_make_the_group_rebalance_and_partitions_move(
    kafka_broker: InProcessBroker, kafka_topic: str, group: Group
) -> None:
    kafka_broker.faults.intercept(SYNC_GROUP, group.observe_sync)
    members = [
        Member(group, name, kafka_broker.bootstrap_servers, kafka_topic, f"{kafka_topic}-group")
        for name in ("member-a", "member-b")
    ]
    try:
        group.wait(lambda: split_evenly(group), "both members to own half of the partitions")
        b_owned_before = group.owned["member-b"]
        first = group.generation("member-a")
        assert group.generation("member-b") == first

        hold = kafka_broker.faults.delay(HEARTBEAT, HOLD_S, client_id="member-b")
        held_at = time.monotonic()
        group.wait(lambda: group.owned.get("member-a") == set(range(PARTITIONS)), "member-a to take every partition")
        # member-b was dropped by its session timing out, not by the hold ending.
        assert time.monotonic() - held_at < HOLD_S
        assert b_owned_before <= group.owned["member-a"]
        second = group.generation("member-a")
        assert second > first

        kafka_broker.faults.remove(hold)
        group.wait(
            lambda: split_evenly(group) and group.generation("member-b") > second,
            "member-b to rejoin and the partitions to be split again",
        )
        assert group.generation("member-a") == group.generation("member-b") > second
    finally:
        for member in members:
            member.stop()
