"""The pytest plugin as a user's suite sees it: generated test files run by pytest itself.

Under pytest-xdist each worker gets a broker of its own; a conftest configures the session
broker; a test during which the broker logged an error fails; topics a test created under its
``kafka_topic_name`` are gone afterwards; ``kafka_broker_process`` brokers survive a kill.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkalike.testing import BrokerProcess

pytest_plugins = ["pytester"]

XDIST_TESTS = 8

XDIST_TEST_FILE = f"""
import json
import os
import pathlib

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

REPORTS = pathlib.Path(__file__).parent / "reports"


@pytest.fixture(scope="session", autouse=True)
def same_topic_name_on_every_worker(kafka_broker):
    # TOPIC_ALREADY_EXISTS on the second worker if the workers shared a broker.
    kafka_broker.create_topic("orders", 3)


@pytest.mark.parametrize("n", range({XDIST_TESTS}))
def test_a_topic_of_its_own(n, kafka_bootstrap, kafka_topic):
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    producer.send(kafka_topic, b"from test %d" % n).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, consumer_timeout_ms=30000)
    partition = TopicPartition(kafka_topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning()
    # The topic holds this test's record and nothing else.
    assert next(consumer).value == b"from test %d" % n
    assert consumer.end_offsets([partition]) == {{partition: 1}}
    consumer.close()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    REPORTS.mkdir(exist_ok=True)
    report = {{"worker": worker, "bootstrap": kafka_bootstrap, "topic": kafka_topic}}
    (REPORTS / f"{{n}}.json").write_text(json.dumps(report))
"""


def test_under_xdist_each_worker_has_its_own_broker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_workers=XDIST_TEST_FILE)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=XDIST_TESTS)
    reports = [json.loads(path.read_text()) for path in (pytester.path / "reports").glob("*.json")]
    assert len(reports) == XDIST_TESTS
    bootstrap_by_worker: dict[str, set[str]] = {}
    for report in reports:
        bootstrap_by_worker.setdefault(report["worker"], set()).add(report["bootstrap"])
    assert sorted(bootstrap_by_worker) == ["gw0", "gw1"]
    # One broker per worker, each on a port of its own.
    assert all(len(addresses) == 1 for addresses in bootstrap_by_worker.values())
    assert len(set.union(*bootstrap_by_worker.values())) == 2
    assert len({report["topic"] for report in reports}) == XDIST_TESTS


def test_a_conftest_configures_the_session_broker(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def kafka_broker_config():
            return {"num.partitions": "4"}
        """
    )
    pytester.makepyfile(
        """
        from kafka import KafkaProducer

        def test_auto_created_topics_get_four_partitions(kafka_bootstrap):
            producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
            assert producer.partitions_for("auto-created") == {0, 1, 2, 3}
            producer.close()
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_a_second_broker_config_in_one_session_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_default="def test_default(kafka_broker):\n    assert kafka_broker.running\n")
    other = pytester.mkpydir("zz_other")
    (other / "conftest.py").write_text(
        "import pytest\n\n\n"
        '@pytest.fixture(scope="session")\n'
        "def kafka_broker_config():\n"
        '    return {"num.partitions": "4"}\n'
    )
    (other / "test_other.py").write_text("def test_other(kafka_bootstrap):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    # The session's broker was started for test_default; test_other asked for another one.
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*kafka_broker_config is {'num.partitions': '4'}, but the session's*"])


BROKER_BUG_TEST_FILE = """
import pytest

from kafkalike.testing.wire_client import WireClient


def test_a_request_the_broker_fails_on(kafka_broker):
    def broken(header, request):
        raise RuntimeError("a bug in the broker")

    kafka_broker.faults.intercept(3, broken)
    with WireClient(kafka_broker.host, kafka_broker.port) as client, pytest.raises(ConnectionError):
        client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})


def test_the_next_test_finds_the_broker_well(kafka_broker):
    assert kafka_broker.running
    with WireClient(kafka_broker.host, kafka_broker.port) as client:
        assert client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False}).brokers
"""


def test_a_broker_error_fails_the_test_that_caused_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bug=BROKER_BUG_TEST_FILE)
    result = pytester.runpytest("-p", "no:cacheprovider")
    # The test body passed; its teardown reports what the broker logged.
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*the kafka_broker logged errors during this test*", "*RuntimeError: a bug in the broker*"]
    )
    assert "test_a_request_the_broker_fails_on" in "\n".join(result.stdout.lines)


def test_the_broker_error_check_can_be_turned_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bug=BROKER_BUG_TEST_FILE)
    pytester.makeini("[pytest]\nkafka_broker_errors = ignore\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_topics_named_after_kafka_topic_name_are_deleted_after_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pathlib

        CREATED = pathlib.Path(__file__).parent / "created"

        def test_creates_its_topics(kafka_broker, kafka_topic_name):
            for name in (kafka_topic_name, kafka_topic_name + "-in", kafka_topic_name + "-out"):
                kafka_broker.create_topic(name)
            kafka_broker.create_topic("unrelated")
            CREATED.write_text(kafka_topic_name)

        def test_they_are_gone(kafka_broker):
            name = CREATED.read_text()
            left = set(kafka_broker.topics())
            assert not {t for t in left if t.startswith(name)}, left
            assert "unrelated" in left
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_a_broker_process_comes_back_after_a_kill(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    broker = kafka_broker_process("log.flush.interval.messages=1", "num.partitions=2")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    assert producer.send(kafka_topic_name, b"flushed", partition=1).get(timeout=30).offset == 0
    producer.close()
    broker.kill()
    broker.restart()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=30000)
    partition = TopicPartition(kafka_topic_name, 1)
    consumer.assign([partition])
    consumer.seek_to_beginning()
    assert next(consumer).value == b"flushed"
    assert consumer.end_offsets([partition]) == {partition: 1}
    consumer.close()


CLUSTER_TEST_FILE = """
import pytest


@pytest.mark.kafka_cluster(brokers=3, num_partitions=3)
def test_three_nodes(kafka_cluster):
    assert kafka_cluster.metadata_brokers() == {1, 2, 3}
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers)
    assert producer.partitions_for("auto-created") == {0, 1, 2}  # num.partitions=3 from the marker
    producer.close()
    kafka_cluster.wait_for(lambda: {kafka_cluster.leader("auto-created", p) for p in range(3)} == {1, 2, 3}, "leaders")
    kafka_cluster.isolate(2)  # left isolated: the fixture heals before it stops the cluster


def test_the_default_size(kafka_cluster):
    assert [n.node_id for n in kafka_cluster.brokers] == [1, 2, 3]
"""


def test_the_kafka_cluster_fixture_runs_nodes_configured_by_its_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fixture_cluster_example=CLUSTER_TEST_FILE)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)
