"""Metadata: a topic at every version, unknown topics with auto-creation off, invalid names, ids."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from compat_tests.differential.conftest import ZERO_UUID, Pair, Side, assert_same

pytestmark = pytest.mark.differential

# KRaft brokers name a random live broker as the controller; here both have one node.
BASE_IGNORE = ("controller_id",)


def body(names: list[str] | None, version: int, allow_auto: bool = True) -> Callable[[Side], dict[str, Any]]:
    def make(side: Side) -> dict[str, Any]:
        topics = None if names is None else [{"name": n, "topic_id": ZERO_UUID} for n in names]
        return {
            "topics": topics,
            "allow_auto_topic_creation": allow_auto,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }

    return make


@pytest.mark.parametrize("version", [0, 1, 2, 4, 5, 7, 8, 9, 10, 11, 12, 13])
def test_a_topic_at_every_version(pair: Pair, name: Callable[[str], str], version: int) -> None:
    topic = name()
    pair.create_topic(topic, 3)
    ak, kl = pair.both(3, version, body([topic], version))
    assert_same(ak, kl, BASE_IGNORE)


@pytest.mark.parametrize("allow_auto", [True, False])
@pytest.mark.parametrize("version", [1, 4, 12])
def test_an_unknown_topic_with_auto_creation_off(
    pair: Pair, name: Callable[[str], str], version: int, allow_auto: bool
) -> None:
    topic = name("missing")
    ak, kl = pair.both(3, version, body([topic], version, allow_auto))
    assert_same(ak, kl, BASE_IGNORE)
    # Neither created it.
    ak, kl = pair.both(3, 12, body([topic], 12, False))
    assert_same(ak, kl, BASE_IGNORE)


@pytest.mark.parametrize("bad", ["bad/name", "..", ".", "a" * 250, "with space", "", "tab\tname"])
def test_an_invalid_topic_name(pair: Pair, bad: str) -> None:
    ak, kl = pair.both(3, 12, body([bad], 12))
    assert_same(ak, kl, BASE_IGNORE)


def test_an_unknown_topic_id(pair: Pair) -> None:
    request = {"topics": [{"name": None, "topic_id": uuid.uuid4()}], "allow_auto_topic_creation": False}
    ak, kl = pair.both(3, 12, request)
    assert_same(ak, kl, (*BASE_IGNORE, "topics[].topic_id"))
    assert [t.error_code for t in ak.topics] == [t.error_code for t in kl.topics]


def test_a_topic_by_its_id(pair: Pair, name: Callable[[str], str]) -> None:
    topic = name()
    pair.create_topic(topic, 2)
    ak, kl = pair.both(3, 12, lambda side: {"topics": [{"name": None, "topic_id": side.topic_ids[topic]}],
                                            "allow_auto_topic_creation": False})  # fmt: skip
    assert_same(ak, kl, BASE_IGNORE)


def test_no_topics_and_all_topics(pair: Pair, name: Callable[[str], str]) -> None:
    pair.create_topic(name(), 1)
    ak, kl = pair.both(3, 12, body([], 12))
    assert_same(ak, kl, BASE_IGNORE)
    ak, kl = pair.both(3, 12, body(None, 12))
    # Every test's topics are on both brokers; compare the list of names.
    ak_names = sorted(t.name for t in ak.topics)
    kl_names = sorted(t.name for t in kl.topics)
    assert ak_names == kl_names
