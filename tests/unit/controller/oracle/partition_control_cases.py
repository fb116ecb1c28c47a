"""Random cases for PartitionControlOracle.java: a cluster (brokers fenced, shutting down or
active, replicated partitions with ISR, ELR and epochs, topic and cluster-default configs) as
metadata records, and one operation on it (AlterPartition, ElectLeaders, a broker fenced,
unfenced, entering controlled shutdown, unregistered or registering a new incarnation, the
unclean election pass, the leader balancing pass), every record and request in Kafka's bytes.

    python partition_control_cases.py SEED COUNT > cases.txt
    java ... org.apache.kafka.controller.PartitionControlOracle < cases.txt | grep '^= ' | cut -c3- > answers.txt
    paste -d '\\t' cases.txt answers.txt > ../kafka_partition_control.txt
"""

from __future__ import annotations

import random
import sys
import uuid
from typing import Any

from kafkalike.protocol.codec import request_schema
from kafkalike.protocol.metadata_records import MetadataRecordType, encode_metadata_record, metadata_record

T = MetadataRecordType
LEVELS = (21, 25, 28, 33)  # metadata.version 3.9-IV0, 4.0-IV3, 4.2-IV0, 4.4-IV2
ELR_FEATURE = "eligible.leader.replicas.version"
UNKNOWN_TOPIC = uuid.UUID(int=0xDEAD)


def subset(rng: random.Random, items: list[int], low: int = 0) -> list[int]:
    chosen = [i for i in items if rng.random() < 0.6]
    while len(chosen) < low and len(chosen) < len(items):
        chosen.append(next(i for i in items if i not in chosen))
    rng.shuffle(chosen)
    return chosen


def case(rng: random.Random) -> str:
    mv = rng.choice(LEVELS)
    elr = mv >= 23 and rng.random() < 0.5
    records = [metadata_record(T.FEATURE_LEVEL_RECORD, name="metadata.version", feature_level=mv)]
    if elr:
        records.append(metadata_record(T.FEATURE_LEVEL_RECORD, name=ELR_FEATURE, feature_level=1))
    broker_ids = list(range(1, rng.randint(2, 5) + 1))
    epochs = {}
    for b in broker_ids:
        epochs[b] = rng.randint(10, 500)
        state = rng.choice(["active"] * 5 + ["fenced", "shutdown"])
        records.append(
            metadata_record(
                T.REGISTER_BROKER_RECORD,
                broker_id=b,
                broker_epoch=epochs[b],
                incarnation_id=uuid.UUID(int=b),
                end_points=[{"name": "PLAINTEXT", "host": "h", "port": 9000 + b, "security_protocol": 0}],
                features=[],
                rack=None,
                fenced=state == "fenced",
                in_controlled_shutdown=state == "shutdown",
            )
        )
    replica_pool = [*broker_ids, max(broker_ids) + 1]  # one id never registered
    topics: list[tuple[str, uuid.UUID, list[dict[str, Any]]]] = []
    for t in range(rng.randint(1, 2)):
        name, topic_id = f"t{t}", uuid.UUID(int=0x100 + t)
        records.append(metadata_record(T.TOPIC_RECORD, name=name, topic_id=topic_id))
        rf = rng.randint(1, min(4, len(replica_pool)))
        parts = []
        for pid in range(rng.randint(1, 3)):
            replicas = rng.sample(replica_pool, rf)
            isr = subset(rng, replicas, low=0 if elr else 1)
            leader = rng.choice([*isr, -1]) if isr else -1
            rest = [r for r in replicas if r not in isr]
            part = {
                "replicas": replicas,
                "isr": isr,
                "leader": leader,
                "leader_epoch": rng.randint(0, 5),
                "partition_epoch": rng.randint(0, 9),
                "leader_recovery_state": 1 if rng.random() < 0.2 and len(isr) == 1 else 0,
                "elr": subset(rng, rest) if elr else [],
            }
            part["last_known_elr"] = [rng.choice(replicas)] if elr and not isr and rng.random() < 0.5 else []
            parts.append(part)
            records.append(
                metadata_record(
                    T.PARTITION_RECORD,
                    partition_id=pid,
                    topic_id=topic_id,
                    replicas=replicas,
                    isr=isr,
                    removing_replicas=[],
                    adding_replicas=[],
                    leader=leader,
                    leader_recovery_state=part["leader_recovery_state"],
                    leader_epoch=part["leader_epoch"],
                    partition_epoch=part["partition_epoch"],
                    eligible_leader_replicas=part["elr"] or None,
                    last_known_elr=part["last_known_elr"] or None,
                )
            )
        for config, values in (
            ("min.insync.replicas", ["1", "2", "3"]),
            ("unclean.leader.election.enable", ["true", "false"]),
        ):
            if rng.random() < 0.4:
                records.append(
                    metadata_record(
                        T.CONFIG_RECORD, resource_type=2, resource_name=name, name=config, value=rng.choice(values)
                    )
                )
        topics.append((name, topic_id, parts))
    for resource in ("", "1", "2"):  # cluster-wide; the controller's (node 1) own; another node's
        if rng.random() > 0.2:
            continue
        records.append(
            metadata_record(
                T.CONFIG_RECORD,
                resource_type=4,
                resource_name=resource,
                **rng.choice(
                    [
                        {"name": "unclean.leader.election.enable", "value": rng.choice(["true", "false"])},
                        {"name": "min.insync.replicas", "value": rng.choice(["1", "2", "3"])},
                    ]
                ),
            )
        )
    statics = f"{rng.choice(['1', '2'])} {rng.choice(['false', 'false', 'true'])}"
    setup = ",".join(encode_metadata_record(r).hex() for r in records)
    return f"{statics} | {setup} | {operation(rng, broker_ids, epochs, topics)}"


