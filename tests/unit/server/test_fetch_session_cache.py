"""Incremental fetch sessions (server/fetch_sessions.py, KIP-227), the leader's side as Kafka's
FetchSession.scala keeps them and the follower's as its FetchSessionHandler sends them."""

from __future__ import annotations

import random
import uuid
from types import SimpleNamespace
from typing import Any

from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.fetch_sessions import FetchSessions
from kafkalike.server.replication import FollowerSession

T = uuid.UUID(int=7)


def part(index: int, offset: int) -> Any:
    return SimpleNamespace(partition=index, fetch_offset=offset)


def topic(*parts: Any) -> Any:
    return SimpleNamespace(topic_id=T, partitions=list(parts))


def forgotten(*indexes: int) -> Any:
    return SimpleNamespace(topic_id=T, partitions=list(indexes))


def entry(index: int, hw: int, records: bytes = b"", error: int = 0, start: int = 0) -> dict[str, Any]:
    return {
        "partition_index": index,
        "high_watermark": hw,
        "log_start_offset": start,
        "records": records,
        "error_code": error,
    }


def answered(responses: list[dict[str, Any]]) -> list[int]:
    return [e["partition_index"] for t in responses for e in t["partitions"]]


def test_an_incremental_answer_has_only_the_partitions_that_moved() -> None:
    sessions = FetchSessions(10, random.Random(1))
    session = sessions.open(2, [topic(part(0, 5), part(1, 5), part(2, 5))])
    assert session is not None and session.session_id != 0
    session.remember([{"topic_id": T, "partitions": [entry(0, 5), entry(1, 5), entry(2, 5)]}])
    continued = sessions.incremental(session.session_id, 1, 2, [], [])
    assert continued is session
    full = [{"topic_id": T, "partitions": [entry(0, 5, b"new"), entry(1, 6), entry(2, 5)]}]
    # records, a moved high watermark: answered; nothing new: left out
    assert answered(session.changed(full)) == [0, 1]
    # what was answered is kept: the same offsets again are not news
    assert answered(session.changed([{"topic_id": T, "partitions": [entry(1, 6), entry(2, 5)]}])) == []
    # a log start that moved, and any error, are
    moved = [{"topic_id": T, "partitions": [entry(1, 6, start=3), entry(2, 5, error=6)]}]
    assert answered(session.changed(moved)) == [1, 2]


def test_an_incremental_fetch_updates_and_forgets_partitions() -> None:
    sessions = FetchSessions(10, random.Random(1))
    session = sessions.open(2, [topic(part(0, 5), part(1, 5))])
    assert session is not None
    sessions.incremental(session.session_id, 1, 2, [topic(part(1, 9), part(3, 0))], [forgotten(0)])
    reads = {p.partition: p.fetch_offset for t in session.topics() for p in t.partitions}
    assert reads == {1: 9, 3: 0}  # every partition of the session is read, at its last named offset


def test_the_epoch_and_the_session_id_are_checked() -> None:
    sessions = FetchSessions(10, random.Random(1))
    session = sessions.open(2, [topic(part(0, 5))])
    assert session is not None
    assert sessions.incremental(session.session_id, 2, 2, [], []) is ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert sessions.incremental(session.session_id, 1, 2, [], []) is session
    assert sessions.incremental(session.session_id, 1, 2, [], []) is ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert sessions.incremental(session.session_id, 2, 3, [], []) is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert sessions.incremental(session.session_id + 1, 2, 2, [], []) is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    sessions.close(session.session_id)
    assert sessions.incremental(session.session_id, 2, 2, [], []) is ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_the_least_recently_used_session_goes_when_the_slots_are_full() -> None:
    sessions = FetchSessions(2, random.Random(1))
    first, second = sessions.open(1, []), sessions.open(2, [])
    assert first is not None and second is not None
    assert sessions.incremental(first.session_id, 1, 1, [], []) is first  # used: second is the oldest now
    assert sessions.open(3, []) is not None
    assert len(sessions) == 2
    assert sessions.incremental(second.session_id, 1, 2, [], []) is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert FetchSessions(0).open(1, []) is None  # no slots: sessionless


def test_the_follower_continues_its_session_and_starts_again_after_an_error() -> None:
    session = FollowerSession()
    assert not session.incremental and session.epoch == 0
    session.answered(77, {(T, 0): (5, 1, 1, 0, 100)})
    assert (session.session_id, session.epoch, session.incremental) == (77, 1, True)
    session.answered(77, {(T, 0): (6, 1, 1, 0, 100)})
    assert session.epoch == 2 and session.held == {(T, 0): (6, 1, 1, 0, 100)}
    session.reset()
    assert (session.session_id, session.epoch, session.incremental) == (0, 0, False)
    session.answered(0, {})  # a leader that keeps no session: full fetches
    assert not session.incremental
