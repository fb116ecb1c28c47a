"""aiokafka consumer groups.

The scenarios of ``group_support`` (partitions shared in a group and read by every group, a
member killed with SIGKILL under the sticky strategy, at-least-once and at-most-once, a broker
restart under active groups), replay by seek and by resetting a group's offsets, and the group
admin API. aiokafka has no cooperative rebalance protocol: its sticky assignor revokes every
partition at each rebalance and gives back the same ones, which its members commit on revocation.

Each member runs on an event loop of its own, in a thread of its own. Run as a script
(``python -m compat_tests.test_groups_aiokafka member ...``) this module is a group member in a
process of its own, for the scenarios that kill one.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.errors import CommitFailedError, KafkaError
from aiokafka.protocol.admin import DeleteGroupsRequest
from aiokafka.structs import OffsetAndMetadata

from compat_tests import group_support as scenario
from compat_tests.group_support import (
    AT_LEAST_ONCE,
    AT_MOST_ONCE,
    GROUP_BROKER_OVERRIDES,
    GROUP_TIMEOUT_S,
    HEARTBEAT_INTERVAL_MS,
    PARTITIONS,
    RANGE,
    ROUND_ROBIN,
    SESSION_TIMEOUT_MS,
    STICKY,
    Board,
    Got,
    Processor,
    ThreadMember,
    emit,
    emit_committed,
    next_offsets,
    parse_member_arguments,
    payload,
    stop_all,
)
from compat_tests.support import index_of, now_ms
from kafkalike.testing import BrokerProcess

T = TypeVar("T")
ASSIGNORS: dict[str, type[AbstractPartitionAssignor]] = {
    RANGE: RangePartitionAssignor,
    ROUND_ROBIN: RoundRobinPartitionAssignor,
    STICKY: StickyPartitionAssignor,
}
NON_EMPTY_GROUP = 68


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coroutine, 2 * GROUP_TIMEOUT_S))


@asynccontextmanager
async def admin(bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


def assignor(strategy: str) -> type[AbstractPartitionAssignor]:
    """aiokafka's sticky assignor keeps the member's last assignment, what makes it sticky, in
    class attributes: each consumer in a process needs a class of its own."""
    if strategy == STICKY:
        return type("OwnStickyPartitionAssignor", (StickyPartitionAssignor,), {})
    return ASSIGNORS[strategy]


def new_consumer(
    bootstrap: str, group: str, strategy: str = RANGE, session_timeout_ms: int = SESSION_TIMEOUT_MS, **config: Any
) -> AIOKafkaConsumer:
    """Not started; must be made with the loop that will run it running."""
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        partition_assignment_strategy=(assignor(strategy),),
        **config,
    )


class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Passes the rebalance callbacks to ``report``; ``on_revoke`` is awaited first on a revocation."""

    def __init__(
        self,
        report: Callable[[str, list[int]], None] = lambda kind, partitions: None,
        on_revoke: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self.report = report
        self.on_revoke = on_revoke

    async def on_partitions_revoked(self, revoked: Any) -> None:
        if self.on_revoke is not None:
            await self.on_revoke()
        self.report("revoked", [tp.partition for tp in revoked])

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.report("assigned", [tp.partition for tp in assigned])


async def poll(client: AIOKafkaConsumer, max_records: int | None = None) -> list[Got]:
    batches = await client.getmany(timeout_ms=200, max_records=max_records)
    return [Got(r.partition, r.offset, r.value or b"") for records in batches.values() for r in records]


async def consume_until(client: AIOKafkaConsumer, count: int) -> list[Got]:
    got: list[Got] = []
    deadline = time.monotonic() + GROUP_TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        got += await poll(client)
    return got


async def commit_read(client: AIOKafkaConsumer) -> None:
    """Commit what was read; a commit cut short by a rebalance or by the broker going away is no
    error here (those messages are read again)."""
    if not client.assignment():
        return
    try:
        await client.commit()
    except CommitFailedError:
        pass
    except KafkaError as exc:
        if not exc.retriable:
            raise


async def committed_offsets(bootstrap: str, group: str) -> dict[int, int]:
    async with admin(bootstrap) as client:
        offsets = await client.list_consumer_group_offsets(group)
    return {tp.partition: o.offset for tp, o in offsets.items()}


async def describe(bootstrap: str, group: str) -> Any:
    async with admin(bootstrap) as client:
        (response,) = await client.describe_consumer_groups([group])
    (description,) = response.groups
    return description


async def delete_group(client: AIOKafkaAdminClient, group: str) -> int:
    """aiokafka's admin client has no call for DeleteGroups: send the request it has."""
    response = await client._send_request(DeleteGroupsRequest([group]), await client.find_coordinator(group))
    ((deleted, error),) = response.results
    assert deleted == group
    return int(error)


class AioKafka:
    module = "compat_tests.test_groups_aiokafka"

    def create_topic(self, bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
        async def create() -> None:
            async with admin(bootstrap) as client:
                response = await client.create_topics([NewTopic(topic, partitions, 1)])
            assert [error for _, error, _ in response.topic_errors] == [0]

        run(create())

    def produce(
        self, bootstrap: str, topic: str, indexes: range, partitions: int = PARTITIONS, base_ms: int | None = None
    ) -> None:
        """With ``base_ms``, message ``i`` is stamped base + 10 i."""

        async def send() -> None:
            client = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
            await client.start()
            try:
                futures = [
                    await client.send(
                        topic,
                        payload(i),
                        partition=i % partitions,
                        timestamp_ms=None if base_ms is None else base_ms + 10 * i,
                    )
                    for i in indexes
                ]
                await asyncio.gather(*futures)
            finally:
                await client.stop()

        run(send())

    def start_member(
        self,
        board: Board,
        name: str,
        bootstrap: str,
        topic: str,
        group: str,
        strategy: str = RANGE,
        commit: bool = False,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
    ) -> ThreadMember:
        """The client is made and started here; then the member's thread runs its loop."""
        member = ThreadMember(name, board)
        loop = asyncio.new_event_loop()

        async def start() -> AIOKafkaConsumer:
            client = new_consumer(bootstrap, group, strategy, client_id=name, session_timeout_ms=session_timeout_ms)
            await client.start()

            async def on_revoke() -> None:
                if commit:
                    await commit_read(client)

            listener = Listener(lambda kind, partitions: member.report(callback=(kind, partitions)), on_revoke)
            client.subscribe([topic], listener=listener)
            return client

        client = loop.run_until_complete(start())

        async def read() -> list[Got]:
            records = await poll(client)
            if records and commit:
                await commit_read(client)
            return records

        def close() -> None:
            try:
                loop.run_until_complete(client.stop())
            finally:
                loop.close()

        return member.start(
            lambda: loop.run_until_complete(read()), lambda: [tp.partition for tp in client.assignment()], close
        )

    def committed(self, bootstrap: str, group: str) -> dict[int, int]:
        return run(committed_offsets(bootstrap, group))

    def describe(self, bootstrap: str, group: str) -> tuple[str, int]:
        description = run(describe(bootstrap, group))
        return description[2], len(description[5])


CLIENT = AioKafka()


def test_members_share_the_partitions_and_every_group_reads_everything(
    kafka_bootstrap: str, kafka_topic_name: str
) -> None:
    scenario.share_partitions(CLIENT, kafka_bootstrap, kafka_topic_name)


def test_a_killed_member_loses_its_partitions_and_the_others_keep_theirs(
    kafka_bootstrap: str, kafka_topic_name: str
) -> None:
    scenario.killed_member(CLIENT, kafka_bootstrap, kafka_topic_name, STICKY, cooperative=False)


def test_at_least_once_loses_nothing_when_killed_mid_batch(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    scenario.at_least_once(CLIENT, kafka_bootstrap, kafka_topic_name)


def test_at_most_once_processes_nothing_twice_when_killed_mid_batch(
    kafka_bootstrap: str, kafka_topic_name: str
) -> None:
    scenario.at_most_once(CLIENT, kafka_bootstrap, kafka_topic_name)


def test_groups_rejoin_and_continue_after_a_broker_restart(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    scenario.broker_restart(CLIENT, kafka_broker_process(*GROUP_BROKER_OVERRIDES), kafka_topic_name)


# -- replay --------------------------------------------------------------------------------------


def test_replay_by_seek_and_by_resetting_the_group_offsets(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    bootstrap, group = kafka_bootstrap, f"{kafka_topic_name}-group"
    CLIENT.create_topic(bootstrap, kafka_topic_name, 2)
    base_ms = now_ms() - 3_600_000
    CLIENT.produce(bootstrap, kafka_topic_name, range(40), 2, base_ms)  # partition i % 2, offset i // 2, at base + 10 i
    p0, p1 = TopicPartition(kafka_topic_name, 0), TopicPartition(kafka_topic_name, 1)

    async def replay() -> None:
        client = new_consumer(bootstrap, group)
        await client.start()
        client.subscribe([kafka_topic_name])
        try:
            first = await consume_until(client, 40)
            assert sorted(index_of(g.value) for g in first) == list(range(40))

            await client.seek_to_beginning()
            again = await consume_until(client, 40)
            assert sorted(index_of(g.value) for g in again) == list(range(40))

            client.seek(p0, 15)
            assert [g.offset for g in await consume_until(client, 5)] == list(range(15, 20))

            found = (await client.offsets_for_times({p1: base_ms + 10 * 25}))[p1]
            assert found is not None and found.offset == 12  # message 25: partition 1, offset 12
            client.seek(p1, found.offset)
            replayed = await consume_until(client, 8)
            assert [index_of(g.value) for g in replayed] == list(range(25, 40, 2))

            await client.commit({p0: 20, p1: 20})
            assert (await client.committed(p0), await client.committed(p1)) == (20, 20)
        finally:
            await client.stop()  # leaves the group: it is empty now

        # aiokafka's admin client cannot alter a group's offsets; a consumer of the group that
        # does not join it (partitions assigned by hand) commits them, as Kafka's admin does.
        resetter = new_consumer(bootstrap, group)
        await resetter.start()
        try:
            resetter.assign([p0, p1])
            await resetter.commit({p0: OffsetAndMetadata(4, ""), p1: OffsetAndMetadata(17, "")})
        finally:
            await resetter.stop()
        assert await committed_offsets(bootstrap, group) == {0: 4, 1: 17}
        assert (await describe(bootstrap, group))[2] == "Empty"

        client = new_consumer(bootstrap, group)
        await client.start()
        client.subscribe([kafka_topic_name])
        try:
            resumed = await consume_until(client, 19)
        finally:
            await client.stop()
        assert sorted((g.partition, g.offset) for g in resumed) == [(0, o) for o in range(4, 20)] + [
            (1, o) for o in range(17, 20)
        ]

    run(replay())


# -- admin ---------------------------------------------------------------------------------------


def test_admin_lists_describes_and_deletes_groups(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    bootstrap, group = kafka_bootstrap, f"{kafka_topic_name}-group"
    CLIENT.create_topic(bootstrap, kafka_topic_name)
    board = Board()
    try:
        pair = [
            CLIENT.start_member(board, f"{kafka_topic_name}-m{i}", bootstrap, kafka_topic_name, group, commit=True)
            for i in range(2)
        ]
        board.split(pair)
        CLIENT.produce(bootstrap, kafka_topic_name, range(30))
        board.read(pair, range(30))

        async def while_active() -> None:
            async with admin(bootstrap) as client:
                assert (group, "consumer") in await client.list_consumer_groups()
                error, group_id, state, protocol_type, protocol, members = await describe(bootstrap, group)
                assert (error, group_id, state, protocol_type, protocol) == (0, group, "Stable", "consumer", "range")
                by_client = {m[1]: m for m in members}
                assert sorted(by_client) == sorted(m.name for m in pair)
                for member in pair:
                    _, _, host, metadata, assignment = by_client[member.name]
                    assert host.endswith("127.0.0.1")
                    assert ConsumerProtocolMemberMetadata.decode(metadata).subscription == [kafka_topic_name]
                    partitions = ConsumerProtocolMemberAssignment.decode(assignment).partitions()
                    assert sorted(partitions) == [TopicPartition(kafka_topic_name, p) for p in sorted(member.owned)]
                assert await committed_offsets(bootstrap, group) == dict.fromkeys(range(PARTITIONS), 5)
                assert await delete_group(client, group) == NON_EMPTY_GROUP

        run(while_active())
    finally:
        stop_all(board)  # stop() sends LeaveGroup

    async def once_empty() -> None:
        async with admin(bootstrap) as client:
            assert tuple(await describe(bootstrap, group)) == (0, group, "Empty", "consumer", "", [])
            assert await delete_group(client, group) == 0
            assert group not in {g for g, _ in await client.list_consumer_groups()}
            assert await committed_offsets(bootstrap, group) == {}

    run(once_empty())


# -- the member process --------------------------------------------------------------------------


async def member(argv: Sequence[str]) -> None:
    args = parse_member_arguments(argv)
    client = new_consumer(args.bootstrap, args.group, args.strategy)
    await client.start()
    client.subscribe([args.topic], listener=Listener(lambda kind, partitions: emit(kind, partitions=partitions)))
    processor = Processor(args.hang_after)
    positions: dict[int, int] = {}
    owned: list[int] | None = None

    async def commit() -> None:
        await client.commit({TopicPartition(args.topic, p): o for p, o in positions.items()})
        emit_committed(positions)

    while True:
        batch = await poll(client, args.batch)
        now_owned = sorted(tp.partition for tp in client.assignment())
        if now_owned != owned:
            owned = now_owned
            emit("owned", partitions=owned)
        if not batch:
            continue
        positions.update(next_offsets((g.partition, g.offset) for g in batch))
        if args.mode == AT_MOST_ONCE:
            await commit()
        for record in batch:
            processor.process(record.partition, record.offset, record.value)  # blocks the loop when it hangs
        if args.mode == AT_LEAST_ONCE:
            await commit()


if __name__ == "__main__":
    if sys.argv[1:2] != ["member"]:
        raise SystemExit("usage: python -m compat_tests.test_groups_aiokafka member ARGS")
    asyncio.run(member(sys.argv[2:]))
