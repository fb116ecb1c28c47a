"""The marker channel (Kafka's TransactionMarkerChannelManager) against stand-in brokers on trio's
MockClock: one request per destination carries every queued marker; a partition without a known
leader waits for the metadata to change; a NOT_LEADER answer is routed again with the metadata
of now (at once to a new leader, at the next metadata change or backoff to the same one); an
unreachable broker is tried again at the reconnect backoff, not once per marker; a job no longer
wanted is neither sent nor reported."""

from __future__ import annotations

from collections.abc import Sequence

import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from kafkalike.coordinator import ShardSlot
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.txn_markers import RECONNECT_BACKOFF_MAX_MS, UNKNOWN, MarkerChannel
from kafkalike.server.txn_service import MarkerEntry, _entry_for
from kafkalike.txn import MarkerJob, TopicPartition

E = ErrorCode
HERE, OTHER, THIRD = 1, 2, 3


def job(n: int, *partitions: TopicPartition) -> MarkerJob:
    return MarkerJob(f"t{n}", 1000 + n, 0, 0, True, frozenset(partitions))


class Stand:
    """Metadata (leaders by partition), brokers that answer (or not), and what the shard heard."""

    def __init__(self) -> None:
        self.leaders: dict[TopicPartition, int] = {}
        self.refusing: dict[int, set[TopicPartition]] = {}  # broker -> partitions it answers NOT_LEADER for
        self.unreachable: set[int] = set()
        self.requests: list[tuple[int, int]] = []  # (broker, markers), answered or not
        self.reported: dict[str, dict[TopicPartition, ErrorCode]] = {}
        self.unwanted: set[str] = set()
        self.published = trio.Event()
        slot: ShardSlot = ShardSlot(0, 0, None)  # type: ignore[arg-type]
        self.slot = slot
        self.channel = MarkerChannel(
            HERE,
            route=lambda tp: self.leaders.get(tp),
            write_local=self.write_local,
            send=self.send,
            report=self.report,
            wanted=lambda _slot, j: j.transactional_id not in self.unwanted,
            metadata_changed=self.metadata_changed,
            entry=_entry_for,
        )

    async def write_local(self, entries: Sequence[MarkerEntry]) -> list[dict[TopicPartition, ErrorCode]]:
        return await self._answer(HERE, entries)

    async def send(self, broker: int, entries: Sequence[MarkerEntry]) -> list[dict[TopicPartition, ErrorCode]] | None:
        if broker in self.unreachable:
            self.requests.append((broker, len(entries)))
            return None
        return await self._answer(broker, entries)

    async def _answer(self, broker: int, entries: Sequence[MarkerEntry]) -> list[dict[TopicPartition, ErrorCode]]:
        self.requests.append((broker, len(entries)))
        await trio.sleep(0.001)  # a round trip
        refused = self.refusing.get(broker, set())
        return [{tp: E.NOT_LEADER_OR_FOLLOWER if tp in refused else E.NONE for tp in e.partitions} for e in entries]

    def report(self, _slot: object, j: MarkerJob, answer: dict[TopicPartition, ErrorCode]) -> None:
        self.reported.setdefault(j.transactional_id, {}).update(answer)

    async def metadata_changed(self) -> None:
        await self.published.wait()
        self.published = trio.Event()

    def publish(self) -> None:
        self.published.set()


async def _settled() -> None:
    await wait_all_tasks_blocked()


async def test_every_marker_queued_for_a_broker_goes_in_one_request(autojump_clock: MockClock) -> None:
    stand = Stand()
    stand.leaders = {("a", 0): OTHER, ("a", 1): OTHER, ("b", 0): HERE}
    async with trio.open_nursery() as nursery:
        await nursery.start(stand.channel.run)
        stand.unreachable.add(OTHER)  # markers pile up while the broker cannot be reached
        for n in range(10):
            stand.channel.add(stand.slot, job(n, ("a", n % 2), ("b", 0)))
        await trio.sleep(0.5)
        assert stand.channel.queued(OTHER) == 10
        stand.unreachable.clear()
        await trio.sleep(RECONNECT_BACKOFF_MAX_MS / 1000 + 0.1)
        assert stand.channel.stats(OTHER) == (1, 10)  # one answered request carried all ten
        assert stand.channel.stats(HERE)[1] == 10 and stand.channel.stats(HERE)[0] < 10
        assert all(stand.reported[f"t{n}"] == {("a", n % 2): E.NONE, ("b", 0): E.NONE} for n in range(10))
        nursery.cancel_scope.cancel()


