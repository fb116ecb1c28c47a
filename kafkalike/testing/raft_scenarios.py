"""Scenario families for the Raft simulation, as Kafka's RaftEventSimulationTest has them.

Each family scripts faults at random (seeded) times over a :class:`Simulation`, then heals the
network, restarts the dead and checks liveness: within ``LIVENESS_BOUND_MS`` of simulated time a
leader that every live node follows, and a record appended through it committed on every live node.
Time budgets are small on purpose: a seed is a few hundred to a few thousand events, so that the
test suite runs a thousand seeds per family.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkalike.raft import messages as m
from kafkalike.raft.config import QuorumConfig, VoterKey
from kafkalike.raft.node import RaftNode
from kafkalike.testing.raft_simulation import LogFactory, NodeFactory, SimConfig, Simulation

# Elections take one to two election timeouts, plus a pre-vote round and backoffs; a fetch timeout
# (2 s) passes before followers give up on a dead leader.
LIVENESS_BOUND_MS = 20_000
FIRST_LEADER_BOUND_MS = 10_000

Script = Callable[[Simulation], None]


@dataclass(frozen=True)
class Family:
    name: str
    config: SimConfig
    script: Script
    restart_all_for_liveness: bool = True


def wait_for_leader(sim: Simulation, bound_ms: int = FIRST_LEADER_BOUND_MS) -> int:
    if not sim.run_until(lambda: sim.leader() is not None, until_ms=sim.now + bound_ms):
        sim.fail(f"liveness: no leader within {bound_ms} ms")
    leader = sim.leader()
    assert leader is not None
    return leader.node_id


def wait_for_new_leader(sim: Simulation, old_epoch: int, bound_ms: int = FIRST_LEADER_BOUND_MS) -> int:
    """Wait for a leader of a later epoch that every live node follows; records how long it took."""
    started = sim.now

    def elected() -> bool:
        leader = sim.leader()
        return leader is not None and leader.epoch > old_epoch and sim.has_stable_leader()

    if not sim.run_until(elected, until_ms=sim.now + bound_ms):
        sim.fail(f"liveness: no new leader within {bound_ms} ms")
    sim.elections_ms.append(sim.now - started)
    leader = sim.leader()
    assert leader is not None
    return leader.node_id


def epoch_of(sim: Simulation, node_id: int) -> int:
    node = sim.nodes[node_id].node
    assert node is not None
    return node.epoch


def run_for(sim: Simulation, low_ms: int, high_ms: int) -> None:
    sim.run_until(until_ms=sim.now + sim.rng.randint(low_ms, high_ms))


def check_liveness(sim: Simulation, *, restart_all: bool = True, bound_ms: int = LIVENESS_BOUND_MS) -> None:
    sim.heal()
    if restart_all:
        for node_id in sim.nodes:
            sim.restart(node_id)
    deadline = sim.now + bound_ms
    if not sim.run_until(sim.has_stable_leader, until_ms=deadline):
        states = ", ".join(f"{n.node_id}:{n.role.value}/e{n.epoch}/l{n.leader_id}" for n in sim.live())
        sim.fail(f"liveness: no leader followed by every live node within {bound_ms} ms ({states})")
    leader = sim.leader()
    assert leader is not None
    offset = sim.client_append(leader.node_id, b"liveness")

    def committed_everywhere() -> bool:
        return all(
            n.high_watermark is not None and n.high_watermark > offset and n.log.end_offset > offset for n in sim.live()
        )

    if not sim.run_until(committed_everywhere, until_ms=deadline):
        hws = ", ".join(f"{n.node_id}:hw{n.high_watermark}/end{n.log.end_offset}" for n in sim.live())
        sim.fail(f"liveness: offset {offset} not committed on every live node within {bound_ms} ms ({hws})")
    sim.invariants.check_agreement()
    # With voters in the log, every replica has them (static voters are each node's own config).
    disagreeing = [n.node_id for n in sim.live() if sim.config.dynamic_voters and n.voters != leader.voters]
    if disagreeing:
        sim.fail(f"liveness: nodes {disagreeing} do not hold the leader's voters {leader.voters} once all is committed")


# -- the families ---------------------------------------------------------------------------------


def leader_killed(sim: Simulation) -> None:
    wait_for_leader(sim)
    run_for(sim, 100, 1500)
    leader = wait_for_leader(sim)  # the leader now (an election may have moved on meanwhile)
    epoch = epoch_of(sim, leader)
    sim.crash(leader)
    wait_for_new_leader(sim, epoch)
    run_for(sim, 0, 1000)
    sim.restart(leader)
    run_for(sim, 0, 1000)


def leader_resigns(sim: Simulation) -> None:
    """The leader steps down gracefully (EndQuorumEpoch), then stops; the most caught-up voter
    runs at once instead of waiting for a fetch timeout."""
    wait_for_leader(sim)
    run_for(sim, 100, 1500)
    leader = wait_for_leader(sim)
    epoch = epoch_of(sim, leader)
    sim.resign(leader)
    if sim.rng.random() < 0.5:
        sim.run_until(until_ms=sim.now + sim.rng.randint(0, 50))
        sim.crash(leader)  # stopped before it knows who follows it
    wait_for_new_leader(sim, epoch)
    run_for(sim, 0, 1000)
    sim.restart(leader)
    run_for(sim, 0, 1000)


def all_killed_majority_restarted(sim: Simulation) -> None:
    wait_for_leader(sim)
    run_for(sim, 100, 1500)
    for node_id in sim.nodes:
        sim.crash(node_id)
    run_for(sim, 0, 500)
    majority = sim.rng.sample(sorted(sim.nodes), len(sim.voter_ids) // 2 + 1)
    for node_id in majority:
        sim.restart(node_id)


def leader_partitioned(sim: Simulation) -> None:
    leader = wait_for_leader(sim)
    run_for(sim, 100, 1500)
    sim.isolate(leader)
    run_for(sim, 2500, 5000)


def split_3_2(sim: Simulation) -> None:
    wait_for_leader(sim)
    run_for(sim, 100, 1000)
    ids = sorted(sim.nodes)
    sim.rng.shuffle(ids)
    sim.partition(ids[:3], ids[3:])
    run_for(sim, 2500, 5000)


def back_to_back_leader_failures(sim: Simulation) -> None:
    first = wait_for_leader(sim)
    run_for(sim, 100, 800)
    sim.crash(first)
    second = wait_for_leader(sim)
    run_for(sim, 0, 300)
    sim.crash(second)
    run_for(sim, 0, 500)
    sim.restart(first)
    run_for(sim, 500, 3000)


def lose_unflushed_tail(sim: Simulation) -> None:
    wait_for_leader(sim)
    for _ in range(3):
        run_for(sim, 200, 1500)
        victim = sim.rng.choice(sorted(sim.nodes))
        sim.crash(victim)
        run_for(sim, 0, 400)
        sim.restart(victim)


def observers_following(sim: Simulation) -> None:
    leader = wait_for_leader(sim)
    run_for(sim, 200, 1500)
    sim.crash(leader)
    run_for(sim, 500, 3000)
    sim.restart(leader)


def follower_behind_the_log_start(sim: Simulation) -> None:
    """A follower cut off while the others commit and snapshot past it: back, it must download
    the leader's snapshot (FetchSnapshot, in chunks) before it can fetch again."""
    leader = wait_for_leader(sim)
    run_for(sim, 100, 800)
    follower = sim.rng.choice([n for n in sim.voter_ids if n != leader])
    sim.isolate(follower)
    run_for(sim, 3000, 6000)
    if sim.rng.random() < 0.3:
        sim.crash(follower)  # and sometimes it comes back from its disk
        sim.restart(follower)


