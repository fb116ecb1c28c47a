"""kafka-python consumer groups.

The scenarios of ``group_support`` (partitions shared in a group and read by every group, a
member killed with SIGKILL under the cooperative-sticky protocol, at-least-once and
at-most-once, a broker restart under active groups), replay by seek and by resetting a group's
offsets, and the group admin API.

Run as a script (``python -m compat_tests.test_groups_kafka_python member ...``) this module is
a group member in a process of its own, for the scenarios that kill one.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from kafka import (
    ConsumerRebalanceListener,
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    OffsetAndMetadata,
    TopicPartition,
)
from kafka.admin import NewTopic, OffsetTimestamp
from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.errors import CommitFailedError, KafkaError, NoError, RebalanceInProgressError
from kafka.net.inet import KafkaNetSocket

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
from compat_tests.support import consume_until, index_of, now_ms
from kafkalike.testing import BrokerProcess

TIMEOUT_S = 30
ASSIGNORS: dict[str, type[AbstractPartitionAssignor]] = {
    RANGE: RangePartitionAssignor,
    ROUND_ROBIN: RoundRobinPartitionAssignor,
    STICKY: StickyPartitionAssignor,
    COOPERATIVE_STICKY: CooperativeStickyAssignor,
}


@contextmanager
def admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        yield client
    finally:
        client.close()


def new_consumer(
    bootstrap: str, group: str, strategy: str = RANGE, session_timeout_ms: int = SESSION_TIMEOUT_MS, **config: Any
) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        partition_assignment_strategy=(ASSIGNORS[strategy],),
        reconnect_backoff_max_ms=500,
        **config,
    )


class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Passes the rebalance callbacks to ``report``. (Blocking consumer calls such as a commit
    are not allowed in kafka-python's listeners: they run on its IO thread.)"""

    def __init__(self, report: Callable[[str, list[int]], None] = lambda kind, partitions: None) -> None:
        self.report = report

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.report("assigned", [tp.partition for tp in assigned])

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.report("revoked", [tp.partition for tp in revoked])

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.report("lost", [tp.partition for tp in lost])


def subscribe(client: KafkaConsumer, topic: str, listener: Listener | None = None) -> None:
    """Subscribe, then make the client fetch metadata before its first poll joins the group.

    kafka-python 3.0.12 compares the metadata its leader assigned from with the metadata it has
    since seen, and rebalances again when they differ. Both are only recorded on a metadata
    update after the subscription: if the first rebalance (immediate here, as the broker has no
    initial rebalance delay) completes before one, the leader assigns from nothing, or records
    nothing, and rebalances again, in which kafka-python sometimes stalls after SyncGroup, its
    heartbeats off, until its session expires."""
    client.subscribe([topic], listener=listener or Listener())
    assert topic in client.topics()  # a metadata update, with the subscription in place


def poll(client: KafkaConsumer, max_records: int | None = None) -> list[Got]:
    batches = client.poll(timeout_ms=200, max_records=max_records)
    return [Got(r.partition, r.offset, r.value) for records in batches.values() for r in records]


def commit_read(client: KafkaConsumer) -> None:
    """Commit what was read, synchronously; a commit cut short by a rebalance or by the broker
    going away is no error here (those messages are read again)."""
    try:
        client.commit()
    except (CommitFailedError, RebalanceInProgressError):
        pass
    except KafkaError as exc:
        if not exc.retriable:
            raise


