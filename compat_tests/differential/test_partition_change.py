"""Partition changes against Apache Kafka's own PartitionChangeBuilder (from the jars in
$KAFKALIKE_AK_LIB): for thousands of seeded random partitions (replicas, ISR, ELR, last known
ELR, leader, recovery state), fenced or shutting-down brokers, ELR on or off, min ISR, clean,
unclean and preferred elections and metadata versions, both write the same record (or none).
kafkalike follows 4.1+; against 4.0 the comparison takes 4.0's last-known-leader rules (``As40``)."""

from __future__ import annotations

import random
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from compat_tests.differential.conftest import AK_BEFORE_4_1, AK_LIB, AK_VERSION
from kafkalike.controller.image import NO_LEADER, NO_LEADER_CHANGE, PartitionRegistration
from kafkalike.controller.partition_change import Election, PartitionChange
from kafkalike.controller.placement import DIRECTORY_UNASSIGNED
from kafkalike.controller.reassignment import ReassignmentReplicas
from kafkalike.testing.apache_kafka import java_executable

pytestmark = pytest.mark.differential

TOOL = Path(__file__).parent / "java" / "PartitionChangeTool.java"
BROKERS = (1, 2, 3, 4, 17, 33)  # 17 and 33 share Java HashSet buckets with 1: the set order shows
SCENARIOS = 3000
# ELR's metadata versions: 4.0-IV3 and, where the jars know it, 4.4-IV2 (4.4's default).
ELR_VERSIONS = [25, 33] if AK_VERSION >= (4, 4) else [25]


class As40(PartitionChange):
    """Kafka 4.0's last-known-leader rules, changed in 4.1: 4.0 elected the last known leader
    even when it was not acceptable, and remembered it when the ISR emptied (not when the
    leader was lost)."""

    def _can_elect_last_known_leader(self) -> bool:
        if not self.elr_enabled or not self.use_last_known_leader or self.target_elr or self.target_isr:
            return False
        return len(self.partition.last_known_elr) == 1

    def _update_last_known_leader(self, record: dict[str, Any]) -> None:
        if not self.use_last_known_leader or not self.elr_enabled:
            return
        p = self.partition
        leader = record.get("leader", NO_LEADER_CHANGE)
        if record.get("isr") == [] and (len(p.last_known_elr) != 1 or p.last_known_elr[0] != p.leader):
            record["last_known_elr"] = [p.leader]
        elif (leader >= 0 or (p.leader != NO_LEADER and leader != NO_LEADER)) and p.last_known_elr:
            record["last_known_elr"] = []


OURS = As40 if AK_BEFORE_4_1 else PartitionChange


def field(values: list[int] | tuple[int, ...]) -> str:
    return ",".join(map(str, values)) or "-"


def scenario(rng: random.Random) -> dict[str, Any]:
    replicas = rng.sample(BROKERS, rng.randint(1, 4))
    elr_on = rng.random() < 0.6
    isr = [r for r in replicas if rng.random() < 0.6]
    rest = [r for r in replicas if r not in isr]
    elr = [r for r in rest if elr_on and rng.random() < 0.5]
    lke = [r for r in rest if r not in elr and elr_on and rng.random() < 0.4]
    if elr_on and not isr and not elr and rng.random() < 0.5:
        lke = [rng.choice(replicas)]
    leader = rng.choice([*isr, -1]) if rng.random() < 0.9 else rng.choice(replicas)
    removed = rng.choice(replicas)
    target_isr = [r for r in isr if r != removed] if rng.random() < 0.7 else isr
    return {
        "mv": rng.choice(ELR_VERSIONS) if elr_on else rng.choice([11, 17, 25]),
        "min_isr": rng.randint(1, len(replicas)),
        "elr": elr_on,
        "election": rng.choice([Election.ONLINE, Election.ONLINE, Election.UNCLEAN, Election.PREFERRED]),
        "replicas": replicas,
        "isr": isr,
        "elr_members": elr,
        "lke": lke,
        "leader": leader,
        "lrs": rng.choice([0, 0, 1]),
        "acceptable": [r for r in replicas if r != removed and rng.random() < 0.7],
        "target_isr": target_isr,
        "unclean": [removed] if rng.random() < 0.2 else [],
    }


def as_line(s: dict[str, Any]) -> str:
    return " ".join(
        [
            str(s["mv"]),
            str(s["min_isr"]),
            "1" if s["elr"] else "0",
            s["election"].name,
            field(s["replicas"]),
            field(s["isr"]),
            field(s["elr_members"]),
            field(s["lke"]),
            str(s["leader"]),
            str(s["lrs"]),
            field(s["acceptable"]),
            field(s["target_isr"]),
            field(s["unclean"]),
        ]
    )