def operation(
    rng: random.Random,
    broker_ids: list[int],
    epochs: dict[int, int],
    topics: list[tuple[str, uuid.UUID, list[dict[str, Any]]]],
) -> str:
    kind = rng.choice(
        ["alter"] * 5 + ["elect"] * 3 + ["fence", "unfence", "shutdown", "unregister", "restart", "unclean", "balance"]
    )
    if kind in ("fence", "unfence", "shutdown", "unregister"):
        return f"{kind} {rng.choice(broker_ids)}"
    if kind == "restart":
        return f"restart {rng.choice(broker_ids)} {rng.choice(['true', 'false'])}"
    if kind in ("unclean", "balance"):
        return kind
    if kind == "elect":
        version = rng.choice([0, 1, 2])
        if rng.random() < 0.25:
            asked = None
        else:
            asked = [
                {"topic": name, "partitions": sorted(rng.sample(range(len(parts) + 1), rng.randint(1, len(parts))))}
                for name, _, parts in topics
                if rng.random() < 0.8
            ]
            if rng.random() < 0.2:
                asked.append({"topic": "missing", "partitions": [0]})
        body = {"election_type": rng.choice([0, 0, 1, 1, 2]), "topic_partitions": asked, "timeout_ms": 1000}
        return f"elect {version} {request_schema(43, version).encode(body).hex()}"
    version = rng.choice([2, 3])
    _, topic_id, parts = rng.choice(topics)
    pid = rng.randrange(len(parts) + 1) if rng.random() < 0.15 else rng.randrange(len(parts))
    part = parts[pid] if pid < len(parts) else parts[0]
    clean = part["leader"] in epochs and rng.random() < 0.6  # a request the leader could well send
    leader = part["leader"] if part["leader"] >= 0 and (clean or rng.random() < 0.85) else rng.choice(broker_ids)
    isr = subset(rng, part["replicas"], low=1)
    if leader in part["replicas"] and leader not in isr and (clean or rng.random() < 0.8):
        isr.insert(0, leader)
    if not clean and rng.random() < 0.08:
        isr.append(rng.choice([*isr, 99]))

    def member_epoch(b: int) -> int:
        roll = 1.0 if clean else rng.random()
        return -1 if roll < 0.2 else (epochs.get(b, 7) + 1 if roll < 0.3 else epochs.get(b, 7))

    drift = [0] if clean else [0, 0, 0, 0, -1, 1]
    asked: dict[str, Any] = {
        "partition_index": pid,
        "leader_epoch": part["leader_epoch"] + rng.choice(drift),
        "partition_epoch": part["partition_epoch"] + rng.choice(drift),
        "leader_recovery_state": 0 if clean else rng.choice([0, 0, 1]),
    }
    if version >= 3:
        asked["new_isr_with_epochs"] = [{"broker_id": b, "broker_epoch": member_epoch(b)} for b in isr]
    else:
        asked["new_isr"] = isr
    body = {
        "broker_id": leader,
        "broker_epoch": epochs.get(leader, 7) + (1 if not clean and rng.random() < 0.05 else 0),
        "topics": [
            {"topic_id": UNKNOWN_TOPIC if not clean and rng.random() < 0.05 else topic_id, "partitions": [asked]}
        ],
    }
    return f"alter {version} {request_schema(56, version).encode(body).hex()}"


def main() -> None:
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    for _ in range(count):
        print(case(rng))


if __name__ == "__main__":
    main()
