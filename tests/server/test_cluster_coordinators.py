"""Coordinators across three combined nodes, with real clients: a transactional producer
(librdkafka) writing to partitions led by all three brokers, whose coordinator writes the
markers of the others' partitions through WriteTxnMarkers (read_committed consumers see exactly
the committed records); a consumer group (kafka-python) whose coordinator is on another broker
than the partition it reads; producer ids from every broker disjoint (blocks from the
controller)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkalike.cli.storage_format import meta_properties_text
from kafkalike.coordinator import NotActive
from kafkalike.protocol.records import Record, build_batch
from kafkalike.server.config import BrokerConfig
from kafkalike.server.node import Node
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import init_producer_id
from tests.server.node.test_node_roles import CLUSTER, Nodes, _start_in_background
from tests.server.test_broker_basics import _fetch_body
from tests.server.test_cluster_nodes import start_combined_nodes

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

DEADLINE_S = 120
ZERO = uuid.UUID(int=0)
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
INTERNAL = {"transaction.state.log.num.partitions": "6", "offsets.topic.num.partitions": "6"}


class CoordinatorNodes(Nodes):
    def config(self, node_id: int, roles: str) -> BrokerConfig:
        return BrokerConfig({**super().config(node_id, roles).explicit, **INTERNAL})


class Running:
    """Three combined nodes, started, with a wire client to each."""

    def __init__(self, nodes: CoordinatorNodes, clients: dict[int, AsyncWireClient]) -> None:
        self.nodes = nodes
        self.clients = clients

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port(i)}" for i in self.nodes.voter_ids)

    def port(self, node_id: int) -> int:
        address = self.nodes.nodes[node_id].client_address
        assert address is not None
        return address[1]

    async def create_topic(self, name: str, partitions: int) -> dict[int, int]:
        """The topic, made through broker 1; its leaders by partition once every broker has it."""
        topic = {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        created = await self.clients[1].request(19, 7, {"topics": [topic], "timeout_ms": 10000})
        assert created.topics[0].error_code == 0, created
        for node in self.nodes.nodes.values():
            assert node.broker is not None
            await node.broker.publisher.wait_until(lambda i: i.topic(name) is not None)
        answer = await self.clients[1].request(3, 12, {"topics": [{"name": name, "topic_id": ZERO}]})
        return {p.partition_index: p.leader_id for p in answer.topics[0].partitions}

    async def wait_for_topic(self, name: str) -> None:
        for node in self.nodes.nodes.values():
            assert node.broker is not None
            assert await node.broker.publisher.wait_until(lambda i: i.topic(name) is not None)

    async def coordinator(self, key: str, key_type: int) -> tuple[int, int]:
        """(error, node id) of FindCoordinator v3 asked of broker 1; asked again once broker 1
        has made the internal topic that its first answer (COORDINATOR_NOT_AVAILABLE) asked for."""
        answer = await self.clients[1].request(10, 3, {"key": key, "key_type": key_type})
        broker = self.nodes.nodes[1].broker
        if answer.error_code == COORDINATOR_NOT_AVAILABLE and broker is not None:
            await broker.wait_internal_topics()
            answer = await self.clients[1].request(10, 3, {"key": key, "key_type": key_type})
        return answer.error_code, answer.node_id


async def _run(tmp_path: Path, scenario: Callable[[Running], Any]) -> None:
    nodes = CoordinatorNodes(tmp_path, 3)
    await nodes.bind()
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            clients = await start_combined_nodes(nursery, nodes)
            try:
                await scenario(Running(nodes, clients))
            finally:
                for client in clients.values():
                    await client.aclose()
                await nodes.stop_in_turn()
                nursery.cancel_scope.cancel()


def _transactions(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, bytes]]:
    """Three transactions over every partition: committed, aborted, committed. What a
    read_committed reader must see: (partition, value) of the committed ones."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "spread-txn", "linger.ms": 0}
    )
    producer.init_transactions(30)
    committed = []
    for round_, commit in enumerate([True, False, True]):
        producer.begin_transaction()
        for partition in range(partitions):
            value = f"{round_}-{partition}".encode()
            producer.produce(topic, value=value, partition=partition)
            if commit:
                committed.append((partition, value))
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    return committed