def java_list(values: list[int] | None) -> str:
    return "null" if values is None else "[" + ", ".join(map(str, values)) + "]"


def ours(s: dict[str, Any], builder: type[PartitionChange] = OURS) -> str:
    partition = PartitionRegistration(
        replicas=tuple(s["replicas"]),
        isr=tuple(s["isr"]),
        leader=s["leader"],
        leader_epoch=3,
        partition_epoch=5,
        leader_recovery_state=s["lrs"],
        elr=tuple(s["elr_members"]),
        last_known_elr=tuple(s["lke"]),
    )
    acceptable = set(s["acceptable"])
    record = builder(
        partition,
        uuid.UUID(int=0x70),
        0,
        acceptable.__contains__,
        metadata_version=s["mv"],
        min_isr=s["min_isr"],
        elr_enabled=s["elr"],
        election=s["election"],
        target_isr=s["target_isr"],
        unclean_shutdown_replicas=s["unclean"],
    ).build()
    if record is None:
        return "none"
    elr = record.eligible_leader_replicas if record.version >= 2 else None
    lke = record.last_known_elr if record.version >= 2 else None
    return (
        f"version={record.version} leader={record.leader} isr={java_list(record.isr)} "
        f"elr={java_list(elr)} lke={java_list(lke)} lrs={record.leader_recovery_state}"
    )


