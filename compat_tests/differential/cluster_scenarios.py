"""Scenarios on a 3-node cluster of real processes, written once against the process-cluster kit's
node API (``kafkalike.testing.process_cluster.ProcessCluster``) so that the same function runs
against ``ApacheKafkaCluster(3)`` and ``KafkalikeCluster(3)``.

Each scenario returns an :class:`Outcome`: ``answers``, plain values that the two products must
agree on (compared by the tests), and ``figures``, measured times that are reported, not compared.
A scenario leaves the cluster as it found it (every node running and listed), so they can share one.
"""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalike.protocol.records import Record, build_batch
from kafkalike.testing.controller_requests import registration
from kafkalike.testing.process_cluster import NodeProcess, ProcessCluster, wait_until
from kafkalike.testing.request_bodies import fetch_by_id_body, list_offsets_body, produce_body
from kafkalike.testing.wire_client import WireClient

Cluster = ProcessCluster[Any]
ZERO_UUID = uuid.UUID(int=0)
NO_LEADER = -1
WAIT_S = 60.0
REQUEST_TIMEOUT_S = 10.0
API_PRODUCE, API_FETCH, API_LIST_OFFSETS, API_METADATA, API_CREATE_TOPICS = 0, 1, 2, 3, 19
API_BROKER_REGISTRATION = 62
NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, TOPIC_ALREADY_EXISTS = 6, 5, 36


@dataclass
class Outcome:
    answers: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionState:
    error_code: int
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


# -- requests ------------------------------------------------------------------------------------


def request(node: NodeProcess, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
    with WireClient(node.address.host, node.address.client_port, timeout_s=REQUEST_TIMEOUT_S) as client:
        return client.request(api_key, version, body)


def topic_metadata(node: NodeProcess, topic: str) -> tuple[uuid.UUID, dict[int, PartitionState]]:
    """Metadata v12 of ``topic`` asked of ``node``: its id and each partition's state (empty when
    the node does not know the topic or does not answer)."""
    body = {"topics": [{"name": topic, "topic_id": ZERO_UUID}], "allow_auto_topic_creation": False}
    try:
        response = request(node, API_METADATA, 12, body)
    except (OSError, ConnectionError):
        return ZERO_UUID, {}
    for t in response.topics:
        if t.name == topic and t.error_code == 0:
            return t.topic_id, {
                p.partition_index: PartitionState(
                    p.error_code,
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.replica_nodes),
                    tuple(p.isr_nodes),
                    tuple(p.offline_replicas),
                )
                for p in t.partitions
            }
    return ZERO_UUID, {}


def create_topic(node: NodeProcess, name: str, partitions: int) -> tuple[int, str | None]:
    """CreateTopics v7 of one RF=1 topic through ``node``: (error code, error message)."""
    body = {
        "topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        ],
        "timeout_ms": 10000,
        "validate_only": False,
    }
    result = request(node, API_CREATE_TOPICS, 7, body).topics[0]
    return int(result.error_code), result.error_message


def leaders(cluster: Cluster, topic: str, partitions: int, via: int) -> dict[int, PartitionState]:
    """Wait until ``via`` lists every partition of ``topic`` with a leader; their states."""

    def all_led() -> dict[int, PartitionState] | None:
        _, states = topic_metadata(cluster.node(via), topic)
        led = len(states) == partitions and all(s.leader_id != NO_LEADER for s in states.values())
        return states if led else None

    return wait_until(all_led, WAIT_S, f"a leader for every partition of {topic} at node {via}")


def led_by(
    cluster: Cluster, topic: str, via: int, leader: int, partitions: list[int]
) -> dict[int, PartitionState] | None:
    """The topic's partition states at ``via`` when ``leader`` leads every one of ``partitions``."""
    _, states = topic_metadata(cluster.node(via), topic)
    return states if all(p in states and states[p].leader_id == leader for p in partitions) else None


