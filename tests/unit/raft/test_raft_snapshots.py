"""Snapshots (KIP-630) step by step: the log before a snapshot is deleted, a fetch the log can no
longer answer gets the snapshot's id, FetchSnapshot serves it in chunks, and a follower installs it
and fetches on from its end."""

from __future__ import annotations

import pytest
from rafttest_harness import CLUSTER, Harness, elect, fetch_ok, fill_log, only, partition

from kafkalike.protocol.api import RequestHeader, decode_request, decode_response, encode_request, encode_response
from kafkalike.protocol.errors import ErrorCode
from kafkalike.raft import messages as m
from kafkalike.raft.config import VoterKey
from kafkalike.raft.log import MemoryRaftLog, OffsetAndEpoch
from kafkalike.raft.state import QuorumStateRecord, Role


def committed_leader(records: int = 6, **config: object) -> Harness:
    """Node 1 leading epoch 1 with LeaderChange at 0, ``records`` one-record batches after it, all
    committed by node 2."""
    h = Harness(**config)  # type: ignore[arg-type]
    elect(h)
    for _ in range(records):
        h.node.append([b"r"], h.now)
    h.settle()
    only(h.fetch(2, 1, h.log.end_offset, 1), m.FETCH, 2)
    assert h.node.high_watermark == h.log.end_offset
    return h


def snapshot_request(h: Harness, snapshot: OffsetAndEpoch, position: int, max_bytes: int = 1 << 20) -> dict:
    body = m.fetch_snapshot_request(CLUSTER, VoterKey(3), 1, (snapshot.offset, snapshot.epoch), position, max_bytes)
    return partition(only(h.deliver(3, m.FETCH_SNAPSHOT, body), m.FETCH_SNAPSHOT, 3))


# -- the log --------------------------------------------------------------------------------------


def test_deleting_before_a_snapshot_moves_the_log_start() -> None:
    log = MemoryRaftLog()
    fill_log(log, [(1, 3), (2, 3)])  # 0-2 in epoch 1, 3-5 in epoch 2
    log.create_snapshot(OffsetAndEpoch(4, 2), b"state")
    log.delete_before_snapshot(OffsetAndEpoch(4, 2))
    assert (log.start_offset, log.end_offset, log.earliest_snapshot_id()) == (4, 6, OffsetAndEpoch(4, 2))
    assert log.read(2, 1 << 20) == b""
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(6, 2)  # epoch 2 runs on past the cut
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(4, 2)  # before the log: the snapshot
    log.truncate_to(0)  # never below the start
    assert (log.start_offset, log.end_offset, log.last_fetched_epoch()) == (4, 4, 2)


def test_installing_a_snapshot_past_the_log_restarts_it_there() -> None:
    log = MemoryRaftLog()
    fill_log(log, [(1, 2)])
    assert log.install_snapshot(OffsetAndEpoch(10, 3), b"state") is True
    assert (log.start_offset, log.end_offset, log.durable_end_offset, log.last_fetched_epoch()) == (10, 10, 10, 3)
    behind = MemoryRaftLog()
    fill_log(behind, [(3, 12)])
    assert behind.install_snapshot(OffsetAndEpoch(10, 3), b"state") is False  # the log already has it all
    assert (behind.start_offset, behind.end_offset) == (0, 12)


def test_snapshot_only_of_committed_records_at_a_batch_end() -> None:
    h = committed_leader()
    h.node.append([b"uncommitted"], h.now)
    h.settle()
    with pytest.raises(ValueError):
        h.node.snapshot(h.log.end_offset, b"state", h.now)
    snapshot_id = h.node.snapshot(5, b"state", h.now)
    assert snapshot_id == OffsetAndEpoch(5, 1)
    assert h.log.start_offset == 5


# -- the leader -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "last_epoch"),
    [
        (0, 0),  # an empty log: always the snapshot (quicker than the whole log)
        (3, 1),  # before the log start
        (5, 0),  # at the log start, in another epoch than the snapshot's
    ],
)
def test_fetch_the_log_cannot_answer_gets_the_snapshot_id(offset: int, last_epoch: int) -> None:
    h = committed_leader()
    h.node.snapshot(5, b"state", h.now)
    p = partition(only(h.fetch(3, 1, offset, last_epoch), m.FETCH, 3))
    assert (p["error_code"], p["snapshot_id"]) == (ErrorCode.NONE, {"end_offset": 5, "epoch": 1})
    assert not p["records"]
    assert p["log_start_offset"] == 5


def test_fetch_from_the_snapshot_end_gets_records() -> None:
    h = committed_leader()
    h.node.snapshot(5, b"state", h.now)
    p = partition(only(h.fetch(3, 1, 5, 1), m.FETCH, 3))
    assert p["snapshot_id"]["end_offset"] == -1
    assert bytes(p["records"]) == h.log.read(5, 1 << 20)


