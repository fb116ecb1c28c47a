"""Load generators, each run as its own process so the client does not share an interpreter (or a
GIL) with the harness: ``python scripts/bench_lib/workers.py MODE 'JSON-ARGS'``.

They use librdkafka (confluent-kafka), except ``fetchloop``, and print one JSON line with their result on stdout.
Every loop is bounded by a message count and a deadline.

- ``produce``: send ``count`` messages as fast as the producer takes them (or until
  ``seconds``), wait for every acknowledgement; messages/s and MB/s over acknowledged messages.
- ``paced``: send at a fixed rate for ``warmup_s`` + ``seconds``; each value starts with the send
  time (CLOCK_MONOTONIC, shared by every process on the machine); produce-to-ack latencies of
  the messages after the warm-up.
- ``consume``: read ``count`` messages from the start of every partition (no group, ``assign``).
- ``fetchloop``: the same with bare Fetch requests (kafkalike's protocol client; batch headers
  only, records never decoded), so the client costs little and the broker sets the pace.
- ``e2e``: read from the end of every partition, latency = receive time - the time in the value
  (warm-up messages skipped); prints ``ready`` on stderr once it has fetched, then runs until
  ``count`` or ``seconds``.
- ``steady``: a fixed rate to one partition; prints ``ready`` on stderr once a write was
  acknowledged, and reads from stdin the CLOCK_MONOTONIC nanoseconds of a fault (a broker killed);
  runs until ``after_s`` past the first acknowledgement of a message sent after the fault (or
  ``seconds``): how long writes to that partition stalled, and what errors the client saw.
"""

from __future__ import annotations

import collections
import json
import random
import struct
import sys
import threading
import time
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, Producer, TopicPartition

STAMP = struct.Struct(">q")


def payloads(size: int, n: int = 256, seed: int = 7) -> list[bytes]:
    """Random capital letters, as kafka-producer-perf-test sends: compressible, but not trivially."""
    rng = random.Random(seed)
    return [bytes(rng.choices(range(65, 91), k=size)) for _ in range(n)]