def one_record() -> bytes:
    return build_batch([Record(key=b"k", value=b"v")], base_timestamp=1_700_000_000_000)


# -- scenarios -------------------------------------------------------------------------------------


def leaders_spread(cluster: Cluster, topic: str) -> Outcome:
    """A 6-partition RF=1 topic created through the first broker: every broker leads two partitions
    (round-robin placement), every node's Metadata says the same."""
    via = cluster.broker_ids[0]
    code, _ = create_topic(cluster.node(via), topic, 6)
    states = leaders(cluster, topic, 6, via)
    per_broker = collections.Counter(s.leader_id for s in states.values())
    views = {b: {p: s.leader_id for p, s in leaders(cluster, topic, 6, b).items()} for b in cluster.broker_ids}
    return Outcome(
        {
            "create": code,
            "partitions led per broker": sorted(per_broker.values()),
            "brokers leading": len(per_broker),
            "replicas are the leader": all(s.replicas == (s.leader_id,) for s in states.values()),
            "leader epochs": sorted({s.leader_epoch for s in states.values()}),
            "every node agrees": all(view == views[via] for view in views.values()),
        }
    )


def topics_through_any_node(cluster: Cluster, prefix: str) -> Outcome:
    """A topic created through each broker; every broker lists all of them; the same name again
    through another broker is TOPIC_ALREADY_EXISTS with Kafka's message."""
    brokers = cluster.broker_ids
    created = {b: create_topic(cluster.node(b), f"{prefix}-via-{b}", 2)[0] for b in brokers}
    for b in brokers:
        for name in (f"{prefix}-via-{c}" for c in brokers):
            leaders(cluster, name, 2, b)
    again = create_topic(cluster.node(brokers[-1]), f"{prefix}-via-{brokers[0]}", 2)
    return Outcome(
        {
            "created": sorted(created.values()),
            "again": again[0],
            "again message": (again[1] or "").replace(prefix, "PREFIX"),
        }
    )


def not_leader_routing(cluster: Cluster, topic: str) -> Outcome:
    """Produce v11, Fetch v16 and ListOffsets v8 for a partition, sent to a broker that does not lead
    it: NOT_LEADER_OR_FOLLOWER, Produce and Fetch with KIP-951's hint naming the leader, its epoch
    and its endpoint; the same Produce sent to the leader succeeds."""
    via = cluster.broker_ids[0]
    create_topic(cluster.node(via), topic, 3)
    for broker in cluster.broker_ids:  # every broker has the topic in its metadata (it propagates)
        states = leaders(cluster, topic, 3, broker)
    states = leaders(cluster, topic, 3, via)
    topic_id, _ = topic_metadata(cluster.node(via), topic)
    partition, state = next(iter(sorted(states.items())))
    leader = cluster.node(state.leader_id)
    other = cluster.node(next(b for b in cluster.broker_ids if b != state.leader_id))

    def produce(node: NodeProcess) -> Any:
        return request(node, API_PRODUCE, 11, produce_body(topic, partition, one_record(), timeout_ms=10000))

    def hint(current: Any, endpoints: Any) -> dict[str, Any]:
        named = [(e.node_id, e.host, e.port) for e in endpoints]
        return {
            "names the leader": current.leader_id == state.leader_id,
            "leader epoch": current.leader_epoch - state.leader_epoch,
            "endpoint of the leader": named == [(leader.node_id, leader.address.host, leader.address.client_port)],
        }

    wrong = produce(other)
    wrong_partition = wrong.responses[0].partition_responses[0]
    right = produce(leader).responses[0].partition_responses[0]
    fetched = request(other, API_FETCH, 16, fetch_by_id_body(topic_id, partition, min_bytes=0))
    fetched_partition = fetched.responses[0].partitions[0]
    listed = request(other, API_LIST_OFFSETS, 8, list_offsets_body(topic, partition)).topics[0].partitions[0]
    return Outcome(
        {
            "produce to another broker": wrong_partition.error_code,
            "produce hint": hint(wrong_partition.current_leader, wrong.node_endpoints),
            "produce to the leader": (right.error_code, right.base_offset),
            "fetch from another broker": fetched_partition.error_code,
            "fetch hint": hint(fetched_partition.current_leader, fetched.node_endpoints),
            "list offsets at another broker": listed.error_code,
        }
    )


