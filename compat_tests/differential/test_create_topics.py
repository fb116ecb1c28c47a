"""CreateTopics: invalid names, duplicates, existing topics, bad configs and counts, validate_only."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from compat_tests.differential.conftest import Pair, assert_same, create_topics_body, topic_spec

pytestmark = pytest.mark.differential

# v5+ answers list every topic config with its value and source; compared in test_describe_configs.
NO_CONFIG_LIST = ("topics[].configs",)


@pytest.mark.parametrize("bad", ["bad/name", "..", ".", "a" * 250, "with space", "", "tab\tname", "x:y"])
def test_an_invalid_name(pair: Pair, bad: str) -> None:
    ak, kl = pair.both(19, 7, create_topics_body([topic_spec(bad)]))
    assert_same(ak, kl)


def test_the_same_name_twice_in_one_request(pair: Pair, name: Callable[[str], str]) -> None:
    twice, once = name("twice"), name("once")
    ak, kl = pair.both(19, 7, create_topics_body([topic_spec(twice), topic_spec(once), topic_spec(twice, 2)]))
    assert_same(ak, kl, NO_CONFIG_LIST)


def test_an_existing_topic(pair: Pair, name: Callable[[str], str]) -> None:
    topic = name()
    pair.create_topic(topic)
    ak, kl = pair.both(19, 7, create_topics_body([topic_spec(topic, 2)]))
    assert_same(ak, kl)


@pytest.mark.parametrize(
    "configs",
    [
        {"no.such.config": "1"},
        {"retention.ms": "abc"},
        {"cleanup.policy": "bogus"},
        {"max.message.bytes": "-5"},
        {"retention.ms": None},
        {"compression.type": "brotli"},
        {"min.insync.replicas": "0"},
    ],
    ids=["unknown", "not-a-number", "bad-enum", "negative", "null", "bad-codec", "min-isr-0"],
)
def test_a_bad_config(pair: Pair, name: Callable[[str], str], configs: dict[str, str | None]) -> None:
    ak, kl = pair.both(19, 7, create_topics_body([topic_spec(name(), 1, configs)]))
    assert_same(ak, kl, NO_CONFIG_LIST)


@pytest.mark.parametrize("rf", [3, 0, -2])
def test_a_replication_factor_that_cannot_be(pair: Pair, name: Callable[[str], str], rf: int) -> None:
    ak, kl = pair.both(19, 7, create_topics_body([topic_spec(name(), 1, rf=rf)]))
    assert_same(ak, kl, NO_CONFIG_LIST)


@pytest.mark.parametrize("partitions", [0, -2])
def test_a_partition_count_that_cannot_be(pair: Pair, name: Callable[[str], str], partitions: int) -> None:
    ak, kl = pair.both(19, 7, create_topics_body([topic_spec(name(), partitions)]))
    assert_same(ak, kl, NO_CONFIG_LIST)


def test_defaults_for_partitions_and_replication(pair: Pair, name: Callable[[str], str]) -> None:
    ak, kl = pair.both(19, 7, create_topics_body([topic_spec(name(), -1, rf=-1)]))
    assert_same(ak, kl, NO_CONFIG_LIST)


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7])
def test_validate_only_creates_nothing(pair: Pair, name: Callable[[str], str], version: int) -> None:
    topic = name()
    ak, kl = pair.both(19, version, create_topics_body([topic_spec(topic, 4, {"retention.ms": "60000"})], True))
    assert_same(ak, kl, NO_CONFIG_LIST)
    meta = {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False}
    ak, kl = pair.both(3, 9, meta)
    assert_same(ak, kl, ("controller_id",))
