"""The clients of a chaos run, in the root namespace: producers writing values that name themselves
(``chaos_lib.accounting``), confluent-kafka's in threads and the Java client's in a process of its
own (``ChaosProducer.java``, run from source), a consumer group reading read_committed during the
run, and the final read of every partition from offset 0. Each keeps what it was told, stamped with
this process's monotonic clock, for the accounting.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from chaos_lib.accounting import Ack, Attempt, Record, TimedAck, encode

JAVA_PRODUCER = (
    Path(__file__).resolve().parents[2] / "compat_tests/java/client/src/main/java/kafkalike/compat/ChaosProducer.java"
)
POLL_S = 0.2
STOP_TIMEOUT_S = 150.0  # above the producers' 120 s delivery timeout
DELIVERY_TIMEOUT_MS = 120000


@dataclass
class ProducerLog:
    """What one producer was asked to write and what it was told about each write."""

    name: str
    attempts: list[Attempt] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    timed: list[TimedAck] = field(default_factory=list)  # confluent-kafka's, for the failover times
    failures: dict[str, int] = field(default_factory=dict)  # error name -> count
    lock: threading.Lock = field(default_factory=threading.Lock)

    def failed(self, error: str) -> None:
        with self.lock:
            self.failures[error] = self.failures.get(error, 0) + 1


class PythonProducer:
    """A confluent-kafka producer in a thread, at about ``rate`` records a second, round-robin over
    the partitions; ``safe``: acks=all and idempotence, else acks=1 without."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: float,
        safe: bool,
        majority_up: Callable[[], bool],
    ) -> None:
        self.log = ProducerLog(name)
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.majority_up = majority_up
        self.stopping = threading.Event()
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "acks": "all" if safe else "1",
            "enable.idempotence": safe,
            "linger.ms": 5,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            "request.timeout.ms": 10000,
            "queue.buffering.max.messages": 20000,
            "log_level": 2,  # its connection errors are the faults we inject
        }
        self.producer = Producer(config)
        self.thread = threading.Thread(target=self._run, name=f"producer-{name}", daemon=True)
        self.sent: dict[int, float] = {}

    def start(self) -> None:
        self.thread.start()

    def _delivered(self, sequence: int, partition: int, sent_s: float) -> Callable[[Any, Any], None]:
        def callback(error: Any, message: Any) -> None:
            if error is not None:
                self.log.failed(error.name())
                return
            # A retry that the broker found written already (DUPLICATE_SEQUENCE_NUMBER) is
            # acknowledged without an offset.
            offset = message.offset()
            with self.log.lock:
                self.log.acks.append(Ack(self.log.name, sequence, partition, -1 if offset is None else int(offset)))
                self.log.timed.append(TimedAck(partition, sent_s, time.monotonic()))

        return callback

    def _run(self) -> None:
        try:
            self._produce()
        except Exception as exc:  # reported as the producer's failure, not lost in a thread
            self.log.failed(f"producer stopped: {exc!r}")
            raise

    def _produce(self) -> None:
        interval = 1.0 / self.rate
        next_s = time.monotonic()
        sequence = 0
        while not self.stopping.is_set():
            now = time.monotonic()
            if next_s > now:
                self.producer.poll(min(next_s - now, POLL_S))
                continue
            next_s += interval
            partition = sequence % self.partitions
            try:
                self.producer.produce(
                    self.topic,
                    value=encode(self.log.name, sequence),
                    partition=partition,
                    on_delivery=self._delivered(sequence, partition, now),
                )
            except BufferError:
                self.producer.poll(POLL_S)  # the queue is full: this sequence number is tried again
                continue
            with self.log.lock:
                self.log.attempts.append(Attempt(self.log.name, sequence, self.majority_up()))
            sequence += 1
            self.producer.poll(0)

    def stop(self) -> None:
        """Stop producing and wait for every record's outcome (bounded by the delivery timeout)."""
        self.stopping.set()
        self.thread.join(STOP_TIMEOUT_S)
        remaining = self.producer.flush(STOP_TIMEOUT_S)
        if remaining:
            self.log.failed(f"undelivered at exit ({remaining})")


