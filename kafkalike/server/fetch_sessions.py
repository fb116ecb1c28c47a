"""Incremental fetch sessions (KIP-227) for followers' fetches, as Kafka's FetchSession.scala.

A follower's full fetch with session epoch 0 opens a session: the leader keeps each partition's
fetch parameters and the high watermark and log start it last answered. Each later fetch of the
session (epoch 1, 2, ...) names only the partitions whose parameters changed (and the ones to
forget); the leader reads every partition of the session, and answers only those with records,
an error, a diverging epoch, or a high watermark or log start other than it last answered.
With many partitions and few of them moving, a fetch costs what moves, not what is followed.

Only replica fetches (v13+, topic ids) get sessions; a consumer's fetch is answered sessionless
(session id 0), which every client accepts by sending full fetches, as Kafka answers when its
cache has no slot. At most ``max.incremental.fetch.session.cache.slots`` sessions are kept; the
least recently used goes first.
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
PartitionKey = tuple[uuid.UUID, int]


class SessionTopic(NamedTuple):
    """A topic of the session as the fetch handler reads it (a request's topic, in effect)."""

    topic: str
    topic_id: uuid.UUID
    partitions: list[Message]


@dataclass(slots=True)
class CachedPartition:
    request: Message  # the partition's fetch parameters, as the follower last sent them
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_answer(self, entry: dict[str, Any]) -> bool:
        """Kafka's maybeUpdateResponseData: whether an incremental answer includes the
        partition, the cached offsets updated to what it answers."""
        must = bool(entry["records"]) or "diverging_epoch" in entry
        if entry["high_watermark"] != self.high_watermark:
            self.high_watermark = entry["high_watermark"]
            must = True
        if entry["log_start_offset"] != self.log_start_offset:
            self.log_start_offset = entry["log_start_offset"]
            must = True
        if entry["error_code"] != ErrorCode.NONE:
            self.high_watermark = -1  # sent again once the error is gone
            must = True
        return must


@dataclass(slots=True)
class FetchSession:
    session_id: int
    replica_id: int
    next_epoch: int = 1
    partitions: OrderedDict[PartitionKey, CachedPartition] = field(default_factory=OrderedDict)

    def update(self, topics: Iterable[Message], forgotten: Iterable[Message]) -> None:
        for topic in topics:
            for part in topic.partitions:
                key = (topic.topic_id, part.partition)
                cached = self.partitions.get(key)
                if cached is None:
                    self.partitions[key] = CachedPartition(part)
                else:
                    cached.request = part
        for topic in forgotten:
            for index in topic.partitions:
                self.partitions.pop((topic.topic_id, index), None)

    def topics(self) -> list[SessionTopic]:
        """Every partition of the session, grouped by topic as a request would have them."""
        by_topic: dict[uuid.UUID, SessionTopic] = {}
        for (topic_id, _), cached in self.partitions.items():
            topic = by_topic.get(topic_id)
            if topic is None:
                topic = by_topic[topic_id] = SessionTopic("", topic_id, [])
            topic.partitions.append(cached.request)
        return list(by_topic.values())

    def remember(self, responses: list[dict[str, Any]]) -> None:
        """A full answer: every partition's answered offsets kept."""
        for topic in responses:
            for entry in topic["partitions"]:
                cached = self.partitions.get((topic["topic_id"], entry["partition_index"]))
                if cached is not None:
                    cached.must_answer(entry)

    def changed(self, responses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """An incremental answer: only the partitions that must be answered."""
        out = []
        for topic in responses:
            kept = []
            for entry in topic["partitions"]:
                cached = self.partitions.get((topic["topic_id"], entry["partition_index"]))
                if cached is None or cached.must_answer(entry):
                    kept.append(entry)
            if kept:
                out.append({**topic, "partitions": kept})
        return out


class FetchSessions:
    """The broker's fetch session cache."""

    def __init__(self, slots: int, rng: random.Random | None = None) -> None:
        self.slots = slots
        self._rng = rng or random.Random()
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, replica_id: int, topics: Iterable[Message]) -> FetchSession | None:
        """A new session for a full fetch with epoch 0; None when there are no slots."""
        if self.slots <= 0:
            return None
        while len(self._sessions) >= self.slots:
            self._sessions.popitem(last=False)
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = self._rng.randrange(1, 2**31)
        session = self._sessions[session_id] = FetchSession(session_id, replica_id)
        session.update(topics, ())
        return session

    def close(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def incremental(
        self, session_id: int, epoch: int, replica_id: int, topics: Iterable[Message], forgotten: Iterable[Message]
    ) -> FetchSession | ErrorCode:
        """The session a fetch with epoch > 0 continues, updated by it; or Kafka's error."""
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if session.next_epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        self._sessions.move_to_end(session_id)
        session.next_epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        session.update(topics, forgotten)
        return session