def _read(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int) -> list[tuple[int, bytes]]:
    """Every record up to the end of each partition (``expected`` of them at least)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        seen: list[tuple[int, bytes]] = []
        for _ in range(200):  # bounded: each poll waits at most 0.5 s
            if len(seen) >= expected:
                break
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            seen.append((message.partition(), message.value()))
        # Anything more would be a record that should not be there: one more short look.
        extra = consumer.poll(1.0)
        if extra is not None and not extra.error():
            seen.append((extra.partition(), extra.value()))
        return seen
    finally:
        consumer.close()


async def test_a_transaction_over_partitions_of_three_brokers_commits_and_aborts(tmp_path: Path) -> None:
    async def scenario(cluster: Running) -> None:
        leaders = await cluster.create_topic("spread", 3)
        assert set(leaders.values()) == {1, 2, 3}
        # Asked before __transaction_state exists: made, and the leader of the id's partition named.
        error, coordinator = await cluster.coordinator("spread-txn", 1)
        broker_1 = cluster.nodes.nodes[1].broker
        assert broker_1 is not None
        partition = broker_1.txn.runtime.partition_for("spread-txn")
        state_topic = broker_1.publisher.image.topic("__transaction_state")
        assert state_topic is not None
        assert (error, coordinator) == (0, state_topic.partitions[partition].leader)
        committed = await trio.to_thread.run_sync(_transactions, cluster.bootstrap, "spread", 3)
        # The coordinator wrote the other brokers' markers over the inter-broker listener.
        broker = cluster.nodes.nodes[coordinator].broker
        assert broker is not None and broker.txn.inter_broker is not None
        with trio.fail_after(10):  # the last transaction's markers follow its EndTxn answer
            while broker.txn.inter_broker.sent < 2 * 3:  # 2 other brokers, 3 transactions
                await broker.txn.markers_answered.wait()
        seen = await trio.to_thread.run_sync(_read, cluster.bootstrap, "spread", 3, "read_committed", len(committed))
        assert sorted(seen) == sorted(committed)
        everything = await trio.to_thread.run_sync(_read, cluster.bootstrap, "spread", 3, "read_uncommitted", 9)
        assert len(everything) == 9  # the aborted records are there, and hidden from read_committed

    await _run(tmp_path, scenario)


def _consume_in_group(bootstrap: str, topic: str, group: str, values: list[bytes]) -> list[bytes]:
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    for value in values:
        producer.send(topic, value, partition=0)
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=20000,
    )
    try:
        seen: list[bytes] = []
        for message in consumer:
            seen.append(message.value)
            if len(seen) == len(values):
                break
        consumer.commit()
        return seen
    finally:
        consumer.close()


async def test_a_group_whose_coordinator_is_on_another_broker_consumes_and_commits(tmp_path: Path) -> None:
    async def scenario(cluster: Running) -> None:
        leaders = await cluster.create_topic("single", 1)
        # As Kafka's: the first lookup asks for __consumer_offsets and finds no coordinator yet.
        first = await cluster.clients[1].request(10, 3, {"key": "probe", "key_type": 0})
        assert (first.error_code, first.node_id, first.host, first.port) == (COORDINATOR_NOT_AVAILABLE, -1, "", -1)
        assert (await cluster.coordinator("probe", 0))[0] == 0  # found once the topic is made
        await cluster.wait_for_topic("__consumer_offsets")
        # A group coordinated by another broker than the partition's leader.
        for i in range(100):
            group = f"group-{i}"
            error, coordinator = await cluster.coordinator(group, 0)
            if coordinator != leaders[0]:
                break
        assert error == 0 and coordinator != leaders[0]
        # Every broker names the same coordinator; the others refuse the group NOT_COORDINATOR.
        for client in cluster.clients.values():
            assert (await client.request(10, 3, {"key": group, "key_type": 0})).node_id == coordinator
        other = next(i for i in (1, 2, 3) if i != coordinator)
        refused = await cluster.clients[other].request(9, 7, {"group_id": group, "topics": None})
        assert refused.error_code == 16  # NOT_COORDINATOR
        values = [f"v{i}".encode() for i in range(5)]
        seen = await trio.to_thread.run_sync(_consume_in_group, cluster.bootstrap, "single", group, values)
        assert seen == values
        fetched = await cluster.clients[coordinator].request(9, 7, {"group_id": group, "topics": None})
        (committed,) = [p for t in fetched.topics for p in t.partitions]
        assert (committed.partition_index, committed.committed_offset) == (0, 5)

    await _run(tmp_path, scenario)


async def test_producer_ids_handed_out_by_every_broker_are_disjoint(tmp_path: Path) -> None:
    async def scenario(cluster: Running) -> None:
        await cluster.create_topic("single", 1)
        by_broker = {}
        for node_id in cluster.nodes.voter_ids:
            init = [await init_producer_id(cluster.clients[node_id], _init_body()) for _ in range(5)]
            assert all(r.error_code == 0 for r in init), init
            by_broker[node_id] = [r.producer_id for r in init]
        every = [pid for ids in by_broker.values() for pid in ids]
        assert len(set(every)) == len(every) == 15
        # Each broker draws from blocks of its own: no two brokers' ids share a block of 1000.
        blocks = {node_id: {pid // 1000 for pid in ids} for node_id, ids in by_broker.items()}
        assert not (blocks[1] & blocks[2]) and not (blocks[1] & blocks[3]) and not (blocks[2] & blocks[3])

    await _run(tmp_path, scenario)


def _init_body() -> dict[str, Any]:
    return {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}


def test_internal_topics_are_replicated_up_to_the_registered_brokers(caplog: pytest.LogCaptureFixture) -> None:
    from kafkalike.server.coordinator_runtime import internal_topic_replication

    with caplog.at_level("INFO", logger="kafkalike.coordinator"):
        assert internal_topic_replication(3, "offsets.topic.replication.factor", "__consumer_offsets", 5) == 3
        assert internal_topic_replication(3, "offsets.topic.replication.factor", "__consumer_offsets", 3) == 3
    assert caplog.text == ""  # as configured: nothing to say
    with caplog.at_level("INFO", logger="kafkalike.coordinator"):
        assert internal_topic_replication(3, "offsets.topic.replication.factor", "__consumer_offsets", 2) == 2
    assert "replication factor 2: offsets.topic.replication.factor=3 but 2 broker(s) registered" in caplog.text
    assert internal_topic_replication(3, "offsets.topic.replication.factor", "__consumer_offsets", 0) == 1


class DiskNodes(CoordinatorNodes):
    """Nodes whose partitions are on disk, so a restarted one finds its coordinators' records."""

    ephemeral = False

    def config(self, node_id: int, roles: str) -> BrokerConfig:
        # One replica of each coordinator partition: what a restarted broker loads is its own log's.
        one = {"transaction.state.log.replication.factor": "1", "offsets.topic.replication.factor": "1"}
        return BrokerConfig({**super().config(node_id, roles).explicit, **one})

    async def start(self, nursery: trio.Nursery, node_id: int, roles: str) -> Node:
        directory = Path(self.config(node_id, roles).explicit["log.dirs"])
        if not directory.exists():  # formatted once, as kafka-storage format does
            directory.mkdir(parents=True)
            text = meta_properties_text(CLUSTER, node_id, uuid.uuid4(), datetime.datetime.now(datetime.UTC))
            (directory / "meta.properties").write_text(text, encoding="utf-8")
        return await super().start(nursery, node_id, roles)


