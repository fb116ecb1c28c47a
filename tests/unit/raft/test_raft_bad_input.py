"""Whatever a peer sends, a node answers each request once, with an error code when it must, and
never raises: epochs, offsets and ids drawn at random against a node in each role."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rafttest_harness import CLUSTER, Harness, elect

from kafkalike.raft import messages as m
from kafkalike.raft.config import VoterKey

small = st.integers(min_value=-3, max_value=12)
ids = st.integers(min_value=-2, max_value=5)


def node_in(role: str) -> Harness:
    h = Harness()
    if role == "follower":
        h.begin_epoch(3, 2)
        h.settle()
    elif role == "leader":
        elect(h)
        h.settle()
    return h


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, int, m.Body]:
    api_key = draw(st.sampled_from([m.VOTE, m.BEGIN_QUORUM_EPOCH, m.END_QUORUM_EPOCH, m.FETCH]))
    source = draw(st.integers(min_value=2, max_value=5))
    cluster = draw(st.sampled_from([CLUSTER, None, "another"]))
    epoch, offset, last_epoch, peer = draw(small), draw(small), draw(small), draw(ids)
    if api_key == m.VOTE:
        body = m.vote_request(
            cluster, VoterKey(peer), epoch, VoterKey(draw(ids)), last_epoch, offset, draw(st.booleans())
        )
    elif api_key == m.BEGIN_QUORUM_EPOCH:
        body = m.begin_quorum_epoch_request(cluster, peer, epoch, VoterKey(1))
    elif api_key == m.END_QUORUM_EPOCH:
        body = m.end_quorum_epoch_request(cluster, peer, epoch, [VoterKey(i) for i in draw(st.lists(ids, max_size=3))])
    else:
        max_wait = draw(st.sampled_from([0, 100, -1]))
        body = m.fetch_request(cluster, VoterKey(source), epoch, offset, last_epoch, max_wait, 1 << 20)
    if draw(st.booleans()):
        body = {**body, "topics": draw(st.sampled_from([[], body["topics"] * 2]))}  # not exactly one partition
    return api_key, source, body


@settings(max_examples=400, deadline=None)
@given(role=st.sampled_from(["unattached", "follower", "leader"]), request=requests())
def test_every_request_gets_one_answer(role: str, request: tuple[int, int, m.Body]) -> None:
    api_key, source, body = request
    h = node_in(role)
    before = len(h.sent)
    h.deliver(source, api_key, body)
    cid = h._cid
    h.settle()
    h.advance(200)  # a parked fetch is answered by its deadline
    h.settle()
    answers = [x for x in h.sent[before:] if x.is_response and x.correlation_id == cid and x.destination == source]
    assert len(answers) == 1, [str(x) for x in h.sent[before:]]
    assert answers[0].api_key == api_key