def fenced_broker(cluster: Cluster, topic: str, session_timeout_ms: int) -> Outcome:
    """A broker that is not the active controller SIGSTOPped: still listed at first, then fenced and
    gone from Metadata; its RF=1 partitions without a leader (LEADER_NOT_AVAILABLE, epoch bumped,
    the broker offline); after SIGCONT it is listed and leads them again (epoch bumped again)."""
    controller = cluster.active_controller()
    victim, survivor = _two_others(cluster, controller)
    create_topic(cluster.node(survivor), topic, 6)
    before = leaders(cluster, topic, 6, survivor)
    on_victim = sorted(p for p, s in before.items() if s.leader_id == victim)
    paused = time.monotonic()
    cluster.node(victim).pause()
    try:
        listed_at_once = victim in cluster.metadata_brokers(via=survivor)
        wait_until(
            lambda: victim not in cluster.metadata_brokers(via=survivor), 4 * session_timeout_ms / 1000, "fencing"
        )
        fenced_s = time.monotonic() - paused
        brokers_after = cluster.metadata_brokers(via=survivor)
        _, fenced_states = topic_metadata(cluster.node(survivor), topic)
    finally:
        cluster.node(victim).resume()
    resumed = time.monotonic()
    cluster.wait_for(
        lambda: cluster.metadata_brokers(via=survivor) == set(cluster.broker_ids), "the broker back", WAIT_S
    )
    back_s = time.monotonic() - resumed

    again = wait_until(lambda: led_by(cluster, topic, survivor, victim, on_victim), WAIT_S, "it leading again")
    releads_s = time.monotonic() - resumed
    fenced_partitions = {
        (
            fenced_states[p].error_code,
            fenced_states[p].leader_id,
            fenced_states[p].leader_epoch - before[p].leader_epoch,
            fenced_states[p].replicas == (victim,),
            fenced_states[p].offline == (victim,),
        )
        for p in on_victim
    }
    return Outcome(
        {
            "victim leads partitions": bool(on_victim),
            "listed right after the pause": listed_at_once,
            "fenced within the session timeout and a heartbeat": fenced_s < (session_timeout_ms + 2000) / 1000,
            "the others listed while it is fenced": brokers_after == set(cluster.broker_ids) - {victim},
            "its partitions while fenced (error, leader, epoch bump, replicas=[it], offline=[it])": sorted(
                fenced_partitions
            ),
            "its partitions' isr while fenced": sorted({_named(fenced_states[p].isr, victim) for p in on_victim}),
            "others' partitions untouched": all(fenced_states[p] == before[p] for p in before if p not in on_victim),
            "epoch bump after it is back": sorted({again[p].leader_epoch - before[p].leader_epoch for p in on_victim}),
        },
        {"fenced_s": fenced_s, "listed_again_s": back_s, "leads_again_s": releads_s},
    )


def _named(ids: tuple[int, ...], victim: int) -> tuple[str, ...]:
    """Node ids as the role they play in the scenario (the victim, or another node)."""
    return tuple("victim" if i == victim else "other" for i in ids)


def _two_others(cluster: Cluster, controller: int) -> tuple[int, int]:
    others = [b for b in cluster.broker_ids if b != controller]
    return others[0], others[1]


