"""Kafka's bounds on one metadata operation: the partition count before anything, then the records."""

from __future__ import annotations

from kafkalike.controller.limits import MAX_RECORDS_PER_USER_OP, RecordBudget, requested_partitions, topic_records


def test_requested_partitions_count_as_kafka_counts_them() -> None:
    # -1 takes the default, 0 and below -1 count nothing, assignments count by their number.
    assert requested_partitions([(-1, 0), (0, 0), (-5, 0), (7, 0), (-1, 3)], default_partitions=4) == 4 + 7 + 3


def test_a_topic_takes_one_record_for_itself_one_per_config_and_one_per_partition() -> None:
    assert topic_records(partitions=9999, config_names=0) == MAX_RECORDS_PER_USER_OP
    assert topic_records(partitions=9998, config_names=2) == MAX_RECORDS_PER_USER_OP + 1


def test_the_budget_takes_up_to_the_limit_and_nothing_after_one_did_not_fit() -> None:
    budget = RecordBudget()
    assert budget.take(6000)
    assert not budget.take(4001)  # would make 10,001
    # Kafka's list is full once an addition overflowed it: even one more record does not fit.
    assert not budget.take(1)
    exact = RecordBudget()
    assert exact.take(MAX_RECORDS_PER_USER_OP) and not exact.take(1)
