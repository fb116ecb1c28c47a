"""kcat (librdkafka's command-line client) against the session's broker, through subprocess."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from typing import Any

import pytest
from kafka import KafkaProducer

from compat_tests.support import CODEC_IDS, CODECS, librdkafka_codec, make_messages, stored_codecs

TIMEOUT_S = 60


def kcat(bootstrap: str, *args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["kcat", "-b", bootstrap, *args], input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    if ok:
        assert result.returncode == 0, result.stderr
    return result


def consume_json(bootstrap: str, topic: str, *args: str) -> list[dict[str, Any]]:
    """``kcat -C -e -J``: every message up to the end of every partition, one JSON object each."""
    result = kcat(bootstrap, "-C", "-t", topic, "-e", "-J", *args)
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


@pytest.mark.kafka_topic(partitions=3)
def test_metadata_listing(kafka_bootstrap: str, kafka_topic: str) -> None:
    listing = json.loads(kcat(kafka_bootstrap, "-L", "-J", "-t", kafka_topic).stdout)
    assert listing["brokers"] == [{"id": 1, "name": kafka_bootstrap}]
    assert listing["controllerid"] == 1
    (described,) = listing["topics"]
    assert described["topic"] == kafka_topic and "error" not in described
    assert described["partitions"] == [
        {"partition": p, "leader": 1, "replicas": [{"id": 1}], "isrs": [{"id": 1}]} for p in range(3)
    ]
    text = kcat(kafka_bootstrap, "-L").stdout
    assert f'topic "{kafka_topic}" with 3 partitions:' in text
    assert f"broker 1 at {kafka_bootstrap} (controller)" in text


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.kafka_topic(partitions=3)
def test_produce_keyed_lines_with_a_codec_and_consume_them_back(
    kafka_bootstrap: str, kafka_topic: str, codec: str
) -> None:
    # Every line compresses well, or librdkafka would send a batch of short lines uncompressed.
    lines = [f"user-{i % 3}:{i:06d}|" + "kcat payload " * 10 for i in range(60)]
    lines += [f"{i:06d}|" + "unkeyed kcat payload " * 10 for i in range(60, 70)]  # no delimiter: no key
    kcat(
        kafka_bootstrap,
        "-P",
        "-t",
        kafka_topic,
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
    got = consume_json(kafka_bootstrap, kafka_topic)
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
    expected = librdkafka_codec(kafka_bootstrap, codec)
    assert set(stored_codecs(kafka_bootstrap, kafka_topic, 3)) == {CODEC_IDS[expected]}


@pytest.mark.kafka_topic(partitions=1)
def test_consume_from_an_offset_and_from_a_timestamp(kafka_bootstrap: str, kafka_topic: str) -> None:
    sent = make_messages(20)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    try:
        for m in sent:
            producer.send(kafka_topic, m.value, m.key, list(m.headers), partition=0, timestamp_ms=m.timestamp_ms)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close()
    everything = consume_json(kafka_bootstrap, kafka_topic)
    assert [m["payload"].encode() for m in everything] == [m.value for m in sent]
    assert [m["ts"] for m in everything] == [m.timestamp_ms for m in sent]
    assert [m["key"] for m in everything] == [m.key.decode() if m.key else None for m in sent]
    from_offset = consume_json(kafka_bootstrap, kafka_topic, "-p", "0", "-o", "12")
    assert [m["offset"] for m in from_offset] == list(range(12, 20))
    from_time = consume_json(kafka_bootstrap, kafka_topic, "-p", "0", "-o", f"s@{sent[7].timestamp_ms - 3}")
    assert [m["ts"] for m in from_time] == [m.timestamp_ms for m in sent[7:]]


@pytest.mark.kafka_topic(partitions=1, max_message_bytes="2048")
def test_errors_are_reported_by_kcat(kafka_bootstrap: str, kafka_topic: str) -> None:
    too_large = kcat(kafka_bootstrap, "-P", "-t", kafka_topic, stdin="y" * 4000 + "\n", ok=False)
    assert too_large.returncode != 0
    assert "Message size too large" in too_large.stderr
    no_partition = kcat(kafka_bootstrap, "-P", "-t", kafka_topic, "-p", "5", stdin="x\n", ok=False)
    assert no_partition.returncode != 0
    assert "Unknown partition" in no_partition.stderr
    kcat(kafka_bootstrap, "-P", "-t", kafka_topic, stdin="fits\n")
    assert [(m["offset"], m["payload"]) for m in consume_json(kafka_bootstrap, kafka_topic)] == [(0, "fits")]