def controller_failover(cluster: Cluster, topic: str) -> Outcome:
    """The active controller SIGKILLed: another node becomes the active controller, CreateTopics
    through a survivor succeeds, and the killed node restarted rejoins Metadata."""
    controller = cluster.active_controller()
    survivor = next(b for b in cluster.broker_ids if b != controller)
    killed = time.monotonic()
    cluster.node(controller).kill()
    successor = cluster.active_controller(timeout_s=WAIT_S, exclude={controller})
    elected_s = time.monotonic() - killed
    errors: list[str] = []

    def created() -> bool:
        try:
            code, _ = create_topic(cluster.node(survivor), topic, 1)
        except (OSError, ConnectionError) as exc:
            errors.append(type(exc).__name__)
            return False
        errors.append(str(code))
        return code == 0

    wait_until(created, WAIT_S, "CreateTopics after failover")
    created_s = time.monotonic() - killed
    cluster.node(controller).start()
    cluster.wait_for(lambda: cluster.metadata_brokers(via=survivor) == set(cluster.broker_ids), "the node back", WAIT_S)
    return Outcome(
        {"another node leads": successor != controller, "create after failover": errors[-1]},
        {"new_leader_s": elected_s, "create_ok_s": created_s},
    )


def killed_broker_restarted(cluster: Cluster, topic: str, session_timeout_ms: int) -> Outcome:
    """A broker that is not the active controller SIGKILLed: fenced once its session times out, its
    RF=1 partitions without a leader; started again on its ports and data, it registers anew and
    leads them again (leader epoch bumped at each change)."""
    controller = cluster.active_controller()
    victim, survivor = _two_others(cluster, controller)
    create_topic(cluster.node(survivor), topic, 6)
    before = leaders(cluster, topic, 6, survivor)
    on_victim = sorted(p for p, s in before.items() if s.leader_id == victim)
    killed = time.monotonic()
    cluster.node(victim).kill()
    wait_until(lambda: victim not in cluster.metadata_brokers(via=survivor), 4 * session_timeout_ms / 1000, "fencing")
    fenced_s = time.monotonic() - killed
    _, fenced_states = topic_metadata(cluster.node(survivor), topic)
    restarted = time.monotonic()
    cluster.node(victim).start()
    cluster.wait_for(
        lambda: cluster.metadata_brokers(via=survivor) == set(cluster.broker_ids), "the broker back", WAIT_S
    )

    try:
        again: dict[int, PartitionState] | None = wait_until(
            lambda: led_by(cluster, topic, survivor, victim, on_victim), WAIT_S / 2, "it leading again"
        )
    except RuntimeError:
        again = None
    leads_again_s = time.monotonic() - restarted
    return Outcome(
        {
            "victim leads partitions": bool(on_victim),
            "its partitions while fenced (error, leader)": sorted(
                {(fenced_states[p].error_code, fenced_states[p].leader_id) for p in on_victim}
            ),
            "leads them again after its restart": again is not None,
            "epoch bump after it is back": sorted(
                {again[p].leader_epoch - before[p].leader_epoch for p in on_victim} if again else set()
            ),
        },
        {"fenced_s": fenced_s, "leads_again_s": leads_again_s},
    )


def registration_within_a_session(cluster: Cluster) -> Outcome:
    """What a broker restarted within its old session meets (a new incarnation id, its old
    registration's session still valid): a BrokerRegistration for a running broker's id with
    another incarnation id, sent to the active controller, is DUPLICATE_BROKER_REGISTRATION, and
    the running broker stays registered and listed."""
    controller = cluster.active_controller()
    victim = next(b for b in cluster.broker_ids if b != controller)
    address = cluster.node(controller).address
    body = registration(
        victim, cluster.cluster_id, port=cluster.node(victim).address.client_port, incarnation=uuid.uuid4()
    )
    with WireClient(address.host, address.controller_port, timeout_s=REQUEST_TIMEOUT_S) as client:
        answer = client.request(API_BROKER_REGISTRATION, 4, body)
    listed = victim in cluster.metadata_brokers(via=controller)
    return Outcome(
        {
            "error": int(answer.error_code),
            "broker epoch": int(answer.broker_epoch),
            "the running broker still listed": listed,
        }
    )
