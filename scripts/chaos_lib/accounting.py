"""What a chaos run proves, as pure functions over what the producers were told, what the consumers
saw during the run and what the final log holds (read back from offset 0 of every partition).

Every value a producer writes is ``<producer>:<sequence>``: the producer's name and a number that
grows by one with each record it sends, so a record names itself and the log says who wrote what
in which order. Nothing here talks to a broker, so the negative controls (a lost acknowledgement,
a changed value, a duplicate, a reorder) are tested on logs made up for the purpose.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Written:
    """One value a producer wrote: ``producer`` and its ``sequence`` number."""

    producer: str
    sequence: int

    @property
    def value(self) -> str:
        return f"{self.producer}:{self.sequence}"


def encode(producer: str, sequence: int) -> bytes:
    return Written(producer, sequence).value.encode()


def decode(value: bytes | str | None) -> Written | None:
    """The producer and sequence number a value names, or None when it is not one of ours."""
    if value is None:
        return None
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    producer, sep, number = text.rpartition(":")
    if not sep or not producer or not number.isdigit():
        return None
    return Written(producer, int(number))


@dataclass(frozen=True)
class Ack:
    """A write the producer's delivery callback reported as acknowledged, where the broker put it
    (``offset`` -1: the broker did not say, as for a retry it found written already)."""

    producer: str
    sequence: int
    partition: int
    offset: int


@dataclass(frozen=True)
class Record:
    """A record read from the log: where it is and the value it holds."""

    partition: int
    offset: int
    value: str


@dataclass
class Verdict:
    """The invariants' counts (each must be 0) and a few examples of each for the report."""

    acked: int = 0
    final_records: int = 0
    seen_records: int = 0
    lost: int = 0  # acknowledged, absent from the final log
    moved: int = 0  # acknowledged at an offset that now holds another value (present elsewhere)
    diverged: int = 0  # seen by a consumer with another value than the final log's at that offset
    vanished: int = 0  # seen by a consumer at an offset the final log no longer has
    duplicates: int = 0  # extra copies of a value in the final log
    reordered: int = 0  # a producer's sequence numbers going down within a partition
    acked_without_offset: int = 0  # a retry found written already: acknowledged, offset unknown
    foreign: int = 0  # values of the final log that no producer of the run wrote
    lost_by_partition: dict[int, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    INVARIANTS = ("lost", "moved", "diverged", "vanished", "duplicates", "reordered")

    @property
    def failures(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.INVARIANTS if getattr(self, name)}

    @property
    def ok(self) -> bool:
        return not self.failures

    def note(self, invariant: str, example: str, keep: int = 5) -> None:
        found = self.examples.setdefault(invariant, [])
        if len(found) < keep:
            found.append(example)


def check(acks: Iterable[Ack], seen: Iterable[Record], final: Iterable[Record]) -> Verdict:
    """Compare the acknowledged writes and the consumers' reads with the final log."""
    verdict = Verdict()
    final_at: dict[tuple[int, int], str] = {}
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for record in final:
        final_at[record.partition, record.offset] = record.value
        where[record.value].append((record.partition, record.offset))
    verdict.final_records = len(final_at)

    for ack in acks:
        verdict.acked += 1
        value = Written(ack.producer, ack.sequence).value
        if value not in where:
            verdict.lost += 1
            verdict.lost_by_partition[ack.partition] = verdict.lost_by_partition.get(ack.partition, 0) + 1
            verdict.note("lost", f"{value} acked at {ack.partition}@{ack.offset}")
        elif ack.offset < 0:
            verdict.acked_without_offset += 1
        elif final_at.get((ack.partition, ack.offset)) != value:
            verdict.moved += 1
            verdict.note("moved", f"{value} acked at {ack.partition}@{ack.offset}, found at {where[value]}")

    for record in seen:
        verdict.seen_records += 1
        now = final_at.get((record.partition, record.offset))
        if now is None:
            verdict.vanished += 1
            verdict.note("vanished", f"{record.partition}@{record.offset} was {record.value}")
        elif now != record.value:
            verdict.diverged += 1
            verdict.note("diverged", f"{record.partition}@{record.offset} was {record.value}, is {now}")

    for value, places in where.items():
        if len(places) > 1:
            verdict.duplicates += len(places) - 1
            verdict.note("duplicates", f"{value} at {sorted(places)}")

    last: dict[tuple[int, str], tuple[int, int]] = {}  # (partition, producer) -> (sequence, offset)
    ordered: set[str] = set()
    for (partition, offset), value in sorted(final_at.items()):
        written = decode(value)
        if written is None:
            verdict.foreign += 1
            continue
        if value in ordered:
            continue  # a later copy is a duplicate (counted above), not also a reorder
        ordered.add(value)
        key = (partition, written.producer)
        before = last.get(key)
        if before is not None and written.sequence <= before[0]:
            verdict.reordered += 1
            verdict.note(
                "reordered",
                f"{written.producer} in partition {partition}: {before[0]}@{before[1]} then {written.sequence}@{offset}",
            )
        last[key] = (written.sequence, offset)
    return verdict


@dataclass(frozen=True)
class Attempt:
    """A record handed to a producer, and whether a majority of the nodes was up at the time."""

    producer: str
    sequence: int
    majority_up: bool


def acknowledged_fraction(attempts: Iterable[Attempt], acks: Iterable[Ack]) -> float | None:
    """Of the attempts made while a majority was up, the fraction acknowledged (None: no such attempt)."""
    acked = {(a.producer, a.sequence) for a in acks}
    counted = [(a.producer, a.sequence) in acked for a in attempts if a.majority_up]
    return sum(counted) / len(counted) if counted else None


@dataclass(frozen=True)
class TimedAck:
    """When a write acknowledged in ``partition`` was sent and acknowledged (one monotonic clock)."""

    partition: int
    sent_s: float
    acked_s: float


@dataclass(frozen=True)
class LeaderLoss:
    """The leader of ``partition`` was killed at ``killed_s``; the kill had taken effect at ``gone_s``."""

    partition: int
    killed_s: float
    gone_s: float


def failover_times(losses: Iterable[LeaderLoss], acks: Sequence[TimedAck]) -> list[float | None]:
    """For each leader lost, the time from its kill to the first acknowledgement in its partition
    of a write sent after the kill took effect (so the old leader cannot have acknowledged it);
    None when no such write was acknowledged."""
    by_partition: dict[int, list[TimedAck]] = defaultdict(list)
    for ack in acks:
        by_partition[ack.partition].append(ack)
    times: list[float | None] = []
    for loss in losses:
        after = [a.acked_s for a in by_partition[loss.partition] if a.sent_s >= loss.gone_s]
        times.append(min(after) - loss.killed_s if after else None)
    return times


def p50_max(values: Iterable[float | None]) -> dict[str, float] | None:
    known = [v for v in values if v is not None]
    if not known:
        return None
    return {"p50": statistics.median(known), "max": max(known), "count": float(len(known))}
