"""The seeded schedule of faults a chaos run injects: the same seed, count and mode always give the
same faults, so a run that found something can be replayed.

A fault names what to hit (a partition's leader, the active controller, a node by id) rather than a
node, since who leads is only known when the fault comes; the run resolves it then.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

KILL_LEADER = "kill-leader"  # SIGKILL the leader of a partition, restart it after hold_s
KILL_CONTROLLER = "kill-controller"  # SIGKILL the active controller (DescribeQuorum), restart after hold_s
KILL_NODE = "kill-node"  # SIGKILL a node chosen by id, restart after hold_s
PAUSE_NODE = "pause-node"  # SIGSTOP a node for hold_s (past the broker session timeout), then SIGCONT
ISOLATE_NODE = "isolate-node"  # take a node's network link down for hold_s, then up again
# The negative control's fault: SIGSTOP a partition's followers, let the leader acknowledge writes
# alone (acks=1) for hold_s, SIGKILL it, SIGCONT the followers (one of them takes over without
# the writes), and restart the old leader, which truncates its log to the new leader's.
STRAND_LEADER = "strand-leader"

SAFE_KINDS = (KILL_LEADER, KILL_CONTROLLER, KILL_NODE, PAUSE_NODE, ISOLATE_NODE)
UNSAFE_KINDS = (STRAND_LEADER,)
# Kafka's broker.session.timeout.ms is 9 s: a node paused or cut off for longer is fenced.
SESSION_TIMEOUT_S = 9.0


@dataclass(frozen=True)
class Fault:
    kind: str
    partition: int  # the partition whose leader is hit (KILL_LEADER, STRAND_LEADER), else -1
    node_id: int  # the node hit (KILL_NODE, PAUSE_NODE, ISOLATE_NODE), else -1
    hold_s: float  # how long the node stays down, paused, isolated (or the leader stranded)
    gap_s: float  # quiet time before the fault, once the cluster has settled

    def describe(self) -> str:
        target = {
            KILL_LEADER: f"the leader of partition {self.partition}",
            STRAND_LEADER: f"the leader of partition {self.partition}",
            KILL_CONTROLLER: "the active controller",
        }.get(self.kind, f"node {self.node_id}")
        return f"{self.kind} {target} for {self.hold_s:.1f} s"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def make_schedule(
    seed: int, count: int, *, nodes: int = 3, partitions: int = 6, unsafe: bool = False, short: bool = False
) -> list[Fault]:
    """``count`` faults drawn from ``seed``. Safe runs cover every kind once (in a seeded order)
    before drawing kinds at random; ``short`` keeps the hold times near their minimum."""
    if count < 0:
        raise ValueError(f"a schedule has 0 or more faults, not {count}")
    rng = random.Random(seed)
    kinds = list(UNSAFE_KINDS if unsafe else SAFE_KINDS)
    rng.shuffle(kinds)
    chosen = [kinds[i] if i < len(kinds) else rng.choice(kinds) for i in range(count)]
    faults = []
    for kind in chosen:
        partition = rng.randrange(partitions) if kind in (KILL_LEADER, STRAND_LEADER) else -1
        node_id = rng.randint(1, nodes) if kind in (KILL_NODE, PAUSE_NODE, ISOLATE_NODE) else -1
        if kind in (PAUSE_NODE, ISOLATE_NODE):
            low, high = SESSION_TIMEOUT_S + 3, SESSION_TIMEOUT_S + 9  # past the session timeout
        elif kind == STRAND_LEADER:
            low, high = 2.0, 4.0
        else:
            low, high = 3.0, 10.0
        if short:
            high = low + 1
        hold_s = round(rng.uniform(low, high), 1)
        gap_s = round(rng.uniform(1.0, 2.0) if short else rng.uniform(2.0, 6.0), 1)
        faults.append(Fault(kind, partition, node_id, hold_s, gap_s))
    return faults
