"""What scripts/chaos.py reports from an outcome: the table names every failed invariant, and the
exit status tells a failed invariant (1) from a target that could not be run (2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import chaos  # noqa: E402
from chaos_lib.accounting import Ack, Record, check  # noqa: E402
from chaos_lib.run import Outcome, failover_by_kind  # noqa: E402


def outcome_with_loss() -> Outcome:
    acks = [Ack("p", 0, 0, 0), Ack("p", 1, 0, 1)]
    outcome = Outcome("Apache Kafka (test)", verdict=check(acks, [], [Record(0, 0, "p:0")]))
    outcome.failover = {"p50": 9.5, "max": 11.0, "count": 3.0}
    outcome.availability = 0.995
    return outcome


def test_a_lost_write_fails_the_run_and_is_named_in_the_table() -> None:
    outcome = outcome_with_loss()
    text = chaos.table(outcome)
    assert "acknowledged writes lost                        1  FAIL" in text
    assert "e.g. p:1 acked at 0@1" in text
    assert "INVARIANT FAILED: {'lost': 1}" in text
    assert "p50 9.50 s, max 11.00 s" in text
    assert chaos.exit_status([outcome]) == 1
    assert json.loads(json.dumps(outcome.as_dict()))["verdict"]["lost"] == 1


def test_a_clean_run_exits_0_and_a_target_not_run_exits_2() -> None:
    clean = Outcome("kafka", verdict=check([Ack("p", 0, 0, 0)], [], [Record(0, 0, "p:0")]))
    assert "every invariant held" in chaos.table(clean)
    assert chaos.exit_status([clean]) == 0
    refused = Outcome("kafkalike", setup_error="CreateTopics chaos: INVALID_REPLICATION_FACTOR: ...")
    assert "NOT RUN: CreateTopics chaos: INVALID_REPLICATION_FACTOR" in chaos.table(refused)
    assert chaos.exit_status([clean, refused]) == 2
    assert chaos.exit_status([outcome_with_loss(), clean]) == 1


def test_failover_times_go_back_to_the_faults_that_lost_the_leaders() -> None:
    events: list[dict[str, Any]] = [
        {"kind": "kill-leader", "leaders_lost": [0, 3]},
        {"kind": "pause-node"},
        {"kind": "kill-controller", "leaders_lost": [1]},
        {"kind": "kill-leader", "leaders_lost": [2]},
    ]
    by_kind = failover_by_kind(events, [10.0, 12.0, 9.0, None])
    assert [e["failover_s"] for e in events] == [[10.0, 12.0], [], [9.0], [None]]
    assert by_kind == {
        "kill-leader": {"p50": 11.0, "max": 12.0, "count": 2.0},
        "kill-controller": {"p50": 9.0, "max": 9.0, "count": 1.0},
    }


def test_a_grown_run_fails_when_leadership_did_not_end_on_the_preferred_replicas() -> None:
    grown = Outcome("kafkalike", verdict=check([Ack("p", 0, 0, 0)], [], [Record(0, 0, "p:0")]))
    grown.growth = [
        {"kind": "add-broker", "node": 4, "seconds": 3.2},
        {"kind": "reassign", "moves": {"0": [4, 1, 2]}, "seconds": 5.0, "verifications": 3},
        {"kind": "restart", "node": 1, "stopped_s": 1.0, "seconds": 6.5, "settled": True},
        {"kind": "preferred-leaders", "not_preferred": {}, "preferred": {0: 4}, "per_broker": {1: 0, 4: 1}},
    ]
    grown.balanced = True
    text = chaos.table(grown)
    assert "growth: 1 partitions moved with kafka-reassign-partitions in 5.0 s (3 --verify runs)" in text
    assert "growth: node 1 stopped in 1.0 s, back to full ISR 6.5 s after SIGTERM" in text
    assert "leaders on their preferred replicas           yes" in text
    assert chaos.exit_status([grown]) == 0
    grown.balanced = False
    assert "leaders on their preferred replicas            NO" in chaos.table(grown)
    assert chaos.exit_status([grown]) == 1


def test_half_the_partitions_move_onto_the_new_broker_which_leads_some() -> None:
    from chaos_lib.grow import half_onto, plan_json

    moves = half_onto(4, {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 3, 2], 4: [2, 1, 3]})
    assert moves == {0: [4, 1, 2], 2: [3, 1, 4], 4: [4, 2, 1]}
    assert plan_json("t", moves)["partitions"][1] == {"topic": "t", "partition": 2, "replicas": [3, 1, 4]}
