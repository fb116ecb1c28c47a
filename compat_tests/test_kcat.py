"""kcat (librdkafka's command-line client) against a broker process, through subprocess."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from compat_tests.support import CODEC_IDS, CODECS, librdkafka_codec, make_messages, stored_codecs
from kafkalike.testing.process import BrokerProcess

TIMEOUT_S = 60


def kcat(
    broker: BrokerProcess, *args: str, stdin: str | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["kcat", "-b", broker.bootstrap, *args], input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    if ok:
        assert result.returncode == 0, result.stderr
    return result


def consume_json(broker: BrokerProcess, topic: str, *args: str) -> list[dict[str, Any]]:
    """``kcat -C -e -J``: every message up to the end of every partition, one JSON object each."""
    result = kcat(broker, "-C", "-t", topic, "-e", "-J", *args)
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def create_topic(broker: BrokerProcess, topic: str, partitions: int, **configs: str) -> None:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        client.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
    finally:
        client.close()


def test_metadata_listing(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker, topic, 3)
    listing = json.loads(kcat(broker, "-L", "-J", "-t", topic).stdout)
    assert listing["brokers"] == [{"id": 1, "name": broker.bootstrap}]
    assert listing["controllerid"] == 1
    (described,) = listing["topics"]
    assert described["topic"] == topic and "error" not in described
    assert described["partitions"] == [
        {"partition": p, "leader": 1, "replicas": [{"id": 1}], "isrs": [{"id": 1}]} for p in range(3)
    ]
    text = kcat(broker, "-L").stdout
    assert f'topic "{topic}" with 3 partitions:' in text
    assert f"broker 1 at {broker.bootstrap} (controller)" in text


@pytest.mark.parametrize("codec", CODECS)
def test_produce_keyed_lines_with_a_codec_and_consume_them_back(broker: BrokerProcess, topic: str, codec: str) -> None:
    create_topic(broker, topic, 3)
    # Every line compresses well, or librdkafka would send a batch of short lines uncompressed.
    lines = [f"user-{i % 3}:{i:06d}|" + "kcat payload " * 10 for i in range(60)]
    lines += [f"{i:06d}|" + "unkeyed kcat payload " * 10 for i in range(60, 70)]  # no delimiter: no key
    kcat(
        broker,
        "-P",
        "-t",
        topic,
        "-K",
        ":",
        "-z",
        codec,
        "-H",
        "origin=kcat",
        "-H",
        "origin=twice",
        stdin="\n".join(lines) + "\n",
    )
    got = consume_json(broker, topic)
    assert len(got) == len(lines)
    by_index = {int(m["payload"].split("|", 1)[0]): m for m in got}
    assert sorted(by_index) == list(range(70))
    partitions_of_key: dict[str, set[int]] = defaultdict(set)
    for index, message in by_index.items():
        key, _, value = lines[index].partition(":") if index < 60 else (None, "", lines[index])
        assert (message["key"], message["payload"]) == (key, value)
        assert message["headers"] == ["origin", "kcat", "origin", "twice"]
        assert message["tstype"] == "create"
        if key is not None:
            partitions_of_key[key].add(message["partition"])
    assert all(len(found) == 1 for found in partitions_of_key.values()), partitions_of_key
    for partition in range(3):
        in_log = sorted((m for m in got if m["partition"] == partition), key=lambda m: m["offset"])
        assert [m["offset"] for m in in_log] == list(range(len(in_log)))
        indexes = [int(m["payload"].split("|", 1)[0]) for m in in_log]
        assert indexes == sorted(indexes), f"partition {partition} is not in send order"
    expected = librdkafka_codec(broker.bootstrap, codec)
    assert set(stored_codecs(broker.bootstrap, topic, 3)) == {CODEC_IDS[expected]}


def test_consume_from_an_offset_and_from_a_timestamp(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker, topic, 1)
    sent = make_messages(20)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for m in sent:
            producer.send(topic, m.value, m.key, list(m.headers), partition=0, timestamp_ms=m.timestamp_ms)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close()
    everything = consume_json(broker, topic)
    assert [m["payload"].encode() for m in everything] == [m.value for m in sent]
    assert [m["ts"] for m in everything] == [m.timestamp_ms for m in sent]
    assert [m["key"] for m in everything] == [m.key.decode() if m.key else None for m in sent]
    from_offset = consume_json(broker, topic, "-p", "0", "-o", "12")
    assert [m["offset"] for m in from_offset] == list(range(12, 20))
    from_time = consume_json(broker, topic, "-p", "0", "-o", f"s@{sent[7].timestamp_ms - 3}")
    assert [m["ts"] for m in from_time] == [m.timestamp_ms for m in sent[7:]]


def test_errors_are_reported_by_kcat(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker, topic, 1, **{"max.message.bytes": "2048"})
    too_large = kcat(broker, "-P", "-t", topic, stdin="y" * 4000 + "\n", ok=False)
    assert too_large.returncode != 0
    assert "Message size too large" in too_large.stderr
    no_partition = kcat(broker, "-P", "-t", topic, "-p", "5", stdin="x\n", ok=False)
    assert no_partition.returncode != 0
    assert "Unknown partition" in no_partition.stderr
    kcat(broker, "-P", "-t", topic, stdin="fits\n")
    assert [(m["offset"], m["payload"]) for m in consume_json(broker, topic)] == [(0, "fits")]