def one_node_fault(sim: Simulation, ids: list[int], fault: int) -> bool:
    """Faults 0-2: crash, restart or isolate a node picked at random; False for any other."""
    if fault == 0:
        sim.crash(sim.rng.choice(ids))
    elif fault == 1:
        sim.restart(sim.rng.choice(ids))
    elif fault == 2:
        sim.isolate(sim.rng.choice(ids))
    else:
        return False
    return True


def random_faults(sim: Simulation) -> None:
    """Crashes, restarts, partitions and heals in random order, as they come."""
    wait_for_leader(sim)
    ids = sorted(sim.nodes)
    for _ in range(6):
        run_for(sim, 100, 1200)
        fault = sim.rng.randrange(5)
        if one_node_fault(sim, ids, fault):
            continue
        if fault == 3:
            shuffled = sim.rng.sample(ids, len(ids))
            cut = sim.rng.randint(1, len(ids) - 1)
            sim.partition(shuffled[:cut], shuffled[cut:])
        else:
            sim.heal()


def voters_change_under_faults(sim: Simulation) -> None:
    """KIP-853: the admin adds and removes voters (one at a time) while nodes crash, restart and
    are cut off; then, all healed, one more voter change must succeed (Kafka's liveness property
    ReconfigurationNotStuck)."""
    wait_for_leader(sim)
    ids = sorted(sim.nodes)
    for _ in range(8):
        run_for(sim, 300, 1500)
        fault = sim.rng.randrange(8)
        if not one_node_fault(sim, ids, fault) and fault == 3:
            sim.heal()
    sim.voter_changes_enabled = False
    reconfiguration_not_stuck(sim)