def _one_transaction(bootstrap: str, topic: str, partitions: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "kept-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in range(partitions):
        producer.produce(topic, value=f"kept-{partition}".encode(), partition=partition)
    producer.commit_transaction(30)


async def test_the_coordinators_broker_restarted_still_has_the_transactions_outcome(tmp_path: Path) -> None:
    nodes = DiskNodes(tmp_path, 3)
    await nodes.bind()
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            clients = await start_combined_nodes(nursery, nodes)
            cluster = Running(nodes, clients)
            leaders = await cluster.create_topic("kept", 3)
            assert set(leaders.values()) == {1, 2, 3}
            await trio.to_thread.run_sync(_one_transaction, cluster.bootstrap, "kept", 3)
            error, coordinator = await cluster.coordinator("kept-txn", 1)
            assert error == 0
            survivor = next(i for i in nodes.voter_ids if i != coordinator)
            await clients.pop(coordinator).aclose()
            await nodes.nodes[coordinator].stop()
            # One replica: while it is down, its partitions (the id's among them) have no leader.
            assert (await clients[survivor].request(10, 3, {"key": "kept-txn", "key_type": 1})).error_code == 15
            await nursery.start(_start_in_background, nodes, coordinator, "broker,controller")
            again = nodes.nodes[coordinator]
            await nodes.wait(lambda: again.client_address is not None and coordinator in nodes.started)
            assert again.client_address is not None and again.broker is not None
            clients[coordinator] = await AsyncWireClient.connect("127.0.0.1", again.client_address[1])
            # The restarted broker leads the id's partition again and loads the outcome from its log.
            runtime = again.broker.txn.runtime
            with trio.fail_after(30):
                while True:
                    try:
                        runtime.shard_for("kept-txn")
                        break
                    except NotActive:
                        await runtime.loaded.wait()
                # A commit it had not finished when stopped is finished now: its markers sent again.
                while (txn := again.broker.txn.describe(["kept-txn"])[0]).state != "CompleteCommit":
                    assert txn.state == "PrepareCommit", txn
                    await again.broker.txn.markers_answered.wait()
            described = await clients[coordinator].request(65, 0, {"transactional_ids": ["kept-txn"]})
            (state,) = described.transaction_states
            assert (state.error_code, state.transaction_state) == (0, "CompleteCommit")
            seen = await trio.to_thread.run_sync(_read, cluster.bootstrap, "kept", 3, "read_committed", 3)
            assert sorted(seen) == [(p, f"kept-{p}".encode()) for p in range(3)]
            for client in clients.values():
                await client.aclose()
            await nodes.stop_in_turn()
            nursery.cancel_scope.cancel()


async def test_markers_for_a_broker_cut_off_wait_until_it_is_reachable(tmp_path: Path) -> None:
    """The negative control of the inter-broker path: while the coordinator cannot reach a
    partition's leader (NetworkFaults), the commit stays PrepareCommit; healed, it completes."""

    async def scenario(cluster: Running) -> None:
        leaders = await cluster.create_topic("cut", 3)
        c = cluster.clients
        # A marker for a partition another broker leads: NOT_LEADER_OR_FOLLOWER, retried by the coordinator.
        elsewhere = next(b for b in leaders.values() if b != leaders[0])
        marker = {
            "producer_id": 1,
            "producer_epoch": 0,
            "transaction_result": True,
            "topics": [{"name": "cut", "partition_indexes": [0]}],
            "coordinator_epoch": 0,
        }
        wrong = await c[elsewhere].request(27, 1, {"markers": [marker]})
        assert wrong.markers[0].topics[0].partitions[0].error_code == 6
        txn_id = "cut-txn"
        error, coordinator = await cluster.coordinator(txn_id, 1)
        assert error == 0
        # Until every broker has __transaction_state its leaders cannot verify with the coordinator
        # (NOT_ENOUGH_REPLICAS, which a client retries): wait for it here instead.
        await cluster.wait_for_topic("__transaction_state")
        init = await init_producer_id(
            c[coordinator],
            {"transactional_id": txn_id, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
        )
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        added = await c[coordinator].request(
            24,
            3,
            {
                "v3_and_below_transactional_id": txn_id,
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": "cut", "partitions": [0, 1, 2]}],
            },
        )
        assert all(
            p.partition_error_code == 0 for t in added.results_by_topic_v3_and_below for p in t.results_by_partition
        )
        for partition, leader in leaders.items():
            batch = build_batch(
                [Record(value=b"x")],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=0,
                transactional=True,
                base_timestamp=0,
            )
            body = {
                "transactional_id": txn_id,
                "acks": -1,
                "timeout_ms": 5000,
                "topic_data": [{"name": "cut", "partition_data": [{"index": partition, "records": batch}]}],
            }
            produced = await c[leader].request(0, 11, body)
            assert produced.responses[0].partition_responses[0].error_code == 0
        far = next(b for b in leaders.values() if b != coordinator)
        broker = cluster.nodes.nodes[coordinator].broker
        assert broker is not None
        cluster.nodes.faults.isolate(far)
        ended = await c[coordinator].request(
            26, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": True}
        )
        assert ended.error_code == 0
        with trio.fail_after(10):
            for _ in range(3):  # three answers, the cut-off broker's marker failed in each
                await broker.txn.markers_answered.wait()
                assert broker.txn.describe([txn_id])[0].state == "PrepareCommit"
            cluster.nodes.faults.heal()
            while broker.txn.describe([txn_id])[0].state != "CompleteCommit":
                await broker.txn.markers_answered.wait()

    await _run(tmp_path, scenario)


async def _open_transaction(
    cluster: Running, coordinator: int, txn_id: str, topic: str, partition: int, leader: int
) -> tuple[int, int]:
    """InitProducerId, AddPartitionsToTxn and one transactional batch on ``topic``-``partition``."""
    c = cluster.clients
    body = {"transactional_id": txn_id, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    init = await init_producer_id(c[coordinator], body)
    assert init.error_code == 0, init
    added = await c[coordinator].request(
        24,
        3,
        {
            "v3_and_below_transactional_id": txn_id,
            "v3_and_below_producer_id": init.producer_id,
            "v3_and_below_producer_epoch": init.producer_epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [partition]}],
        },
    )
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    batch = build_batch(
        [Record(value=txn_id.encode())],
        producer_id=init.producer_id,
        producer_epoch=init.producer_epoch,
        base_sequence=0,
        transactional=True,
        base_timestamp=0,
    )
    produce = {
        "transactional_id": txn_id,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }
    produced = await c[leader].request(0, 11, produce)
    assert produced.responses[0].partition_responses[0].error_code == 0
    return int(init.producer_id), int(init.producer_epoch)


async def test_markers_of_many_transactions_go_to_a_broker_in_one_request_as_soon_as_it_heals(tmp_path: Path) -> None:
    """Kafka's TransactionMarkerChannelManager: one queue per destination broker, one
    WriteTxnMarkers with everything queued for it. N transactions ended while their partition's
    leader is cut off all wait in its queue (retried at the reconnect backoff, not per marker);
    healed, they go in one request, and every transaction completes."""
    transactions = 8

    async def scenario(cluster: Running) -> None:
        leaders = await cluster.create_topic("batched", 3)
        error, coordinator = await cluster.coordinator("batched-0", 1)  # makes __transaction_state
        assert error == 0
        await cluster.wait_for_topic("__transaction_state")  # so that the leaders can verify with it
        partition, far = next((p, b) for p, b in leaders.items() if b != coordinator)
        ids: list[str] = []
        for n in range(200):  # transactional ids coordinated by the same broker
            if len(ids) == transactions:
                break
            error, node = await cluster.coordinator(f"batched-{n}", 1)
            if error == 0 and node == coordinator:
                ids.append(f"batched-{n}")
        assert len(ids) == transactions
        producers = {t: await _open_transaction(cluster, coordinator, t, "batched", partition, far) for t in ids}
        broker = cluster.nodes.nodes[coordinator].broker
        assert broker is not None
        channel = broker.txn.markers
        cluster.nodes.faults.isolate(far)
        for txn_id, (pid, epoch) in producers.items():
            ended = await cluster.clients[coordinator].request(
                26, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": True}
            )
            assert ended.error_code == 0
        with trio.fail_after(20):  # every transaction's marker waits for the cut-off broker
            while channel.queued(far) < transactions:
                await channel.changed.wait()
        assert channel.stats(far) == (0, 0)  # nothing reached it
        assert all(t.state == "PrepareCommit" for t in broker.txn.describe(ids))
        cluster.nodes.faults.heal()
        healed = trio.current_time()
        with trio.fail_after(20):
            while any(t.state != "CompleteCommit" for t in broker.txn.describe(ids)):
                await broker.txn.markers_answered.wait()
        took_s = trio.current_time() - healed
        requests, markers = channel.stats(far)
        assert markers == transactions and requests < transactions, (requests, markers)
        assert took_s < 5, took_s  # at the next attempt: the reconnect backoff is at most 1 s
        fetched = await cluster.clients[far].request(
            1, 12, {**_fetch_body("batched", partition, 0), "isolation_level": 1}
        )
        answer = fetched.responses[0].partitions[0]
        assert answer.last_stable_offset == answer.high_watermark  # every transaction ended there

    await _run(tmp_path, scenario)
