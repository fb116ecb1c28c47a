"""Kafka's bounds on one metadata operation: the partition count before anything, then the records."""

from __future__ import annotations

from kafkalike.controller.limits import (
    MAX_RECORDS_PER_USER_OP,
    RecordBudget,
    java_hash_set_order,
    requested_partitions,
    topic_records,
)

# Printed by Java 17: String.join(" ", new HashSet<>(List.of(names...))) after adding in order.
JAVA_ORDER_OF_40 = (
    "topic-6 topic-7 topic-8 topic-9 topic-0 topic-1 topic-30 topic-2 topic-31 topic-3 topic-10 topic-32 "
    "topic-4 topic-11 topic-33 topic-5 topic-12 topic-34 topic-24 topic-25 topic-26 topic-27 topic-28 "
    "topic-29 topic-20 topic-21 topic-22 topic-23 topic-13 topic-35 topic-14 topic-36 topic-15 topic-37 "
    "topic-16 topic-38 topic-17 topic-39 topic-18 topic-19"
)
JAVA_ORDER_OF_3 = ["t-after-6c440f", "t-overflows-6c440f", "t-fits-6c440f"]


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


def test_topics_are_taken_in_the_order_a_java_hash_set_of_their_names_iterates() -> None:
    assert java_hash_set_order([f"topic-{i}" for i in range(40)]) == JAVA_ORDER_OF_40.split()
    assert java_hash_set_order(["t-fits-6c440f", "t-overflows-6c440f", "t-after-6c440f"]) == JAVA_ORDER_OF_3
    assert java_hash_set_order(["b", "a", "b"]) == ["a", "b"]