def quantiles(samples: list[float], points: int = 200) -> dict[str, Any]:
    """Percentiles and a down-sampled sorted copy (for a CDF plot), in milliseconds."""
    if not samples:
        return {"count": 0}
    s = sorted(samples)
    n = len(s)

    def pct(p: float) -> float:
        return s[min(n - 1, max(0, round(p / 100 * n + 0.5) - 1))]

    step = max(1, n // points)
    return {
        "count": n,
        "p50": pct(50),
        "p90": pct(90),
        "p99": pct(99),
        "p99.9": pct(99.9),
        "max": s[-1],
        "mean": sum(s) / n,
        "cdf": [s[i] for i in range(0, n, step)] + [s[-1]],
    }


def producer_config(a: dict[str, Any]) -> dict[str, Any]:
    config = {
        "bootstrap.servers": a["bootstrap"],
        "acks": str(a.get("acks", "all")),
        "compression.type": a.get("compression", "none"),
        "linger.ms": a.get("linger_ms", 5),
        "queue.buffering.max.kbytes": 256 * 1024,
        "queue.buffering.max.messages": 1_000_000,
        "message.timeout.ms": 60_000,
        "socket.nagle.disable": True,
    }
    config.update(a.get("extra", {}))
    return config


def produce(a: dict[str, Any]) -> dict[str, Any]:
    """As fast as possible: ``count`` messages or ``seconds`` of sending, whichever comes first."""
    producer = Producer(producer_config(a))
    topic, count, deadline_s = a["topic"], int(a["count"]), float(a["seconds"])
    values = payloads(int(a["value_size"]))
    acked = errors = 0

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal acked, errors
        if err is None:
            acked += 1
        else:
            errors += 1

    producer.list_topics(topic, timeout=10)  # metadata first, so the clock runs on produce only
    started = time.perf_counter()
    stop_at = started + deadline_s
    sent = 0
    n_values = len(values)
    produce_ = producer.produce
    while sent < count:
        try:
            produce_(topic, values[sent % n_values], on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.005)
            continue
        if not sent & 1023:
            producer.poll(0)
            if time.perf_counter() > stop_at:
                break
    left = producer.flush(max(10.0, deadline_s))
    elapsed = time.perf_counter() - started
    size = int(a["value_size"])
    return {
        "sent": sent,
        "acked": acked,
        "errors": errors,
        "unflushed": left,
        "seconds": elapsed,
        "msgs_per_s": acked / elapsed,
        "mb_per_s": acked * size / elapsed / 1e6,
    }


def paced(a: dict[str, Any]) -> dict[str, Any]:
    """A fixed rate: ``warmup_s`` unrecorded, then ``seconds`` recorded. Each value starts with its
    send time and a flag (1: recorded), so the e2e consumer skips the warm-up too."""
    producer = Producer(producer_config(a))
    topic, rate, seconds = a["topic"], float(a["rate"]), float(a["seconds"])
    warmup = float(a.get("warmup_s", 0.0))
    size = max(int(a["value_size"]), STAMP.size + 1)
    pad = payloads(size - STAMP.size - 1, n=1)[0]
    latencies: list[float] = []
    errors = 0

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal errors
        if err is not None:
            errors += 1
        elif msg.value()[STAMP.size] == 1:
            latencies.append(msg.latency() * 1000.0)

    producer.list_topics(topic, timeout=10)
    started = time.monotonic()
    total_warm = int(rate * warmup)
    total = total_warm + int(rate * seconds)
    stop_at = started + warmup + seconds + 5
    sent = 0
    measured_from = None
    while sent < total and time.monotonic() < stop_at:
        now = time.monotonic()
        due = min(total, int((now - started) * rate) + 1)
        while sent < due:
            flag = b"\x01" if sent >= total_warm else b"\x00"
            if sent == total_warm:
                measured_from = time.monotonic()
            try:
                producer.produce(topic, STAMP.pack(time.monotonic_ns()) + flag + pad, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.001)
                break
        # Serve delivery reports while waiting for the next send time (at most 1 ms away).
        wait = started + (sent + 1) / rate - time.monotonic()
        producer.poll(min(max(wait, 0.0), 0.001))
    producer.flush(30)
    elapsed = time.monotonic() - (measured_from or started)
    out = quantiles(latencies)
    measured = max(sent - total_warm, 0)
    out.update({"sent": measured, "errors": errors, "seconds": elapsed, "achieved_rate": measured / max(elapsed, 1e-9)})
    return out


def consumer_config(a: dict[str, Any]) -> dict[str, Any]:
    config = {
        "bootstrap.servers": a["bootstrap"],
        "group.id": a.get("group", "kafkalike-bench"),  # required by the client; no group is joined (assign)
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "socket.nagle.disable": True,
    }
    config.update(a.get("extra", {}))
    return config


def _assign(consumer: Consumer, topic: str, offset: int) -> int:
    metadata = consumer.list_topics(topic, timeout=10).topics[topic]
    if metadata.error is not None:
        raise KafkaException(metadata.error)
    parts = sorted(metadata.partitions)
    consumer.assign([TopicPartition(topic, p, offset) for p in parts])
    return len(parts)


def consume(a: dict[str, Any]) -> dict[str, Any]:
    consumer = Consumer(consumer_config(a))
    topic, count, seconds = a["topic"], int(a["count"]), float(a["seconds"])
    started = time.perf_counter()
    _assign(consumer, topic, OFFSET_BEGINNING)
    stop_at = started + seconds
    got = nbytes = 0
    first_at = None
    while got < count and time.perf_counter() < stop_at:
        batch = consumer.consume(num_messages=10_000, timeout=0.5)
        for msg in batch:
            if msg.error() is None:
                got += 1
                nbytes += len(msg.value() or b"")
        if batch and first_at is None:
            first_at = time.perf_counter()
    elapsed = time.perf_counter() - started
    consumer.close()
    return {
        "consumed": got,
        "bytes": nbytes,
        "seconds": elapsed,
        "first_message_s": (first_at - started) if first_at else None,
        "msgs_per_s": got / elapsed,
        "mb_per_s": nbytes / elapsed / 1e6,
    }


def e2e(a: dict[str, Any]) -> dict[str, Any]:
    consumer = Consumer(consumer_config(a))
    topic, count, seconds = a["topic"], int(a["count"]), float(a["seconds"])
    _assign(consumer, topic, OFFSET_END)
    # One empty round trip, so the fetch offsets are resolved before the producer starts.
    consumer.consume(num_messages=1, timeout=1.0)
    print("ready", file=sys.stderr, flush=True)
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds
    unpack = STAMP.unpack_from
    while len(latencies) < count and time.monotonic() < stop_at:
        batch = consumer.consume(num_messages=10_000, timeout=0)
        if not batch:
            msg = consumer.poll(0.05)
            batch = [msg] if msg is not None else []
        now = time.monotonic_ns()
        for msg in batch:
            if msg.error() is None:
                value = msg.value()
                if value[STAMP.size] == 1:
                    latencies.append((now - unpack(value)[0]) / 1e6)
    consumer.close()
    return quantiles(latencies)


def fetchloop(a: dict[str, Any]) -> dict[str, Any]:
    """Consume with bare Fetch requests (this project's protocol client, no record decoding): what
    the broker can serve when the client does almost nothing with what it gets."""
    from kafkalike.protocol.records import iter_batches
    from kafkalike.testing.wire_client import WireClient

    host, _, port = a["bootstrap"].rpartition(":")
    topic, count, seconds = a["topic"], int(a["count"]), float(a["seconds"])
    size = int(a["value_size"])
    started = time.perf_counter()
    got = nbytes = 0
    with WireClient(host, int(port), timeout_s=30) as client:
        wanted = [{"name": topic, "topic_id": uuid.UUID(int=0)}]
        meta = client.request(3, 12, {"topics": wanted, "allow_auto_topic_creation": False})
        parts = sorted(p.partition_index for p in meta.topics[0].partitions)
        offsets = dict.fromkeys(parts, 0)
        stop_at = started + seconds
        while got < count and time.perf_counter() < stop_at:
            body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52_428_800,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": p, "current_leader_epoch": -1, "fetch_offset": offsets[p],
                         "log_start_offset": -1, "partition_max_bytes": 1_048_576} for p in parts]}],
                    "forgotten_topics_data": [], "rack_id": ""}  # fmt: skip
            answer = client.request(1, 12, body)
            for part in answer.responses[0].partitions:
                if part.error_code:
                    raise RuntimeError(f"fetch error {part.error_code} on partition {part.partition_index}")
                last = None
                for _, header in iter_batches(part.records or b"", partial_ok=True):
                    got += header.records_count
                    nbytes += header.size
                    last = header
                if last is not None:
                    offsets[part.partition_index] = last.last_offset + 1
    elapsed = time.perf_counter() - started
    return {
        "consumed": got,
        "batch_bytes": nbytes,
        "bytes": got * size,
        "seconds": elapsed,
        "msgs_per_s": got / elapsed,
        "mb_per_s": got * size / elapsed / 1e6,
    }


