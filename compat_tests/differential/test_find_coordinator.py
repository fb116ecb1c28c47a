"""FindCoordinator before and after the internal topics exist, on a fresh pair of brokers: the
first lookup of a group (and of a transactional id) asks for ``__consumer_offsets``
(``__transaction_state``) in the background and answers COORDINATOR_NOT_AVAILABLE with no node,
as Kafka's KafkaApis.getCoordinator does; once the topic is made the broker names itself."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from compat_tests.differential.conftest import SETTINGS, Pair, Side, assert_same, running_pair

pytestmark = pytest.mark.differential

COORDINATOR_NOT_AVAILABLE = 15
WAIT_S = 60.0
# The coordinator is each broker itself, at its own address.
ADDRESS = ("host", "port", "coordinators[].host", "coordinators[].port")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """A pair no group or transaction has used yet (the session's pair may have made the topics)."""
    with running_pair(tmp_path_factory.mktemp("find-coordinator"), SETTINGS, "find-coordinator") as pair:
        yield pair


def errors(answer: Any) -> list[int]:
    if answer.get("coordinators"):
        return [c.error_code for c in answer.coordinators]
    return [answer.error_code]


def until_found(side: Side, version: int, body: dict[str, Any]) -> Any:
    """Asked again, as a client does after COORDINATOR_NOT_AVAILABLE, until the topic is made."""
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = side.request(10, version, body)
        if COORDINATOR_NOT_AVAILABLE not in errors(answer):
            return answer
        assert time.monotonic() < deadline, f"{side.name}: still no coordinator: {answer}"
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("first", "later"),
    [
        ((3, {"key": "g", "key_type": 0}), (4, {"key_type": 0, "coordinator_keys": ["g", "h"]})),
        ((4, {"key_type": 1, "coordinator_keys": ["tx-a", "tx-b"]}), (3, {"key": "tx-a", "key_type": 1})),
    ],
    ids=["group", "transaction"],
)
def test_first_and_later_answers(fresh: Pair, first: tuple[int, dict[str, Any]], later: tuple[int, Any]) -> None:
    ak, kl = fresh.both(10, *first)
    assert_same(ak, kl)
    assert errors(kl) == errors(ak) and set(errors(kl)) == {COORDINATOR_NOT_AVAILABLE}
    found = [until_found(side, *later) for side in (fresh.ak, fresh.kl)]
    assert_same(*found, ADDRESS)
    assert set(errors(found[1])) == {0}
    # And the first request's keys, now.
    ak, kl = fresh.both(10, *first)
    assert_same(ak, kl, ADDRESS)
    assert set(errors(kl)) == {0}
