"""DescribeTopicPartitions: the same requests to Apache Kafka and kafkalike, page after page as a
client follows NextCursor over many topics and partitions; unknown and illegal names; bad cursors;
every topic from a cursor on. Topic order is compared as it comes (compare.py sorts lists)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compat_tests.differential.compare import plain
from compat_tests.differential.conftest import AK_LIB, Pair, assert_same
from kafkalike.testing.apache_kafka import java_executable
from kafkalike.testing.broker import InProcessBroker
from kafkalike.testing.process_cluster import COMBINED_ROLES, KafkalikeCluster

pytestmark = pytest.mark.differential

LAYOUT = (("c", 1), ("a", 7), ("b", 3), ("d", 25))  # tags of topics and their partition counts


def body(names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> dict[str, Any]:
    return {
        "topics": [{"name": n} for n in names],
        "response_partition_limit": limit,
        "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]},
    }


def order(response: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


def cursor_of(response: Any) -> tuple[str, int] | None:
    c = response.next_cursor
    return None if c is None else (c.topic_name, c.partition_index)


def same(pair: Pair, request: dict[str, Any]) -> tuple[Any, Any]:
    ak, kl = pair.both(75, 0, request)
    assert_same(ak, kl)
    assert order(ak) == order(kl)
    return ak, kl


@pytest.fixture(scope="module")
def topics(pair: Pair, name: Callable[[str], str]) -> list[str]:
    made = []
    for tag, partitions in LAYOUT:
        topic = name(tag)
        pair.create_topic(topic, partitions)
        made.append(topic)
    return made


@pytest.fixture(scope="module")
def name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    import uuid

    suffix = uuid.uuid4().hex[:6]
    return lambda tag: f"dtp-{tag}-{suffix}"


def test_named_topics_with_their_ids(pair: Pair, topics: list[str]) -> None:
    ak, kl = same(pair, body(topics))
    assert cursor_of(ak) is None
    assert {t.name: t.topic_id for t in kl.topics} == {t: pair.kl.topic_ids[t] for t in topics}
    assert {t.name: t.topic_id for t in ak.topics} == {t: pair.ak.topic_ids[t] for t in topics}


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 8, 10, 11, 25, 36, 0, -5])
def test_paging_over_every_partition(pair: Pair, topics: list[str], limit: int) -> None:
    ak_cursor = kl_cursor = None
    for _ in range(100):
        ak = pair.ak.request(75, 0, body(topics, limit, ak_cursor))
        kl = pair.kl.request(75, 0, body(topics, limit, kl_cursor))
        assert_same(ak, kl)
        assert order(ak) == order(kl)
        ak_cursor, kl_cursor = cursor_of(ak), cursor_of(kl)
        assert ak_cursor == kl_cursor
        if ak_cursor is None:
            return
    raise AssertionError("the pages never ended")


@pytest.mark.parametrize(
    "extra",
    [["missing-topic-x"], ["bad name"], ["..", "a" * 250], ["z\U0001f600", "z\uffff"], []],
    ids=["unknown", "illegal", "dots-and-long", "utf16-order", "none"],
)
@pytest.mark.parametrize("limit", [2000, 8, 36])
def test_unknown_and_illegal_names(pair: Pair, topics: list[str], extra: list[str], limit: int) -> None:
    ak, kl = same(pair, body([*extra, *topics, *extra], limit))
    if limit == 36 and extra:  # the limit falls right before the first unknown name, or beyond it
        assert cursor_of(ak) == cursor_of(kl)


@pytest.mark.parametrize(
    "cursor",
    [("absent", 0), ("a", -1), ("b", 2), ("b", 3), ("b", 50), ("d", 2**31 - 1)],
    ids=["not-named", "negative", "last", "past-end", "far-past-end", "int-max"],
)
def test_cursors(pair: Pair, topics: list[str], cursor: tuple[str, int]) -> None:
    tag, index = cursor
    topic = next((t for t in topics if t.startswith(f"dtp-{tag}-")), cursor[0])
    for limit in (2000, 5):
        same(pair, body(topics, limit, (topic, index)))


def test_every_topic_from_a_cursor(pair: Pair, topics: list[str]) -> None:
    """No names: all topics from the cursor's on (the others the session made come after ours,
    or not at all: only pages that stay within this module's topics are compared)."""
    first = sorted(topics)[0]
    cursor: tuple[str, int] | None = (first, 0)
    for _ in range(50):
        ak, kl = pair.both(75, 0, body([], 6, cursor))
        ours = [t for t in order(ak) if t[0] in topics]
        if ours != order(ak):
            break
        assert_same(ak, kl)
        assert order(ak) == order(kl)
        assert cursor_of(ak) == cursor_of(kl)
        cursor = cursor_of(ak)
        if cursor is None or cursor[0] not in topics:
            break
    # A cursor at a name that does not exist starts at the next topic after it.
    ak, kl = pair.both(75, 0, body([], 3, (first[:-1], 0)))
    assert order(ak)[:1] == order(kl)[:1] == [(first, [0, 1, 2])]
    assert plain(ak.topics[0]).keys() == plain(kl.topics[0]).keys()


