"""AlterPartition, ElectLeaders, broker events (fenced, unfenced, controlled shutdown, unregistered,
a new incarnation) and the periodic election passes against what Kafka 4.4.0's
ReplicationControlManager answered for the same cluster and request.

kafka_partition_control.txt holds random cases (oracle/partition_control_cases.py: brokers
active, fenced or shutting down; replicated partitions with ISR, ELR, epochs and leader recovery
states; topic and cluster-default configs; one operation) and Kafka's answer to each, made by
oracle/PartitionControlOracle.java: the response and the records, byte for byte. The balancing
pass is compared as a set of records: Kafka takes the imbalanced partitions in the order of its
own hash set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkalike.controller.cluster_control import ClusterControlManager
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.partition_control import (
    alter_partition,
    balance_partition_leaders,
    elect_leaders,
    elect_unclean_leaders,
)
from kafkalike.protocol.codec import request_schema, response_schema
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, decode_metadata_record, encode_metadata_record
from kafkalike.testing.broker_simulation import ControllerLog

CASES = Path(__file__).with_name("kafka_partition_control.txt")
KAFKA_EXCEPTIONS = {
    "StaleBrokerEpochException": ErrorCode.STALE_BROKER_EPOCH,
    "InvalidRequestException": ErrorCode.INVALID_REQUEST,
}


def load_cases() -> list[tuple[str, str]]:
    lines = [line for line in CASES.read_text().splitlines() if line and not line.startswith("#")]
    return [tuple(line.split("\t")) for line in lines]  # type: ignore[misc]


def ours(case: str) -> tuple[Any, list[ApiMessageAndVersion], str]:
    """Our reply, records and the operation's name for one case line."""
    statics, setup, op = case.split(" | ")
    min_isr, unclean = statics.split()
    manager = ClusterControlManager(
        cluster_id="oracle",
        default_min_insync_replicas=int(min_isr),
        default_unclean_leader_election=unclean == "true",
        node_id=1,  # as the oracle's controller
    )
    log = ControllerLog(manager, [decode_metadata_record(bytes.fromhex(h)) for h in setup.split(",")])
    image, partitions = log.image, manager.partitions
    name, *args = op.split()
    result: ControllerResult[Any]
    if name == "alter":
        version = int(args[0])
        request = request_schema(56, version).decode(bytes.fromhex(args[1]))
        result = alter_partition(image, partitions, request, version)
    elif name == "elect":
        version = int(args[0])
        request = request_schema(43, version).decode(bytes.fromhex(args[1]))
        result = elect_leaders(image, partitions, request, version)
    elif name == "fence":
        records: list[ApiMessageAndVersion] = []
        manager._handle_fenced(image, int(args[0]), records)
        result = ControllerResult.of(records, None)
    elif name in ("unfence", "shutdown", "unregister", "restart"):
        broker_id = int(args[0])
        epoch = image.brokers[broker_id].epoch
        records = []
        if name == "unfence":
            manager._handle_unfenced(image, broker_id, epoch, records)
        elif name == "shutdown":
            manager._handle_in_controlled_shutdown(image, broker_id, epoch, records)
        elif name == "unregister":
            records = list(manager.unregister_broker(image, broker_id).records)
        else:
            manager._handle_broker_shutdown(image, broker_id, args[1] == "true", records)
        result = ControllerResult.of(records, None)
    elif name == "unclean":
        result = elect_unclean_leaders(image, partitions)
    else:
        result = balance_partition_leaders(image, partitions)
    return result.reply, list(result.records), op


@pytest.mark.parametrize(("case", "answer"), load_cases())
def test_kafka_answers_the_same(case: str, answer: str) -> None:
    reply, records, op = ours(case)
    name, *args = op.split()
    ours_hex = [encode_metadata_record(r).hex() for r in records]
    if answer.startswith("ERROR "):
        _, exception, message = answer.split(" ", 2)
        assert ours_hex == []
        assert (reply.error.code, reply.error.message) == (KAFKA_EXCEPTIONS[exception], message)
        return
    kafka_reply, kafka_records = answer.split(" | ")
    kafka_hex = [h for h in kafka_records.split(",") if h]
    if name in ("alter", "elect"):
        version = int(args[0])
        assert reply.error.ok
        encoded = response_schema(56 if name == "alter" else 43, version).encode(reply.to_response()).hex()
        assert encoded == kafka_reply
    elif name in ("unclean", "balance"):
        assert str(reply).lower() == kafka_reply
    if name == "balance":
        assert sorted(ours_hex) == sorted(kafka_hex)
    else:
        assert ours_hex == kafka_hex