def kafkas(lines: list[str]) -> list[str]:
    done = subprocess.run(
        [java_executable(), "-cp", str(Path(AK_LIB) / "*"), str(TOOL)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout.splitlines()


def test_our_partition_changes_are_kafkas() -> None:
    rng = random.Random(966)
    scenarios = [scenario(rng) for _ in range(SCENARIOS)]
    theirs = kafkas([as_line(s) for s in scenarios])
    assert len(theirs) == len(scenarios)
    errors = [t for t in theirs if t.startswith("error")]
    assert len(errors) < SCENARIOS // 10, errors[:5]  # Kafka refuses a few made-up partitions
    mismatches = [
        (as_line(s), t, ours(s))
        for s, t in zip(scenarios, theirs, strict=True)
        if not t.startswith("error") and t != ours(s)
    ]
    assert not mismatches, "\n".join(f"{line}\n  kafka: {t}\n  ours:  {o}" for line, t, o in mismatches[:10])
    kinds = {t.split(" ")[0] for t in theirs}
    assert {"none", "version=2", "version=1", "version=0"} <= kinds  # the scenarios reach every case


def test_a_different_rule_is_caught() -> None:
    """Negative control: the comparison fails for a builder that never writes ELR."""
    rng = random.Random(5)
    scenarios = [s for s in (scenario(rng) for _ in range(300)) if s["elr"]]
    theirs = kafkas([as_line(s) for s in scenarios])

    class NoElr(PartitionChange):
        def _populate_target_elr(self) -> None:
            pass

    differs = [t != ours(s, NoElr) for s, t in zip(scenarios, theirs, strict=True) if not t.startswith("error")]
    assert any(differs)


@pytest.mark.skipif(AK_BEFORE_4_1, reason="the 4.0 rules are the ones compared with")
def test_the_4_0_rules_are_not_4_4s() -> None:
    """The version switch matters: 4.0's last-known-leader rules differ from the jars' (4.1+)."""
    rng = random.Random(966)
    scenarios = [scenario(rng) for _ in range(SCENARIOS)]
    theirs = kafkas([as_line(s) for s in scenarios])
    assert any(t != ours(s, As40) for s, t in zip(scenarios, theirs, strict=True) if not t.startswith("error"))


# -- reassignment ----------------------------------------------------------------------------------


def moving_scenario(rng: random.Random) -> dict[str, Any]:
    """A partition as a reassignment starts (the change names the targets) or while it runs (a
    registration with adding and removing replicas; the change is an ISR's, AlterPartition's)."""
    original = rng.sample(BROKERS, rng.randint(1, 3))
    target = rng.sample(BROKERS, rng.randint(1, 4))
    moving = ReassignmentReplicas.between(original, target)
    starting = rng.random() < 0.4
    replicas = original if starting else list(moving.replicas)
    isr = [r for r in (original if starting else replicas) if rng.random() < 0.7] or [original[0]]
    leader = rng.choice(isr) if rng.random() < 0.9 else -1
    target_isr = isr if starting else sorted({*isr, *(r for r in moving.adding if rng.random() < 0.6)})
    if not starting and rng.random() < 0.2:
        target_isr = [r for r in target_isr if r != leader] or target_isr
    return {
        "mv": rng.choice([17, 25]),
        "min_isr": 1,
        "elr": False,
        "election": Election.ONLINE,
        "replicas": replicas,
        "isr": isr,
        "elr_members": [],
        "lke": [],
        "leader": leader,
        "lrs": 0,
        "acceptable": [r for r in BROKERS if rng.random() < 0.9],
        "target_isr": target_isr,
        "unclean": [],
        "adding": [] if starting else list(moving.adding),
        "removing": [] if starting else list(moving.removing),
        "target_replicas": list(moving.replicas) if starting else None,
        "target_adding": list(moving.adding) if starting else None,
        "target_removing": list(moving.removing) if starting else None,
    }


def moving_line(s: dict[str, Any]) -> str:
    def target(values: list[int] | None) -> str:
        return "=" if values is None else field(values)

    return " ".join(
        [
            as_line(s),
            field(s["adding"]),
            field(s["removing"]),
            target(s["target_replicas"]),
            target(s["target_adding"]),
            target(s["target_removing"]),
        ]
    )


def ours_moving(s: dict[str, Any], builder: type[PartitionChange] | None = None) -> str:
    partition = PartitionRegistration(
        replicas=tuple(s["replicas"]),
        isr=tuple(s["isr"]),
        leader=s["leader"],
        leader_epoch=3,
        partition_epoch=5,
        adding_replicas=tuple(s["adding"]),
        removing_replicas=tuple(s["removing"]),
        directories=(DIRECTORY_UNASSIGNED,) * len(s["replicas"]),
    )
    record = (builder or MOVING)(
        partition,
        uuid.UUID(int=0x70),
        0,
        set(s["acceptable"]).__contains__,
        metadata_version=s["mv"],
        min_isr=s["min_isr"],
        target_isr=s["target_isr"],
        target_replicas=s["target_replicas"],
        target_adding=s["target_adding"],
        target_removing=s["target_removing"],
        default_directory=lambda _: DIRECTORY_UNASSIGNED,
    ).build()
    if record is None:
        return "none"
    dirs = "null" if record.version < 1 or record.directories is None else str(len(record.directories))
    return (
        f"version={record.version} leader={record.leader} isr={java_list(record.isr)} "
        f"elr=null lke=null lrs={record.leader_recovery_state} replicas={java_list(record.replicas)} "
        f"adding={java_list(record.adding_replicas)} removing={java_list(record.removing_replicas)} dirs={dirs}"
    )


class CompletesAsBefore42(PartitionChange):
    """Kafka before KAFKA-19975 (4.2): a reassignment completed only with every remaining
    replica in the ISR."""

    def _complete_reassignment(self) -> None:
        remaining = [r for r in self.target_replicas if r not in self.target_removing]
        isr = [r for r in self.target_isr if r not in self.target_removing]
        if isr and set(remaining) <= set(isr):
            super()._complete_reassignment()


MOVING = CompletesAsBefore42 if AK_VERSION and AK_VERSION < (4, 2) else PartitionChange


def test_our_reassignment_changes_are_kafkas() -> None:
    rng = random.Random(3)
    scenarios = [moving_scenario(rng) for _ in range(SCENARIOS)]
    theirs = kafkas([moving_line(s) for s in scenarios])
    assert len(theirs) == len(scenarios)
    errors = [t for t in theirs if t.startswith("error")]
    assert len(errors) < SCENARIOS // 10, errors[:5]
    mismatches = [
        (moving_line(s), t, ours_moving(s))
        for s, t in zip(scenarios, theirs, strict=True)
        if not t.startswith("error") and t != ours_moving(s)
    ]
    assert not mismatches, "\n".join(f"{line}\n  kafka: {t}\n  ours:  {o}" for line, t, o in mismatches[:10])
    # The scenarios reach a reassignment starting, one completing and one still running.
    assert any("adding=[]" in t and "replicas=[" in t and "removing=[]" in t for t in theirs)
    assert any("adding=null" in t and "isr=[" in t for t in theirs)
    assert any(
        t.startswith("version") and "replicas=[" in t and "adding=[" in t and "adding=[]" not in t for t in theirs
    )


def test_a_different_completion_rule_is_caught() -> None:
    """Negative control: the comparison tells Kafka 4.4's completion rule from the one before."""
    rng = random.Random(3)
    scenarios = [moving_scenario(rng) for _ in range(500)]
    theirs = kafkas([moving_line(s) for s in scenarios])
    other = PartitionChange if MOVING is CompletesAsBefore42 else CompletesAsBefore42
    assert any(t != ours_moving(s, other) for s, t in zip(scenarios, theirs, strict=True) if not t.startswith("error"))