def test_fetch_snapshot_serves_chunks() -> None:
    data = bytes(range(256)) * 4
    h = committed_leader()
    snapshot = h.node.snapshot(5, data, h.now)
    first = snapshot_request(h, snapshot, 0, max_bytes=300)
    assert (first["error_code"], first["size"], first["position"]) == (ErrorCode.NONE, len(data), 0)
    assert bytes(first["unaligned_records"]) == data[:300]
    last = snapshot_request(h, snapshot, 900, max_bytes=300)
    assert bytes(last["unaligned_records"]) == data[900:]
    assert first["current_leader"] == {"leader_id": 1, "leader_epoch": 1}


def test_fetch_snapshot_errors() -> None:
    h = committed_leader()
    snapshot = h.node.snapshot(5, b"state", h.now)
    assert snapshot_request(h, OffsetAndEpoch(4, 1), 0)["error_code"] == ErrorCode.SNAPSHOT_NOT_FOUND
    assert snapshot_request(h, snapshot, 5)["error_code"] == ErrorCode.POSITION_OUT_OF_RANGE
    follower = Harness()
    follower.begin_epoch(3, 1)
    follower.settle()
    body = m.fetch_snapshot_request(CLUSTER, VoterKey(2), 1, (5, 1), 0, 100)
    p = partition(only(follower.deliver(2, m.FETCH_SNAPSHOT, body), m.FETCH_SNAPSHOT, 2))
    assert p["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p["current_leader"] == {"leader_id": 3, "leader_epoch": 1}


def test_fetch_snapshot_messages_survive_the_wire() -> None:
    request = m.fetch_snapshot_request(CLUSTER, VoterKey(2), 1, (5, 1), 0, 100)
    header, decoded = decode_request(encode_request(RequestHeader(m.FETCH_SNAPSHOT, 1, 1, "node-2"), request)[4:])
    (wanted,) = decoded.topics[0].partitions
    assert (header.api_key, decoded.replica_id, decoded.max_bytes) == (m.FETCH_SNAPSHOT, 2, 100)
    assert (wanted.snapshot_id.end_offset, wanted.snapshot_id.epoch, wanted.position) == (5, 1, 0)

    response = m.fetch_snapshot_response(ErrorCode.NONE, 1, 1, (5, 1), 9, 0, b"abc")
    _, answer = decode_response(m.FETCH_SNAPSHOT, 1, encode_response(m.FETCH_SNAPSHOT, 1, 1, response)[4:])
    (chunk,) = answer.topics[0].partitions
    assert (chunk.snapshot_id.end_offset, chunk.size, chunk.position, bytes(chunk.unaligned_records)) == (
        5,
        9,
        0,
        b"abc",
    )
    assert (chunk.current_leader.leader_id, chunk.current_leader.leader_epoch) == (1, 1)


# -- the follower ---------------------------------------------------------------------------------


def test_follower_downloads_the_snapshot_then_fetches_from_its_end() -> None:
    data = b"0123456789" * 5
    h = Harness(fetch_max_bytes=20)
    h.begin_epoch(3, 1)
    fetch = only(h.settle(), m.FETCH, 3)
    sent = h.respond(fetch, fetch_ok(1, 3, 40, snapshot=(30, 1)))
    for position in (0, 20, 40):
        request = only(sent, m.FETCH_SNAPSHOT, 3)
        p = partition(request)
        assert (p["position"], p["snapshot_id"]) == (position, {"end_offset": 30, "epoch": 1})
        chunk = data[position : position + 20]
        sent = h.respond(request, m.fetch_snapshot_response(ErrorCode.NONE, 1, 3, (30, 1), len(data), position, chunk))
    assert h.log.read_snapshot(OffsetAndEpoch(30, 1)) == data
    assert (h.log.start_offset, h.log.end_offset, h.node.high_watermark) == (30, 30, 30)
    nxt = partition(only(sent, m.FETCH, 3))
    assert (nxt["fetch_offset"], nxt["last_fetched_epoch"]) == (30, 1)
    assert h.node.role is Role.FOLLOWER


def test_snapshot_gone_from_the_leader_means_fetch_again() -> None:
    h = Harness()
    h.begin_epoch(3, 1)
    fetch = only(h.settle(), m.FETCH, 3)
    request = only(h.respond(fetch, fetch_ok(1, 3, 40, snapshot=(30, 1))), m.FETCH_SNAPSHOT, 3)
    sent = h.respond(request, m.fetch_snapshot_response(ErrorCode.SNAPSHOT_NOT_FOUND, 1, 3))
    assert partition(only(sent, m.FETCH, 3))["fetch_offset"] == 0
    assert h.log.latest_snapshot_id() is None


def test_restart_after_installing_starts_from_the_snapshot() -> None:
    log = MemoryRaftLog()
    log.install_snapshot(OffsetAndEpoch(30, 2), b"state")
    h = Harness(log=log, quorum_state=QuorumStateRecord(2, 3, None))
    fetch = partition(only(h.advance(0), m.FETCH, 3))
    assert (fetch["fetch_offset"], fetch["last_fetched_epoch"]) == (30, 2)