class JavaProducer:
    """``ChaosProducer.java`` (the Java client, kafka-clients from ``classpath``) in a process."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: float,
        safe: bool,
        classpath: str,
        jvm_options: Sequence[str],
        majority_up: Callable[[], bool],
    ) -> None:
        self.log = ProducerLog(name)
        self.majority_up = majority_up
        self.command = [
            "java",
            *jvm_options,
            "-cp",
            classpath,
            str(JAVA_PRODUCER),
            bootstrap,
            topic,
            name,
            str(partitions),
            str(rate),
            "all" if safe else "1",
        ]
        self.proc: subprocess.Popen[str] | None = None
        self.reader: threading.Thread | None = None
        self.finished = False
        self.stderr_tail: list[str] = []

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.reader = threading.Thread(target=self._read, name=f"reader-{self.log.name}", daemon=True)
        self.reader.start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            words = line.split()
            if not words:
                continue
            with self.log.lock:
                if words[0] == "sent":
                    self.log.attempts.append(Attempt(self.log.name, int(words[1]), self.majority_up()))
                elif words[0] == "ack":
                    self.log.acks.append(Ack(self.log.name, int(words[1]), int(words[2]), int(words[3])))
                elif words[0] == "fail":
                    error = words[3] if len(words) > 3 else "?"
                    self.log.failures[error] = self.log.failures.get(error, 0) + 1
                elif words[0] == "done":
                    self.finished = True

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_tail = [*self.stderr_tail[-40:], line.rstrip()]

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Close its stdin (it flushes and exits), wait for it and for its last lines."""
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(STOP_TIMEOUT_S + 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        if self.reader is not None:
            self.reader.join(30)
        if not self.finished:
            self.log.failed(f"exited {self.proc.returncode} before done")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


class GroupConsumer:
    """One member of the run's consumer group (read_committed), keeping every record it sees."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str) -> None:
        self.name = name
        self.seen: list[Record] = []
        self.errors: dict[str, int] = {}
        self.stopping = threading.Event()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 2000,
                "log_level": 2,
            }
        )
        self.topic = topic
        self.thread = threading.Thread(target=self._run, name=f"consumer-{name}", daemon=True)

    def start(self) -> None:
        self.consumer.subscribe([self.topic])
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            message = self.consumer.poll(POLL_S)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                self.errors[error.name()] = self.errors.get(error.name(), 0) + 1
                continue
            record = as_record(message)
            if record is not None:
                self.seen.append(record)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)
        with contextlib.suppress(Exception):
            self.consumer.close()


def as_record(message: Any) -> Record | None:
    """A consumed message as a Record (None for a message without a partition, offset or value)."""
    partition, offset, value = message.partition(), message.offset(), message.value()
    if partition is None or offset is None or value is None:
        return None
    return Record(int(partition), int(offset), bytes(value).decode(errors="replace"))


def read_everything(bootstrap: str, topic: str, partitions: int, timeout_s: float) -> tuple[list[Record], list[str]]:
    """Every record of every partition from offset 0 to the end (read_committed, a fresh consumer
    of no group): the records and the problems met (a partition not read to its end)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-final-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "log_level": 2,
        }
    )
    problems: list[str] = []
    records: list[Record] = []
    try:
        ends: dict[int, int] = {}
        for partition in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            ends[partition] = int(high)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        next_offset = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + timeout_s
        while any(next_offset[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            message = consumer.poll(POLL_S)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    problems.append(f"partition {message.partition()}: {error.name()}")
                continue
            record = as_record(message)
            if record is not None:
                records.append(record)
                next_offset[record.partition] = record.offset + 1
        for partition, end in ends.items():
            if next_offset[partition] < end:
                problems.append(f"partition {partition} read to {next_offset[partition]} of {end}")
    finally:
        consumer.close()
    return records, problems
