"""DescribeConfigs of a topic: every default and override, with sources, synonyms and types; and
the configs CreateTopics v5+ reports for a new topic."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from compat_tests.differential.compare import differences
from compat_tests.differential.conftest import (
    AK_BEFORE_4_1,
    CONFIGS_SINCE_4_1,
    Pair,
    assert_same,
    create_topics_body,
    topic_spec,
)

pytestmark = pytest.mark.differential

TOPIC, BROKER = 2, 4
OVERRIDES = {"retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "65536"}
# What kafkalike reports and a 4.0 broker does not have (4.1+ configs).
NOT_IN_THE_RELEASE = CONFIGS_SINCE_4_1 if AK_BEFORE_4_1 else frozenset()


def describe_body(
    resource_type: int, name: str, keys: list[str] | None = None, synonyms: bool = True
) -> dict[str, Any]:
    return {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": synonyms,
        "include_documentation": False,
    }


def by_name(configs: Any) -> dict[str, Any]:
    return {c.name: c for c in configs}


@pytest.fixture
def topic(pair: Pair, name: Callable[[str], str]) -> str:
    topic = name()
    pair.create_topic(topic, 1, OVERRIDES)
    return topic


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_the_configs_both_know_match(pair: Pair, topic: str, version: int) -> None:
    """Every config kafkalike reports: the same value, source, flags, synonyms and type as Kafka's."""
    ak, kl = pair.both(32, version, describe_body(TOPIC, topic))
    ak_configs, kl_configs = by_name(ak.results[0].configs), by_name(kl.results[0].configs)
    found = []
    for key, config in kl_configs.items():
        if key in NOT_IN_THE_RELEASE:
            continue
        if key not in ak_configs:
            found.append(f"{key}: Apache Kafka has no such topic config")
            continue
        found += [f"{key}: {line}" for line in differences(ak_configs[key], config)]
    assert not found, "\n".join(found)
    assert (ak.results[0].error_code, kl.results[0].error_code) == (0, 0)


def test_every_topic_config_is_reported(pair: Pair, topic: str) -> None:
    ak, kl = pair.both(32, 4, describe_body(TOPIC, topic))
    missing = sorted(set(by_name(ak.results[0].configs)) - set(by_name(kl.results[0].configs)))
    assert not missing, f"topic configs Apache Kafka reports and kafkalike does not: {missing}"


@pytest.mark.parametrize("version", [1, 4])
def test_chosen_keys(pair: Pair, topic: str, version: int) -> None:
    keys = ["retention.ms", "cleanup.policy", "segment.bytes", "min.insync.replicas", "compression.type"]
    ak, kl = pair.both(32, version, describe_body(TOPIC, topic, keys))
    assert_same(ak, kl)


def test_an_unknown_topic(pair: Pair, name: Callable[[str], str]) -> None:
    ak, kl = pair.both(32, 4, describe_body(TOPIC, name("missing")))
    assert_same(ak, kl)


def test_the_cluster_default_broker_resource(pair: Pair) -> None:
    """The empty broker name: dynamic cluster-wide defaults only, none on a fresh cluster."""
    ak, kl = pair.both(32, 4, describe_body(BROKER, ""))
    assert_same(ak, kl)


def test_the_configs_a_created_topic_reports(pair: Pair, name: Callable[[str], str]) -> None:
    """CreateTopics v5+: for the configs kafkalike lists, the same values and sources as Kafka's."""
    ak, kl = pair.both(19, 7, create_topics_body([topic_spec(name(), 2, {"retention.ms": "60000"})]))
    assert_same(ak, kl, ("topics[].configs",))
    ak_configs, kl_configs = by_name(ak.topics[0].configs), by_name(kl.topics[0].configs)
    found = []
    for key, config in kl_configs.items():
        if key in NOT_IN_THE_RELEASE:
            continue
        if key not in ak_configs:
            found.append(f"{key}: Apache Kafka lists no such config")
            continue
        found += [f"{key}: {line}" for line in differences(ak_configs[key], config)]
    assert not found, "\n".join(found)


def test_a_created_topic_reports_every_config(pair: Pair, name: Callable[[str], str]) -> None:
    ak, kl = pair.both(19, 7, create_topics_body([topic_spec(name(), 1)]))
    missing = sorted(set(by_name(ak.topics[0].configs)) - set(by_name(kl.topics[0].configs)))
    assert not missing, f"configs Apache Kafka lists for a new topic and kafkalike does not: {missing}"