def kafka_topics(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            java_executable(),
            "-Xmx256m",
            "-cp",
            str(Path(AK_LIB) / "*"),
            "org.apache.kafka.tools.TopicCommand",
            "--bootstrap-server",
            bootstrap,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def without_ids(output: str) -> str:
    """The tool's output without topic ids and without the Configs column: Kafka 4.4 with ELR on
    records min.insync.replicas as a cluster-wide dynamic config (KIP-966) and lists it for every
    topic; that is DescribeConfigs' business, not this API's."""
    return re.sub(r"Configs: [^\n]*", "Configs: <configs>", re.sub(r"TopicId: \S+", "TopicId: <id>", output))


def partition_lines(output: str) -> list[str]:
    """The tool's partition lines (topic, partition, leader, replicas, ISR, ELR), sorted: it
    prints topics in the order of a hash map."""
    return sorted(line.strip() for line in output.splitlines() if "\tPartition: " in line)


def test_kafka_topics_describe_prints_the_same(pair: Pair, topics: list[str]) -> None:
    """Kafka's tool describes through the Java AdminClient, which pages with DescribeTopicPartitions."""
    outputs = []
    for side in (pair.ak, pair.kl):
        done = kafka_topics(
            f"{side.host}:{side.port}", "--describe", "--topic", "dtp-.*", "--partition-size-limit-per-response", "4"
        )
        assert done.returncode == 0, (side.name, done.stderr)
        outputs.append(without_ids(done.stdout))
    assert sorted(outputs[0].splitlines()) == sorted(outputs[1].splitlines())
    for topic, (_, partitions) in zip(topics, LAYOUT, strict=True):
        assert outputs[1].count(f"Topic: {topic}\tPartition:") == partitions


def test_the_admin_client_pages_with_describe_topic_partitions() -> None:
    """The tool's requests reach kafkalike as DescribeTopicPartitions, one page per 4 partitions."""
    seen: list[Any] = []

    def count(header: Any, request: Any) -> None:
        seen.append((request.response_partition_limit, request.cursor))
        return None  # handled as usual

    with InProcessBroker(seed_topics={"wide": 10, "narrow": 1}) as kafka:
        kafka.faults.intercept(75, count)
        done = kafka_topics(kafka.bootstrap_servers, "--describe", "--partition-size-limit-per-response", "4")
    assert done.returncode == 0, done.stderr
    assert [line.split("\t")[:2] for line in partition_lines(done.stdout)] == sorted(
        [["Topic: narrow", "Partition: 0"], *[["Topic: wide", f"Partition: {i}"] for i in range(10)]]
    )
    assert len(seen) >= 3 and all(limit == 4 for limit, _ in seen)
    assert [(c.topic_name, c.partition_index) for _, c in seen if c is not None][:2] == [("wide", 3), ("wide", 7)]


def test_kafka_topics_describe_through_a_cluster_broker(tmp_path: Path) -> None:
    """Three combined nodes: the tool, given one broker, sees each partition's own leader."""
    with KafkalikeCluster(3, tmp_path, roles=COMBINED_ROLES) as cluster:
        bootstrap = cluster.node(cluster.node_ids[0]).bootstrap
        made = kafka_topics(bootstrap, "--create", "--topic", "spread", "--partitions", "6")
        assert made.returncode == 0, made.stderr
        done = kafka_topics(bootstrap, "--describe", "--topic", "spread", "--partition-size-limit-per-response", "4")
        assert done.returncode == 0, done.stderr
        rows = [
            {k.strip(): v.strip() for k, _, v in (f.partition(":") for f in line.split("\t"))}
            for line in partition_lines(done.stdout)
        ]
        assert sorted(int(r["Partition"]) for r in rows) == list(range(6))
        leaders = {int(r["Leader"]) for r in rows}
        assert leaders <= set(cluster.node_ids) and len(leaders) > 1
        assert all(r["Replicas"] == r["Isr"] == r["Leader"] for r in rows)