def steady(a: dict[str, Any]) -> dict[str, Any]:
    """Produce at ``rate`` to ``partition`` and time the stall around a fault the harness reports on
    stdin (one line: its CLOCK_MONOTONIC nanoseconds). The failover time is the kill to the first
    acknowledgement of a message sent after it: only a new leader can have acknowledged that one,
    whatever responses the old leader had sent before it died."""
    delivery_errors: collections.Counter[str] = collections.Counter()
    client_errors: collections.Counter[str] = collections.Counter()
    stats: dict[str, Any] = {}

    def on_error(err: Any) -> None:
        client_errors[err.name()] += 1

    def on_stats(text: str) -> None:
        stats.update(json.loads(text))

    config = producer_config(a) | {"error_cb": on_error, "stats_cb": on_stats, "statistics.interval.ms": 500}
    producer = Producer(config)
    topic, partition, rate = a["topic"], int(a["partition"]), float(a["rate"])
    seconds, after_s = float(a["seconds"]), float(a["after_s"])
    pad = payloads(max(int(a["value_size"]) - STAMP.size, 1), n=1)[0]
    acks: list[tuple[int, int]] = []  # (sent, acknowledged), CLOCK_MONOTONIC ns
    fault: list[int] = []
    first_after: list[int] = []  # the acknowledgement of the first message sent after the fault

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            delivery_errors[err.name()] += 1
            return
        sent_ns, now = STAMP.unpack_from(msg.value())[0], time.monotonic_ns()
        acks.append((sent_ns, now))
        if fault and 0 < fault[0] < sent_ns and not first_after:
            first_after.append(now)

    reader = threading.Thread(target=lambda: fault.append(int(sys.stdin.readline() or 0)), daemon=True)
    reader.start()
    producer.list_topics(topic, timeout=10)
    started = time.monotonic()
    stop_at = started + seconds
    sent = 0
    said_ready = False
    while time.monotonic() < stop_at:
        due = int((time.monotonic() - started) * rate) + 1
        while sent < due:
            try:
                producer.produce(
                    topic, STAMP.pack(time.monotonic_ns()) + pad, partition=partition, on_delivery=on_delivery
                )
                sent += 1
            except BufferError:
                break
        producer.poll(min(max(started + (sent + 1) / rate - time.monotonic(), 0.0), 0.001))
        if acks and not said_ready:
            print("ready", file=sys.stderr, flush=True)
            said_ready = True
        if first_after and time.monotonic_ns() > first_after[0] + after_s * 1e9:
            break
    producer.flush(30)
    fault_ns = fault[0] if fault and fault[0] > 0 else None
    out: dict[str, Any] = {
        "sent": sent,
        "acked": len(acks),
        "delivery_errors": dict(delivery_errors),
        "client_errors": dict(client_errors),
        "request_retries": sum(b.get("txretries", 0) for b in stats.get("brokers", {}).values()),
        "request_errors": sum(b.get("txerrs", 0) for b in stats.get("brokers", {}).values()),
        "request_timeouts": sum(b.get("req_timeouts", 0) for b in stats.get("brokers", {}).values()),
    }
    if fault_ns is not None:
        later = [acked for sent_ns, acked in acks if sent_ns > fault_ns]
        after = [acked for _, acked in acks if acked > fault_ns]
        before = [acked for _, acked in acks if acked <= fault_ns]
        out.update(
            failover_s=(min(later) - fault_ns) / 1e9 if later else None,
            first_ack_after_fault_s=(min(after) - fault_ns) / 1e9 if after else None,
            last_ack_before_fault_s=(fault_ns - max(before)) / 1e9 if before else None,
            acked_after_fault=len(after),
        )
    return out


MODES = {
    "produce": produce,
    "paced": paced,
    "consume": consume,
    "e2e": e2e,
    "fetchloop": fetchloop,
    "steady": steady,
}


def main() -> None:
    mode, args = sys.argv[1], json.loads(sys.argv[2])
    result = MODES[mode](args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
