"""The order Kafka's controller visits a broker's topics in: our JavaTimelineMap against Kafka's own
TimelineHashMap (from the jars in $KAFKALIKE_AK_LIB), for hundreds of random sequences of topic
ids put (new or again) and removed."""

from __future__ import annotations

import random
import subprocess
import uuid
from pathlib import Path

import pytest

from compat_tests.differential.conftest import AK_LIB
from kafkalike.controller.broker_partitions import JavaTimelineMap
from kafkalike.testing.apache_kafka import java_executable

pytestmark = pytest.mark.differential

TOOL = Path(__file__).parent / "java" / "TimelineOrderTool.java"


def halves(u: uuid.UUID) -> str:
    return f"{u.int >> 64:x}:{u.int & (2**64 - 1):x}"


def kafkas(lines: list[str]) -> list[str]:
    done = subprocess.run(
        [java_executable(), "-cp", str(Path(AK_LIB) / "*"), str(TOOL)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.splitlines()


def test_topics_iterate_in_kafkas_order() -> None:
    rng = random.Random(841)
    lines, ours = [], []
    for _ in range(500):
        table: JavaTimelineMap[uuid.UUID, int] = JavaTimelineMap()
        ops: list[str] = []
        keys: list[uuid.UUID] = []
        for _ in range(rng.randint(1, 40)):
            if keys and rng.random() < 0.25:
                key = keys.pop(rng.randrange(len(keys)))
                table.remove(key)
                ops.append(f"rm:{halves(key)}")
            elif keys and rng.random() < 0.3:  # a new value for a key there already (may grow the table)
                key = rng.choice(keys)
                table.put(key, 2)
                ops.append(f"put:{halves(key)}")
            else:
                key = uuid.UUID(int=rng.getrandbits(128))
                keys.append(key)
                table.put(key, 1)
                ops.append(f"put:{halves(key)}")
        lines.append(" ".join(ops))
        ours.append(" ".join(halves(k) for k, _ in table.items()))
    theirs = kafkas(lines)
    assert theirs == ours
    # Negative control: insertion order is not Kafka's order.
    insertion = [
        " ".join(dict.fromkeys(op.split(":", 1)[1] for op in line.split() if op.startswith("put"))) for line in lines
    ]
    assert insertion != theirs