async def test_attempts_at_an_unreachable_broker_back_off_to_one_a_second(autojump_clock: MockClock) -> None:
    stand = Stand()
    stand.leaders = {("a", 0): OTHER}
    stand.unreachable.add(OTHER)
    async with trio.open_nursery() as nursery:
        await nursery.start(stand.channel.run)
        stand.channel.add(stand.slot, job(1, ("a", 0)))
        await trio.sleep(10)
        attempts = len(stand.requests)
        assert 10 <= attempts <= 16  # 50, 100, 200, 400, 800 ms, then each second: not a busy loop
        assert "t1" not in stand.reported
        nursery.cancel_scope.cancel()


async def test_a_partition_without_a_leader_waits_for_the_metadata(autojump_clock: MockClock) -> None:
    stand = Stand()
    stand.leaders = {("a", 0): -1, ("gone", 0): OTHER}
    async with trio.open_nursery() as nursery:
        await nursery.start(stand.channel.run)
        stand.channel.add(stand.slot, job(1, ("a", 0)))
        await trio.sleep(30)
        assert stand.channel.queued(UNKNOWN) == 1 and stand.requests == []
        stand.leaders[("a", 0)] = THIRD
        stand.publish()
        await _settled()
        await trio.sleep(0.01)
        assert stand.requests == [(THIRD, 1)] and stand.reported["t1"] == {("a", 0): E.NONE}
        del stand.leaders[("gone", 0)]  # its topic deleted: the coordinator drops it at once
        stand.channel.add(stand.slot, job(2, ("gone", 0)))
        assert stand.reported["t2"] == {("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        nursery.cancel_scope.cancel()


async def test_not_leader_goes_to_the_new_leader_at_once_and_waits_for_news_about_the_old(
    autojump_clock: MockClock,
) -> None:
    stand = Stand()
    stand.leaders = {("a", 0): OTHER, ("a", 1): OTHER}
    stand.refusing[OTHER] = {("a", 0), ("a", 1)}
    async with trio.open_nursery() as nursery:
        await nursery.start(stand.channel.run)
        stand.channel.add(stand.slot, job(1, ("a", 0), ("a", 1)))
        await trio.sleep(0.01)
        assert stand.requests == [(OTHER, 1)] and "t1" not in stand.reported
        # The metadata moves a-1 to THIRD: sent there at once; a-0 stays with OTHER, which now answers.
        stand.leaders[("a", 1)] = THIRD
        stand.refusing[OTHER] = set()
        stand.publish()
        await trio.sleep(0.01)
        assert (THIRD, 1) in stand.requests
        assert stand.reported["t1"] == {("a", 0): E.NONE, ("a", 1): E.NONE}
        nursery.cancel_scope.cancel()


async def test_a_job_no_longer_wanted_is_neither_sent_nor_reported(autojump_clock: MockClock) -> None:
    stand = Stand()
    stand.leaders = {("a", 0): OTHER}
    stand.unreachable.add(OTHER)
    async with trio.open_nursery() as nursery:
        await nursery.start(stand.channel.run)
        stand.channel.add(stand.slot, job(1, ("a", 0)))
        await trio.sleep(0.5)
        stand.unwanted.add("t1")  # its shard unloaded, say
        stand.unreachable.clear()
        sent = len(stand.requests)
        await trio.sleep(5)
        assert len(stand.requests) == sent and "t1" not in stand.reported
        assert stand.channel.queued(OTHER) == 0
        nursery.cancel_scope.cancel()
