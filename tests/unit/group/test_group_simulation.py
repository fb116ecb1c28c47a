"""Seeded random runs of clients against the coordinator, with invariants checked after every step.

Each simulated client follows the classic consumer loop (join, sync, heartbeat, commit, leave)
and sometimes goes silent. After every step: the group's bookkeeping is consistent, and no
parked request is lost (each one is either answered or still held by its member), which is
what keeps the server's waiting handlers from hanging forever.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from grouptest_harness import Harness

from kafkalike.group import JoinResult, LeavingMember, Pending, SyncResult
from kafkalike.group.state import GroupState
from kafkalike.protocol.errors import ErrorCode as E


@dataclass
class Client:
    name: str
    instance: str | None = None
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: tuple[str, ...] = ()
    parked: Pending | None = None
    parked_kind: str = ""
    synced: bool = False
    silent: bool = False


def check_invariants(h: Harness, outstanding: set[int], last_generation: list[int]) -> None:
    group = h.coordinator.groups.get("g")
    if group is None:
        return
    assert group.generation_id >= last_generation[0]
    last_generation[0] = group.generation_id
    if group.members:
        assert group.leader_id in group.members
    else:
        assert group.leader_id is None
        assert group.state in (GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
    assert group.pending_sync <= set(group.members)
    assert set(group.static_members.values()) <= set(group.members)
    held = {m.join_token for m in group.members.values()} | {m.sync_token for m in group.members.values()}
    for token in outstanding:
        assert token in h.results or token in held, f"parked request {token} was lost"
    if group.state is not GroupState.PREPARING_REBALANCE:
        assert not any(m.awaiting_join for m in group.members.values())


def step(h: Harness, rng: random.Random, client: Client, outstanding: set[int]) -> None:
    if client.parked is not None:
        token = client.parked.token
        if token not in h.results:
            return
        outstanding.discard(token)
        result = h.results.pop(token)
        client.parked = None
        on_result(client, result)
        return
    if client.silent:
        return
    if not client.member_id or client.generation < 0:
        options = {"client_id": client.name, "instance": client.instance, "session_ms": 10_000, "rebalance_ms": 15_000}
        result = h.join(member_id=client.member_id, **options)
        if isinstance(result, JoinResult) and result.error is E.MEMBER_ID_REQUIRED:
            client.member_id = result.member_id
            result = h.join(member_id=client.member_id, **options)
        park_or_handle(client, result, "join", outstanding)
        return
    if not client.synced:
        assignments = [(m, m.encode()) for m in client.members] if client.leader else []
        result = h.sync(client.member_id, client.generation, assignments=assignments, instance=client.instance)
        park_or_handle(client, result, "sync", outstanding)
        return
    roll = rng.random()
    if roll < 0.05:
        h.leave(LeavingMember(client.member_id, client.instance))
        client.member_id, client.generation, client.synced = "", -1, False
    elif roll < 0.08:
        client.silent = True
    elif roll < 0.1:
        # A restart: a static member comes back under its instance id with a new member id.
        client.member_id, client.generation, client.synced = "", -1, False
    elif roll < 0.3:
        offsets = {("t", 0): rng.randrange(100)}
        errors = h.commit(offsets, generation=client.generation, member_id=client.member_id, instance=client.instance)
        assert set(errors.values()) <= {
            E.NONE,
            E.ILLEGAL_GENERATION,
            E.UNKNOWN_MEMBER_ID,
            E.REBALANCE_IN_PROGRESS,
            E.FENCED_INSTANCE_ID,
        }
    else:
        on_error(client, h.heartbeat(client.member_id, client.generation, instance=client.instance))


def park_or_handle(client: Client, result: JoinResult | SyncResult | Pending, kind: str, outstanding: set[int]) -> None:
    if isinstance(result, Pending):
        client.parked, client.parked_kind = result, kind
        outstanding.add(result.token)
    else:
        on_result(client, result)


def on_result(client: Client, result: JoinResult | SyncResult) -> None:
    if isinstance(result, JoinResult):
        if result.error is E.NONE:
            client.generation = result.generation_id
            client.leader = result.leader == client.member_id
            client.members = tuple(m.member_id for m in result.members)
            client.synced = False
        else:
            on_error(client, result.error)
    elif result.error is E.NONE:
        client.synced = True
    else:
        on_error(client, result.error)


def on_error(client: Client, error: E) -> None:
    if error is E.NONE:
        return
    if error is E.REBALANCE_IN_PROGRESS:
        client.generation, client.synced = -1, False  # rejoin with the same member id
    else:
        client.member_id, client.generation, client.synced = "", -1, False


@pytest.mark.parametrize("seed", range(40))
def test_random_client_runs_keep_the_invariants(seed: int) -> None:
    rng = random.Random(seed)
    h = Harness(seed=seed)
    clients = [Client(f"c{i}", f"i{i}" if rng.random() < 0.4 else None) for i in range(rng.randint(1, 5))]
    outstanding: set[int] = set()
    last_generation = [0]
    for _ in range(400):
        if rng.random() < 0.2:
            h.advance(rng.choice([0, 100, 1000, 3000, 8000, 12_000]))
        else:
            step(h, rng, rng.choice(clients), outstanding)
        if rng.random() < 0.01:
            quiet = rng.choice(clients)
            quiet.silent = not quiet.silent
        check_invariants(h, outstanding, last_generation)
    # Let every parked request finish: nothing may stay parked once time passes.
    h.advance(600_000)
    for client in clients:
        if client.parked is not None:
            assert client.parked.token in h.results, f"{client.name} still parked"
