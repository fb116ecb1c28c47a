"""The transition table: every legal transition is prepared and applied, every other refused."""

from __future__ import annotations

import itertools

import pytest

from kafkalike.txn.metadata import TxnMetadata
from kafkalike.txn.state import VALID_PREVIOUS_STATES, IllegalTransition, TxnState

S = TxnState
TARGETS = {
    S.EMPTY: lambda m: m.prepare_increment_epoch(60_000, None, 5),
    S.ONGOING: lambda m: m.prepare_add_partitions(frozenset({("t", 0)}), 5),
    S.PREPARE_COMMIT: lambda m: m.prepare_end(True, 5),
    S.PREPARE_ABORT: lambda m: m.prepare_end(False, 5),
    S.COMPLETE_COMMIT: lambda m: m.prepare_complete(5),
    S.COMPLETE_ABORT: lambda m: m.prepare_complete(5),
    S.DEAD: lambda m: m.prepare_dead(),
    S.PREPARE_EPOCH_FENCE: lambda m: m.prepare_fence_epoch(),
}


def _metadata(state: TxnState) -> TxnMetadata:
    partitions = {("t", 0)} if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT) else set()
    return TxnMetadata("id", 7, producer_epoch=3, state=state, partitions=partitions, start_ms=1, last_update_ms=1)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(TxnState, TxnState)))
def test_transition_table(source: TxnState, target: TxnState) -> None:
    metadata = _metadata(source)
    prepare = TARGETS[target]
    if target in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and source in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        # One entry point for both: it completes whichever the prepare state says.
        target = S.COMPLETE_COMMIT if source is S.PREPARE_COMMIT else S.COMPLETE_ABORT
    if source not in VALID_PREVIOUS_STATES[target]:
        with pytest.raises(IllegalTransition):
            prepare(metadata)
        assert metadata.pending_state is None
        return
    transit = prepare(metadata)
    assert transit.state is target and metadata.pending_state is target
    if target in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        with pytest.raises(IllegalTransition):  # never applied: removal, or an abort instead
            metadata.complete_transition(transit)
        return
    metadata.complete_transition(transit)
    assert metadata.state is target and metadata.pending_state is None


def test_a_second_prepare_while_one_is_pending_is_refused() -> None:
    metadata = _metadata(S.ONGOING)
    metadata.prepare_end(True, 5)
    with pytest.raises(IllegalTransition):
        metadata.prepare_end(False, 5)


def test_completing_a_transit_that_is_not_the_pending_one_is_refused() -> None:
    metadata = _metadata(S.ONGOING)
    transit = metadata.prepare_end(True, 5)
    metadata.abandon_transition()
    with pytest.raises(IllegalTransition):
        metadata.complete_transition(transit)


def test_state_ids_and_names_are_kafkas() -> None:
    assert [(s.id, s.display_name) for s in TxnState] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert TxnState.from_id(3) is S.PREPARE_ABORT and TxnState.from_name("Ongoing") is S.ONGOING
    assert TxnState.from_name("ongoing") is None
