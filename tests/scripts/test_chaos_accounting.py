"""The chaos run's accounting (scripts/chaos_lib/accounting.py) on made-up logs: a clean run passes,
and each negative control (a lost acknowledgement, a changed value, a duplicate, a reorder, a read
the log no longer has) is caught and counted, and only by its own invariant."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from chaos_lib.accounting import (  # noqa: E402
    Ack,
    Attempt,
    LeaderLoss,
    Record,
    TimedAck,
    acknowledged_fraction,
    check,
    decode,
    encode,
    failover_times,
    p50_max,
)


def clean_run() -> tuple[list[Ack], list[Record], list[Record]]:
    """Two producers, two partitions, every write acknowledged, read during the run and kept."""
    acks: list[Ack] = []
    log: list[Record] = []
    offsets = {0: 0, 1: 0}
    for sequence in range(10):
        for producer in ("p", "q"):
            partition = sequence % 2
            acks.append(Ack(producer, sequence, partition, offsets[partition]))
            log.append(Record(partition, offsets[partition], f"{producer}:{sequence}"))
            offsets[partition] += 1
    return acks, list(log), log


def test_a_clean_run_holds_every_invariant() -> None:
    acks, seen, final = clean_run()
    verdict = check(acks, seen, final)
    assert verdict.ok, verdict.failures
    assert (verdict.acked, verdict.seen_records, verdict.final_records) == (20, 20, 20)


def test_unacknowledged_writes_may_be_missing() -> None:
    """A write whose outcome the producer never learnt may or may not be in the log: no finding."""
    acks, seen, final = clean_run()
    verdict = check(acks[:-1], seen[:-1], final[:-1])
    assert verdict.ok


def test_a_lost_acknowledged_write_is_caught() -> None:
    acks, _, final = clean_run()
    truncated = [r for r in final if not (r.partition == 1 and r.offset >= 8)]  # the leader's tail, gone
    verdict = check(acks, [], truncated)
    assert verdict.failures == {"lost": 2}
    assert verdict.lost_by_partition == {1: 2}
    assert verdict.examples["lost"] == ["p:9 acked at 1@8", "q:9 acked at 1@9"]


def test_a_write_acknowledged_at_an_offset_holding_another_value_is_caught() -> None:
    acks, _, final = clean_run()
    swapped = [
        Record(r.partition, {0: 1, 1: 0}.get(r.offset, r.offset), r.value) if r.partition == 0 else r for r in final
    ]
    verdict = check(acks, [], swapped)
    assert verdict.failures == {"moved": 2}


def test_a_changed_value_is_caught() -> None:
    """A consumer read one value at an offset that the final log holds another at (a new leader's)."""
    acks, seen, final = clean_run()
    rewritten = [Record(r.partition, r.offset, "r:0") if (r.partition, r.offset) == (0, 3) else r for r in final]
    verdict = check(acks[:0], seen, rewritten)
    assert verdict.failures == {"diverged": 1}
    assert verdict.examples["diverged"] == ["0@3 was q:2, is r:0"]


def test_a_read_the_final_log_no_longer_has_is_caught() -> None:
    _, seen, final = clean_run()
    verdict = check([], seen, final[:-1])
    assert verdict.failures == {"vanished": 1}


def test_a_duplicate_is_caught() -> None:
    acks, seen, final = clean_run()
    copy = Record(0, 10, "p:8")  # a retry written again after the first copy was acknowledged
    verdict = check(acks, seen, [*final, copy])
    assert verdict.failures == {"duplicates": 1}
    assert verdict.examples["duplicates"] == ["p:8 at [(0, 8), (0, 10)]"]


def test_a_reorder_is_caught() -> None:
    """Two writes of one producer to one partition, in the log against the order they were sent in."""
    final = [Record(0, 0, "p:0"), Record(0, 1, "p:4"), Record(0, 2, "p:2"), Record(0, 3, "p:6")]
    verdict = check([], [], final)
    assert verdict.failures == {"reordered": 1}
    assert verdict.examples["reordered"] == ["p in partition 0: 4@1 then 2@2"]


def test_order_is_per_producer_and_per_partition() -> None:
    """Interleaved producers, and one producer's writes spread over partitions, are not reorders."""
    final = [
        Record(0, 0, "q:5"),
        Record(0, 1, "p:1"),
        Record(0, 2, "q:6"),
        Record(0, 3, "p:2"),
        Record(1, 0, "p:0"),
        Record(1, 1, "q:1"),
    ]
    assert check([], [], final).ok


def test_values_no_producer_wrote_are_counted_but_not_a_failure() -> None:
    verdict = check([], [], [Record(0, 0, "not ours")])
    assert verdict.ok
    assert verdict.foreign == 1


@pytest.mark.parametrize("value", [b"python-1:17", "java-1:17"])
def test_values_name_their_producer_and_sequence(value: bytes | str) -> None:
    written = decode(value)
    assert written is not None and written.sequence == 17
    assert decode(encode(written.producer, 17)) == written


@pytest.mark.parametrize("value", [None, b"", b"p:", b":3", b"p:x", b"nothing"])
def test_other_values_decode_to_none(value: bytes | None) -> None:
    assert decode(value) is None


def test_the_acknowledged_fraction_counts_only_attempts_made_while_a_majority_was_up() -> None:
    attempts = [Attempt("p", s, majority_up=s < 4) for s in range(6)]
    acks = [Ack("p", s, 0, s) for s in (0, 1, 2, 5)]
    assert acknowledged_fraction(attempts, acks) == 0.75
    assert acknowledged_fraction([Attempt("p", 0, majority_up=False)], acks) is None


def test_failover_time_is_kill_to_the_first_ack_of_a_write_sent_after_the_kill() -> None:
    losses = [LeaderLoss(partition=0, killed_s=10.0, gone_s=10.5), LeaderLoss(partition=1, killed_s=20.0, gone_s=20.1)]
    acks = [
        TimedAck(partition=0, sent_s=10.4, acked_s=10.6),  # sent before the kill took effect: the old leader's
        TimedAck(partition=0, sent_s=11.0, acked_s=14.0),
        TimedAck(partition=0, sent_s=12.0, acked_s=13.5),
        TimedAck(partition=2, sent_s=21.0, acked_s=21.1),  # another partition
    ]
    assert failover_times(losses, acks) == [3.5, None]
    assert p50_max([3.5, None, 1.5]) == {"p50": 2.5, "max": 3.5, "count": 2.0}
    assert p50_max([None]) is None


def test_an_ack_without_an_offset_needs_the_value_somewhere_in_the_log() -> None:
    """A retry the broker found written already is acknowledged without an offset: it counts as
    kept when its value is anywhere in the log, and as lost when it is nowhere."""
    acks, _, final = clean_run()
    unplaced = [Ack(a.producer, a.sequence, a.partition, -1) for a in acks]
    verdict = check(unplaced, [], final)
    assert verdict.ok and verdict.acked_without_offset == 20
    assert check(unplaced, [], final[1:]).failures == {"lost": 1}


def test_a_stranded_leaders_tail_overwritten_by_the_new_leader_is_lost() -> None:
    """The negative control's shape: the old leader acknowledged offsets 8 and 9 of partition 1
    alone (acks=1), the new leader wrote other producers' values there, the old leader truncated."""
    acks, _, final = clean_run()
    rewritten = [
        Record(r.partition, r.offset, f"r:{r.offset}") if r.partition == 1 and r.offset >= 8 else r for r in final
    ]
    seen = [r for r in final if not (r.partition == 1 and r.offset >= 8)]  # above the high watermark: unread
    verdict = check(acks, seen, rewritten)
    assert verdict.failures == {"lost": 2}
