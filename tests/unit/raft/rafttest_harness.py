"""One RaftNode driven by hand, in the style of Kafka's RaftClientTestContext: deliver a message,
move the clock, read what the node sent, complete its disk writes."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from kafkalike.protocol.errors import ErrorCode
from kafkalike.raft import messages as m
from kafkalike.raft.config import QuorumConfig, VoterKey
from kafkalike.raft.log import MemoryRaftLog
from kafkalike.raft.node import FlushLog, PersistQuorumState, RaftNode, SendMessage
from kafkalike.raft.records import data_batch
from kafkalike.raft.state import QuorumStateRecord, Role

CLUSTER = "test-cluster"


class Harness:
    def __init__(
        self,
        node_id: int = 1,
        voters: Iterable[int] = (1, 2, 3),
        *,
        pre_vote: bool = True,
        seed: int = 1,
        quorum_state: QuorumStateRecord | None = None,
        log: MemoryRaftLog | None = None,
        **config: Any,
    ) -> None:
        self.now = 0
        self.log = log if log is not None else MemoryRaftLog()
        self.config = QuorumConfig(voters=tuple(VoterKey(v) for v in voters), pre_vote=pre_vote, **config)
        self.node = RaftNode(
            node_id, self.config, self.log, random.Random(seed), 0, cluster_id=CLUSTER, quorum_state=quorum_state
        )
        self.sent: list[m.RaftMessage] = []
        self.persisted: list[QuorumStateRecord] = []
        self.flushes: list[int] = []
        self._pending_state: list[int] = []
        self._cid = 1000
        self.collect()

    # -- driving ----------------------------------------------------------------------------------

    def collect(self) -> list[m.RaftMessage]:
        """Drain the node's outputs; returns the messages it sent just now."""
        new = []
        for out in self.node.outputs():
            if isinstance(out, SendMessage):
                new.append(out.message)
            elif isinstance(out, PersistQuorumState):
                self.persisted.append(out.state)
                self._pending_state.append(out.version)
            elif isinstance(out, FlushLog):
                self.flushes.append(out.end_offset)
        self.sent += new
        return new

    def persist(self) -> list[m.RaftMessage]:
        """Complete every quorum-state write; returns the messages released by it."""
        released = []
        while self._pending_state:
            self.node.quorum_state_durable(self._pending_state.pop(0), self.now)
            released += self.collect()
        return released

    def flush(self) -> list[m.RaftMessage]:
        self.log.flush(self.log.end_offset)
        self.node.durable(self.log.end_offset, self.now)
        return self.collect()

    def settle(self) -> list[m.RaftMessage]:
        """Complete all disk writes, as many rounds as they take."""
        out = []
        for _ in range(10):
            step = self.persist() + self.flush()
            if not step and not self._pending_state:
                break
            out += step
        return out + self.collect()

    def advance(self, ms: int) -> list[m.RaftMessage]:
        self.now += ms
        self.node.tick(self.now)
        return self.collect()

    def run_to_deadline(self) -> list[m.RaftMessage]:
        self.now = max(self.now, self.node.poll(self.now))
        self.node.tick(self.now)
        return self.collect()

    def deliver(self, source: int, api_key: int, body: m.Body) -> list[m.RaftMessage]:
        self._cid += 1
        self.node.receive(m.RaftMessage(source, self.node.node_id, api_key, self._cid, body), self.now)
        return self.collect()

    def respond(self, request: m.RaftMessage, body: m.Body) -> list[m.RaftMessage]:
        response = m.RaftMessage(
            request.destination, request.source, request.api_key, request.correlation_id, body, True
        )
        self.node.receive(response, self.now)
        return self.collect()

    # -- message shortcuts ------------------------------------------------------------------------

    def vote(
        self,
        candidate: int,
        epoch: int,
        *,
        last_epoch: int = 0,
        last_offset: int = 0,
        pre_vote: bool = False,
        cluster_id: str | None = CLUSTER,
    ) -> list[m.RaftMessage]:
        body = m.vote_request(
            cluster_id, VoterKey(candidate), epoch, VoterKey(self.node.node_id), last_epoch, last_offset, pre_vote
        )
        return self.deliver(candidate, m.VOTE, body)

    def begin_epoch(self, leader: int, epoch: int) -> list[m.RaftMessage]:
        body = m.begin_quorum_epoch_request(CLUSTER, leader, epoch, VoterKey(self.node.node_id))
        return self.deliver(leader, m.BEGIN_QUORUM_EPOCH, body)

    def end_epoch(self, leader: int, epoch: int, successors: list[int]) -> list[m.RaftMessage]:
        body = m.end_quorum_epoch_request(CLUSTER, leader, epoch, [VoterKey(s) for s in successors])
        return self.deliver(leader, m.END_QUORUM_EPOCH, body)

    def fetch(
        self,
        replica: int,
        epoch: int,
        offset: int,
        last_epoch: int,
        max_wait_ms: int = 0,
        high_watermark: int | None = m.UNKNOWN_HIGH_WATERMARK,
    ) -> list[m.RaftMessage]:
        """``high_watermark``: what the sender knows; by default none is news to it (as before v18)."""
        body = m.fetch_request(
            CLUSTER, VoterKey(replica), epoch, offset, last_epoch, max_wait_ms, 1 << 20, high_watermark
        )
        return self.deliver(replica, m.FETCH, body)


def vote_granted(epoch: int, leader_id: int = -1, granted: bool = True) -> dict[str, Any]:
    return m.vote_response(ErrorCode.NONE, epoch, leader_id, granted)


def fetch_ok(
    epoch: int,
    leader: int,
    hw: int,
    records: bytes = b"",
    diverging: tuple[int, int] | None = None,
    snapshot: tuple[int, int] | None = None,
) -> dict[str, Any]:
    return m.fetch_response(ErrorCode.NONE, epoch, leader, hw, 0, records, diverging, snapshot)


def partition(message: m.RaftMessage) -> Any:
    p = m.partition_of(message.body)
    assert p is not None, message.body
    return p


def only(messages: list[m.RaftMessage], api_key: int, destination: int | None = None) -> m.RaftMessage:
    matching = [x for x in messages if x.api_key == api_key and destination in (None, x.destination)]
    assert len(matching) == 1, [str(x) for x in messages]
    return matching[0]


def fill_log(log: MemoryRaftLog, epochs: Iterable[tuple[int, int]]) -> None:
    """Append ``count`` one-record batches in ``epoch`` for each (epoch, count)."""
    for epoch, count in epochs:
        for _ in range(count):
            log.append(data_batch([b"x"], base_offset=log.end_offset, epoch=epoch, timestamp_ms=0))
    log.flush(log.end_offset)


def stored(h: Harness) -> QuorumStateRecord:
    return h.node.stored_state


def config_with(h: Harness, **changes: Any) -> QuorumConfig:
    return replace(h.config, **changes)


def vote_requests(sent: list[m.RaftMessage]) -> dict[int, m.RaftMessage]:
    return {x.destination: x for x in sent if x.api_key == m.VOTE and not x.is_response}


def elect(h: Harness) -> None:
    """Take node 1 of a three-voter quorum through pre-vote and vote to leadership."""
    pre_votes = vote_requests(h.run_to_deadline())
    h.respond(pre_votes[2], vote_granted(h.node.epoch))
    votes = vote_requests(h.persist())
    h.respond(votes[2], vote_granted(h.node.epoch))
    h.persist()
    assert h.node.role is Role.LEADER
