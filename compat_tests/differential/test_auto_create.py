"""Metadata auto-creating topics, on a pair of brokers of its own (auto.create.topics.enable=true):
unknown at first and there once created, and nothing created past one operation's bound."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from compat_tests.differential.conftest import SETTINGS, Pair, Side, assert_same, running_pair

pytestmark = pytest.mark.differential


@pytest.fixture(scope="module")
def auto_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    settings = {**SETTINGS, "auto.create.topics.enable": "true"}
    with running_pair(tmp_path_factory.mktemp("differential-auto"), settings, "differential-auto") as pair:
        yield pair


def _metadata(names: list[str]) -> dict[str, Any]:
    return {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": True}


def _wait_known(side: Side, topic: str, timeout_s: float = 60.0) -> None:
    """Until Metadata lists the topic without an error (asked without creating it again)."""
    deadline = time.monotonic() + timeout_s
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    while side.request(3, 9, body).topics[0].error_code != 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic} not created on {side.name}")
        time.sleep(0.1)


def test_auto_creation_answers_unknown_then_the_topic(auto_pair: Pair, name: Callable[[str], str]) -> None:
    names = [name(str(i)) for i in range(3)]
    ak, kl = auto_pair.both(3, 9, _metadata(names))
    assert_same(ak, kl, ("controller_id",))
    assert {t.error_code for t in kl.topics} == {3}
    for side in (auto_pair.ak, auto_pair.kl):
        for topic in names:
            _wait_known(side, topic)
    ak, kl = auto_pair.both(3, 9, _metadata(names))
    assert_same(ak, kl, ("controller_id",))


def test_auto_creation_of_more_than_one_operation_holds_creates_nothing(
    auto_pair: Pair, name: Callable[[str], str]
) -> None:
    many = [name(f"many-{i}") for i in range(6000)]  # 6,000 partitions, but 12,000 records
    ak, kl = auto_pair.both(3, 9, _metadata(many))
    assert_same(ak, kl, ("controller_id",))
    # Auto-creations are handled in order on both: once a later one is done, this one was too.
    sentinel = name("sentinel")
    auto_pair.both(3, 9, _metadata([sentinel]))
    for side in (auto_pair.ak, auto_pair.kl):
        _wait_known(side, sentinel)
    body = {"topics": [{"name": n} for n in many], "allow_auto_topic_creation": False}
    ak, kl = auto_pair.both(3, 9, body)
    assert_same(ak, kl, ("controller_id",))
    assert {t.error_code for t in kl.topics} == {3}