class KafkaPython:
    module = "compat_tests.test_groups_kafka_python"

    def create_topic(self, bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
        with admin(bootstrap) as client:
            client.create_topics([NewTopic(topic, partitions, 1)])

    def produce(
        self, bootstrap: str, topic: str, indexes: range, partitions: int = PARTITIONS, base_ms: int | None = None
    ) -> None:
        """With ``base_ms``, message ``i`` is stamped base + 10 i."""
        client = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        try:
            futures = [
                client.send(
                    topic,
                    payload(i),
                    partition=i % partitions,
                    timestamp_ms=None if base_ms is None else base_ms + 10 * i,
                )
                for i in indexes
            ]
            client.flush(TIMEOUT_S)
            for future in futures:
                future.get(TIMEOUT_S)
        finally:
            client.close(timeout=TIMEOUT_S)

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
        client = new_consumer(bootstrap, group, strategy, client_id=name, session_timeout_ms=session_timeout_ms)
        # ``commit``: after each batch only (see ``Listener``).
        subscribe(client, topic, Listener(lambda kind, partitions: member.report(callback=(kind, partitions))))

        def read() -> list[Got]:
            try:
                records = poll(client)
            except KafkaError as exc:  # kafka-python's poll raises while it cannot reach the broker
                if not exc.retriable:
                    raise
                return []
            if records and commit:
                commit_read(client)
            return records

        def owned() -> list[int]:
            return [tp.partition for tp in client.assignment()]

        return member.start(read, owned, lambda: client.close(autocommit=False))

    def committed(self, bootstrap: str, group: str) -> dict[int, int]:
        with admin(bootstrap) as client:
            offsets = client.list_group_offsets(group)[group]
        return {tp.partition: o.offset for tp, o in offsets.items()}

    def describe(self, bootstrap: str, group: str) -> tuple[str, int]:
        with admin(bootstrap) as client:
            description = client.describe_groups([group])[group]
        assert description["error"] is None, description
        return description["group_state"], len(description["members"])


CLIENT = KafkaPython()


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


@pytest.fixture
def refused_sockets_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python 3.0.12 does not close a socket whose connect() fails (``KafkaNetSocket``):
    its reconnects while the broker is down would leave unclosed sockets (ResourceWarnings, which
    this suite turns into errors) to the garbage collector. Close them."""
    connect = KafkaNetSocket.sock_connect

    async def sock_connect(self: KafkaNetSocket, net: Any, sock: socket.socket, *args: Any, **kw: Any) -> Any:
        try:
            return await connect(self, net, sock, *args, **kw)
        except BaseException:
            sock.close()
            raise

    monkeypatch.setattr(KafkaNetSocket, "sock_connect", sock_connect)


@pytest.mark.usefixtures("refused_sockets_closed")
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
    client = new_consumer(bootstrap, group)
    subscribe(client, kafka_topic_name)
    try:
        first = consume_until(lambda: poll(client), 40, GROUP_TIMEOUT_S)
        assert sorted(index_of(g.value) for g in first) == list(range(40))

        client.seek_to_beginning()
        again = consume_until(lambda: poll(client), 40, GROUP_TIMEOUT_S)
        assert sorted(index_of(g.value) for g in again) == list(range(40))

        client.seek(p0, 15)
        assert [g.offset for g in consume_until(lambda: poll(client), 5, GROUP_TIMEOUT_S)] == list(range(15, 20))

        found = client.offsets_for_times({p1: base_ms + 10 * 25}, timeout_ms=TIMEOUT_S * 1000)[p1]
        assert found is not None and found.offset == 12  # message 25: partition 1, offset 12
        client.seek(p1, found.offset)
        replayed = consume_until(lambda: poll(client), 8, GROUP_TIMEOUT_S)
        assert [index_of(g.value) for g in replayed] == list(range(25, 40, 2))

        client.commit({p0: OffsetAndMetadata(20, "", -1), p1: OffsetAndMetadata(20, "", -1)})
        assert (client.committed(p0), client.committed(p1)) == (20, 20)
    finally:
        client.close(autocommit=False)  # leaves the group: it is empty now

    with admin(bootstrap) as admin_client:
        assert admin_client.alter_group_offsets(group, {p0: OffsetAndMetadata(4, "", -1)}) == {p0: NoError}
        reset = admin_client.reset_group_offsets(group, {p1: OffsetTimestamp(base_ms + 10 * 35)})
        assert reset == {p1: {"error": NoError, "offset": 17}}  # message 35: partition 1, offset 17
        assert CLIENT.committed(bootstrap, group) == {0: 4, 1: 17}

    client = new_consumer(bootstrap, group)
    subscribe(client, kafka_topic_name)
    try:
        resumed = consume_until(lambda: poll(client), 19, GROUP_TIMEOUT_S)
    finally:
        client.close(autocommit=False)
    assert sorted((g.partition, g.offset) for g in resumed) == [(0, o) for o in range(4, 20)] + [
        (1, o) for o in range(17, 20)
    ]


# -- admin ---------------------------------------------------------------------------------------


def test_admin_lists_describes_and_deletes_groups(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    bootstrap, group = kafka_bootstrap, f"{kafka_topic_name}-group"
    CLIENT.create_topic(bootstrap, kafka_topic_name)
    board = Board()
    with admin(bootstrap) as admin_client:
        try:
            pair = [
                CLIENT.start_member(board, f"{kafka_topic_name}-m{i}", bootstrap, kafka_topic_name, group, commit=True)
                for i in range(2)
            ]
            board.split(pair)
            CLIENT.produce(bootstrap, kafka_topic_name, range(30))
            board.read(pair, range(30))

            ours = [g for g in admin_client.list_groups() if g["group_id"] == group]
            assert ours == [
                {"group_id": group, "protocol_type": "consumer", "group_state": "Stable", "group_type": "classic"}
            ]
            stable = admin_client.describe_groups([group])[group]
            assert (stable["error"], stable["group_state"]) == (None, "Stable")
            assert (stable["protocol_type"], stable["protocol_data"]) == ("consumer", "range")
            by_client = {m["client_id"]: m for m in stable["members"]}
            assert sorted(by_client) == sorted(m.name for m in pair)
            for member in pair:
                assert by_client[member.name]["member_metadata"]["topics"] == [kafka_topic_name]
                assigned = by_client[member.name]["member_assignment"]["assigned_partitions"]
                assert assigned == [{"topic": kafka_topic_name, "partitions": sorted(member.owned)}]

            assert CLIENT.committed(bootstrap, group) == dict.fromkeys(range(PARTITIONS), 5)
            assert admin_client.delete_groups([group]) == {group: "NonEmptyGroupError"}
        finally:
            stop_all(board)  # close() sends LeaveGroup

        empty = admin_client.describe_groups([group])[group]
        assert (empty["error"], empty["group_state"], empty["members"]) == (None, "Empty", [])
        assert admin_client.delete_groups([group]) == {group: "OK"}
        assert group not in {g["group_id"] for g in admin_client.list_groups()}
        assert CLIENT.committed(bootstrap, group) == {}


# -- the member process --------------------------------------------------------------------------


def member_main(argv: Sequence[str]) -> int:
    args = parse_member_arguments(argv)
    client = new_consumer(args.bootstrap, args.group, args.strategy)
    subscribe(client, args.topic, Listener(lambda kind, partitions: emit(kind, partitions=partitions)))
    processor = Processor(args.hang_after)
    positions: dict[int, int] = {}
    owned: list[int] | None = None

    def commit() -> None:
        client.commit({TopicPartition(args.topic, p): OffsetAndMetadata(o, "", -1) for p, o in positions.items()})
        emit_committed(positions)

    while True:
        batch = poll(client, args.batch)
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
        raise SystemExit("usage: python -m compat_tests.test_groups_kafka_python member ARGS")
    sys.exit(member_main(sys.argv[2:]))