def _answered_more_than(sim: Simulation, count: int) -> Callable[[], bool]:
    return lambda: sum(sim.voter_changes.values()) > count


def reconfiguration_not_stuck(sim: Simulation, bound_ms: int = LIVENESS_BOUND_MS) -> None:
    sim.heal()
    for node_id in sim.nodes:
        sim.restart(node_id)
    deadline = sim.now + bound_ms
    while sim.run_until(sim.has_stable_leader, until_ms=deadline):
        leader = sim.leader()
        assert leader is not None
        succeeded, answered = sim.voter_changes.get("NONE", 0), sum(sim.voter_changes.values())
        outside = sorted(set(sim.nodes) - leader.voters.ids)
        if outside:
            node = sim.voter_node(outside[0])
            body = m.add_voter_request("sim-cluster", node.key, list(node.listeners))
            sim.request_voter_change(leader.node_id, body, m.ADD_RAFT_VOTER)
        else:
            key = leader.voters.keys[-1]
            sim.request_voter_change(leader.node_id, m.remove_voter_request("sim-cluster", key), m.REMOVE_RAFT_VOTER)
        sim.run_until(_answered_more_than(sim, answered), until_ms=min(deadline, sim.now + 5_000))
        if sim.voter_changes.get("NONE", 0) > succeeded:
            return
        run_for(sim, 100, 300)
    sim.fail(f"liveness: no voter change succeeded within {bound_ms} ms of healing ({sim.voter_changes})")


FAMILIES = {
    f.name: f
    for f in [
        Family("leader_killed", SimConfig(voters=3), leader_killed),
        Family("leader_resigns", SimConfig(voters=3), leader_resigns),
        Family(
            "all_killed_majority_restarted",
            SimConfig(voters=3),
            all_killed_majority_restarted,
            restart_all_for_liveness=False,
        ),
        Family("leader_partitioned", SimConfig(voters=3), leader_partitioned),
        Family("split_3_2", SimConfig(voters=5, append_interval_ms=300), split_3_2),
        Family("back_to_back_leader_failures", SimConfig(voters=3), back_to_back_leader_failures),
        Family("lose_unflushed_tail", SimConfig(voters=3, disk_delay_ms=(5, 40)), lose_unflushed_tail),
        Family("observers_following", SimConfig(voters=3, observers=2, append_interval_ms=300), observers_following),
        Family("random_faults", SimConfig(voters=3, observers=1, snapshot_interval_ms=1000), random_faults),
        Family(
            "bootstrap_observers_following",
            SimConfig(voters=3, observers=2, bootstrap_observers=2, append_interval_ms=300),
            observers_following,
        ),
        Family(
            "voters_change_under_faults",
            SimConfig(
                voters=3,
                observers=2,
                dynamic_voters=True,
                voter_change_interval_ms=600,
                snapshot_interval_ms=1500,
                append_interval_ms=150,
            ),
            voters_change_under_faults,
        ),
        Family(
            "follower_behind_the_log_start",
            SimConfig(
                voters=3,
                append_interval_ms=100,
                snapshot_interval_ms=1000,
                quorum=QuorumConfig(voters=(VoterKey(1),), fetch_max_bytes=2000),
            ),
            follower_behind_the_log_start,
        ),
    ]
}

# The leader-killed scenario with every message put through the codec (pre-votes as Vote v2).
WIRE = Family("wire", SimConfig(voters=3, wire=True), leader_killed)


def run_seed(
    family: Family,
    seed: int,
    *,
    node_factory: NodeFactory = RaftNode,
    trace: bool = False,
    unchecked: frozenset[str] = frozenset(),
    log_factory: LogFactory | None = None,
) -> Simulation:
    """One seed of one family, invariants after every event and liveness at the end; raises
    :class:`~kafkalike.testing.raft_simulation.InvariantViolation` naming the seed."""
    extra = {} if log_factory is None else {"log_factory": log_factory}
    sim = Simulation(
        seed, family.config, node_factory=node_factory, trace=trace, family=family.name, unchecked=unchecked, **extra
    )
    family.script(sim)
    check_liveness(sim, restart_all=family.restart_all_for_liveness)
    return sim


def family_named(name: str) -> Family:
    if name == WIRE.name:
        return WIRE
    return FAMILIES[name]
