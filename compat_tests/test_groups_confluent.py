"""confluent-kafka (librdkafka) consumer groups.

The scenarios of ``group_support`` (partitions shared in a group and read by every group, a
member killed with SIGKILL under the cooperative-sticky protocol, at-least-once and
at-most-once, a broker restart under active groups), replay by seek and by resetting a group's
offsets, and the group admin API.

Run as a script (``python -m compat_tests.test_groups_confluent member ...``) this module is a
group member in a process of its own, for the scenarios that kill one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from compat_tests import group_support as scenario
from compat_tests.group_support import (
    AT_LEAST_ONCE,
    AT_MOST_ONCE,
    COOPERATIVE_STICKY,
    GROUP_BROKER_OVERRIDES,
    GROUP_TIMEOUT_S,
    HEARTBEAT_INTERVAL_MS,
    PARTITIONS,
    RANGE,
    SESSION_TIMEOUT_MS,
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
from compat_tests.support import consume_until, index_of, now_ms
from kafkalike.testing import BrokerProcess

TIMEOUT_S = 30
STATES = {ConsumerGroupState.STABLE: "Stable", ConsumerGroupState.EMPTY: "Empty"}


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def consumer_config(bootstrap: str, group: str, strategy: str = RANGE, **config: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        "partition.assignment.strategy": strategy,  # librdkafka uses Kafka's names
        "reconnect.backoff.max.ms": 500,
        **config,
    }


def subscribe(
    client: RdConsumer,
    topic: str,
    report: Callable[[str, list[int]], None] = lambda kind, partitions: None,
    on_revoke: Callable[[], None] = lambda: None,
) -> None:
    """Subscribe, passing the rebalance callbacks to ``report``; librdkafka then applies the
    assignment itself, eagerly or incrementally as the protocol says."""

    def callback(kind: str) -> Callable[[RdConsumer, list[TopicPartition]], None]:
        def record(_: RdConsumer, partitions: list[TopicPartition]) -> None:
            if kind == "revoked":
                on_revoke()
            report(kind, [tp.partition for tp in partitions])

        return record

    client.subscribe([topic], on_assign=callback("assigned"), on_revoke=callback("revoked"), on_lost=callback("lost"))


def got(message: Message) -> Got:
    error = message.error()
    if error is not None:
        raise KafkaException(error)
    partition, offset, value = message.partition(), message.offset(), message.value()
    assert partition is not None and offset is not None and value is not None
    return Got(partition, offset, value)


def poll(client: RdConsumer, count: int = 100) -> list[Got]:
    return [got(m) for m in client.consume(num_messages=count, timeout=0.2)]


def commit_read(client: RdConsumer) -> None:
    """Commit what was read, synchronously; a commit cut short by a rebalance, by the broker
    going away or by the client's own close (the revoke callback runs inside ``close``) is no
    error here (those messages are read again)."""
    try:
        client.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].fatal() or exc.args[0].code() not in (
            KafkaError._NO_OFFSET,
            KafkaError.REBALANCE_IN_PROGRESS,
            KafkaError.ILLEGAL_GENERATION,
            KafkaError.UNKNOWN_MEMBER_ID,
            KafkaError._TRANSPORT,
            KafkaError.COORDINATOR_NOT_AVAILABLE,
            KafkaError.NOT_COORDINATOR,
            KafkaError._DESTROY,
        ):
            raise


class Confluent:
    module = "compat_tests.test_groups_confluent"

    def create_topic(self, bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
        client = admin(bootstrap)  # kept alive until the result is in: destroying it fails the futures
        client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT_S)

    def produce(
        self, bootstrap: str, topic: str, indexes: range, partitions: int = PARTITIONS, base_ms: int = 0
    ) -> None:
        """With ``base_ms``, message ``i`` is stamped base + 10 i."""
        client = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        for i in indexes:
            client.produce(topic, payload(i), partition=i % partitions, timestamp=base_ms + 10 * i if base_ms else 0)
        assert client.flush(TIMEOUT_S) == 0

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
        member = ThreadMember(name, board)
        client = RdConsumer(
            consumer_config(bootstrap, group, strategy, **{"client.id": name, "session.timeout.ms": session_timeout_ms})
        )

        def on_revoke() -> None:
            if commit:
                commit_read(client)

        subscribe(client, topic, lambda kind, partitions: member.report(callback=(kind, partitions)), on_revoke)

        def read() -> list[Got]:
            records = poll(client)
            if records and commit:
                commit_read(client)
            return records

        return member.start(read, lambda: [tp.partition for tp in client.assignment()], client.close)

    def committed(self, bootstrap: str, group: str) -> dict[int, int]:
        client = admin(bootstrap)
        listed = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(TIMEOUT_S)
        return {tp.partition: tp.offset for tp in listed.topic_partitions}

    def describe(self, bootstrap: str, group: str) -> tuple[str, int]:
        client = admin(bootstrap)
        description = client.describe_consumer_groups([group])[group].result(TIMEOUT_S)
        return STATES.get(description.state, str(description.state)), len(description.members)


CLIENT = Confluent()


def test_members_share_the_partitions_and_every_group_reads_everything(
    kafka_bootstrap: str, kafka_topic_name: str
) -> None:
    scenario.share_partitions(CLIENT, kafka_bootstrap, kafka_topic_name)


def test_a_killed_member_loses_its_partitions_without_revoking_the_others(
    kafka_bootstrap: str, kafka_topic_name: str
) -> None:
    scenario.killed_member(CLIENT, kafka_bootstrap, kafka_topic_name, COOPERATIVE_STICKY, cooperative=True)


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
    client = RdConsumer(consumer_config(bootstrap, group))
    subscribe(client, kafka_topic_name)
    try:
        first = consume_until(lambda: poll(client), 40, GROUP_TIMEOUT_S)
        assert sorted(index_of(g.value) for g in first) == list(range(40))
        p0, p1 = TopicPartition(kafka_topic_name, 0), TopicPartition(kafka_topic_name, 1)

        for partition in (0, 1):
            client.seek(TopicPartition(kafka_topic_name, partition, OFFSET_BEGINNING))
        again = consume_until(lambda: poll(client), 40, GROUP_TIMEOUT_S)
        assert sorted(index_of(g.value) for g in again) == list(range(40))

        client.seek(TopicPartition(kafka_topic_name, 0, 15))
        assert [g.offset for g in consume_until(lambda: poll(client), 5, GROUP_TIMEOUT_S)] == list(range(15, 20))

        (found,) = client.offsets_for_times([TopicPartition(kafka_topic_name, 1, base_ms + 10 * 25)], timeout=TIMEOUT_S)
        assert found.offset == 12  # message 25: partition 1, offset 12
        client.seek(found)
        replayed = consume_until(lambda: poll(client), 8, GROUP_TIMEOUT_S)
        assert [index_of(g.value) for g in replayed] == list(range(25, 40, 2))

        client.commit(
            offsets=[TopicPartition(kafka_topic_name, 0, 20), TopicPartition(kafka_topic_name, 1, 20)],
            asynchronous=False,
        )
        assert [tp.offset for tp in client.committed([p0, p1], timeout=TIMEOUT_S)] == [20, 20]
    finally:
        client.close()  # leaves the group: it is empty now

    admin_client = admin(bootstrap)
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(kafka_topic_name, 0, 4), TopicPartition(kafka_topic_name, 1, 17)]
    )
    result = admin_client.alter_consumer_group_offsets([request])[group].result(TIMEOUT_S)
    assert [(tp.partition, tp.offset, tp.error) for tp in result.topic_partitions] == [(0, 4, None), (1, 17, None)]
    listed = admin_client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(TIMEOUT_S)
    assert sorted((tp.partition, tp.offset) for tp in listed.topic_partitions) == [(0, 4), (1, 17)]

    client = RdConsumer(consumer_config(bootstrap, group))
    subscribe(client, kafka_topic_name)
    try:
        resumed = consume_until(lambda: poll(client), 19, GROUP_TIMEOUT_S)
    finally:
        client.close()
    assert sorted((g.partition, g.offset) for g in resumed) == [(0, o) for o in range(4, 20)] + [
        (1, o) for o in range(17, 20)
    ]


# -- admin ---------------------------------------------------------------------------------------


def test_admin_lists_describes_and_deletes_groups(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    bootstrap, group = kafka_bootstrap, f"{kafka_topic_name}-group"
    CLIENT.create_topic(bootstrap, kafka_topic_name)
    admin_client = admin(bootstrap)
    board = Board()
    try:
        pair = [
            CLIENT.start_member(board, f"{kafka_topic_name}-m{i}", bootstrap, kafka_topic_name, group, commit=True)
            for i in range(2)
        ]
        board.split(pair)
        CLIENT.produce(bootstrap, kafka_topic_name, range(30))
        board.read(pair, range(30))

        listed = admin_client.list_consumer_groups().result(TIMEOUT_S)
        assert not listed.errors
        ours = [g for g in listed.valid if g.group_id == group]
        assert len(ours) == 1 and ours[0].state == ConsumerGroupState.STABLE
        assert not ours[0].is_simple_consumer_group

        description = admin_client.describe_consumer_groups([group])[group].result(TIMEOUT_S)
        assert description.state == ConsumerGroupState.STABLE
        assert description.partition_assignor == "range"
        by_client = {m.client_id: m for m in description.members}
        assert sorted(by_client) == sorted(m.name for m in pair)
        for member in pair:
            assignment = by_client[member.name].assignment.topic_partitions
            assert {(tp.topic, tp.partition) for tp in assignment} == {(kafka_topic_name, p) for p in member.owned}

        assert CLIENT.committed(bootstrap, group) == dict.fromkeys(range(PARTITIONS), 5)
        with pytest.raises(KafkaException) as raised:
            admin_client.delete_consumer_groups([group])[group].result(TIMEOUT_S)
        assert raised.value.args[0].code() == KafkaError.NON_EMPTY_GROUP

    finally:
        stop_all(board)  # close() sends LeaveGroup

    description = admin_client.describe_consumer_groups([group])[group].result(TIMEOUT_S)
    assert description.state == ConsumerGroupState.EMPTY and not description.members
    assert admin_client.delete_consumer_groups([group])[group].result(TIMEOUT_S) is None
    listed = admin_client.list_consumer_groups().result(TIMEOUT_S)
    assert group not in {g.group_id for g in listed.valid}
    assert CLIENT.committed(bootstrap, group) == {}


# -- the member process --------------------------------------------------------------------------


def member_main(argv: Sequence[str]) -> int:
    args = parse_member_arguments(argv)
    client = RdConsumer(consumer_config(args.bootstrap, args.group, args.strategy))

    def report(kind: str) -> Callable[[RdConsumer, list[TopicPartition]], None]:
        def callback(_: RdConsumer, partitions: list[TopicPartition]) -> None:
            emit(kind, partitions=[tp.partition for tp in partitions])

        return callback

    client.subscribe([args.topic], on_assign=report("assigned"), on_revoke=report("revoked"), on_lost=report("lost"))
    processor = Processor(args.hang_after)
    positions: dict[int, int] = {}
    owned: list[int] | None = None

    def commit() -> None:
        offsets = [TopicPartition(args.topic, p, o) for p, o in positions.items()]
        client.commit(offsets=offsets, asynchronous=False)
        emit_committed(positions)

    while True:
        batch = [got(m) for m in client.consume(num_messages=args.batch, timeout=0.2)]
        now_owned = sorted(tp.partition for tp in client.assignment())
        if now_owned != owned:
            owned = now_owned
            emit("owned", partitions=owned)
        if not batch:
            continue
        positions.update(next_offsets((g.partition, g.offset) for g in batch))
        if args.mode == AT_MOST_ONCE:
            commit()
        for record in batch:
            processor.process(record.partition, record.offset, record.value)
        if args.mode == AT_LEAST_ONCE:
            commit()


if __name__ == "__main__":
    if sys.argv[1:2] != ["member"]:
        raise SystemExit("usage: python -m compat_tests.test_groups_confluent member ARGS")
    sys.exit(member_main(sys.argv[2:]))
