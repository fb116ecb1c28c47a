"""pytest fixtures for code that talks to Kafka (installed as the ``kafkalike`` pytest plugin).

    def test_orders(kafka_bootstrap, kafka_topic):
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
        producer.send(kafka_topic, b"hello").get(timeout=10)

- ``kafka_broker``: one in-process, in-memory broker per test session (an ``InProcessBroker``)
  — with pytest-xdist, one per worker, since each worker runs its own session.
- ``kafka_broker_config``: the broker configs (Kafka's names) ``kafka_broker`` starts with, on
  top of the test profile; ``{}`` unless a ``conftest.py`` overrides this session fixture. A
  session has one broker, so the override belongs where every test that uses it sees it (the
  rootdir's conftest.py); a test that sees another override fails rather than run against a
  broker configured for someone else.
- ``kafka_bootstrap``: its ``host:port``.
- ``kafka_topic_name``: a topic name no other test uses, not created (for code that creates its
  topics). After the test, topics of ``kafka_broker`` whose name starts with it are deleted.
- ``kafka_topic``: that name, created on ``kafka_broker``. ``KAFKALIKE_TOPIC_PARTITIONS`` sets
  its partition count (default 1); ``@pytest.mark.kafka_topic(partitions=3, retention_ms=1000)``
  chooses per test (configs with ``_`` for ``.``).
- ``kafka_cluster``: a ``Cluster`` of three in-process nodes (broker and controller each) for
  one test, with per-node ``stop``/``kill``/``start`` and ``isolate``/``heal``;
  ``@pytest.mark.kafka_cluster(brokers=5, broker_session_timeout_ms=2000)`` chooses the size and
  configs (``_`` for ``.``). The test fails if a node logged an error or did not stop.
- ``kafka_broker_process``: starts ``kafkalike serve`` processes (``BrokerProcess``), each with
  a data directory of its own, for tests that kill, restart or reconfigure a broker; called
  with broker configs (``"key=value"``); stopped after the test.

After each test that used ``kafka_broker`` its fault hooks are cleared; the test fails (in its
teardown) if a broker it used logged an error or a traceback — a broker bug, whatever the test
sent — or exited, or did not stop cleanly. ``kafka_broker_errors = ignore`` in the pytest
configuration turns the check of logged errors off.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path

import pytest

from kafkalike.testing.broker import InProcessBroker
from kafkalike.testing.cluster import Cluster
from kafkalike.testing.process import BrokerProcess

ERRORS_INI = "kafka_broker_errors"
STARTED_WITH = pytest.StashKey[dict[str, str]]()
BROKER_PROCESSES = pytest.StashKey[list[BrokerProcess]]()
BROKER_OUTPUT_LINES = 200  # of each broker process, shown when its test failed
TOPIC_NAME_CHARS_MAX = 100  # Kafka allows 249; room is left for suffixes such as "-in", "-out"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        ERRORS_INI,
        "fail (the default): a test fails if a kafkalike broker it used logged an error; ignore: do not check",
        default="fail",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka_topic(partitions=1, **configs): options for the kafka_topic fixture")
    config.addinivalue_line("markers", "kafka_cluster(brokers=3, **configs): options for the kafka_cluster fixture")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A test that failed shows the output of the broker processes it started beside its
    traceback: what the broker saw is most of what explains a failure there."""
    report = yield
    if call.when == "call" and report.failed:
        started: list[BrokerProcess] = item.stash.get(BROKER_PROCESSES, [])
        for number, broker in enumerate(started):
            output = "".join(broker.output[-BROKER_OUTPUT_LINES:])
            report.sections.append((f"broker process {number} ({broker.data_dir}), last lines", output))
    return report


def _check_errors(config: pytest.Config) -> bool:
    value = str(config.getini(ERRORS_INI))
    if value not in ("fail", "ignore"):
        raise pytest.UsageError(f"{ERRORS_INI} must be fail or ignore, not {value!r}")
    return value == "fail"


@pytest.fixture(scope="session")
def kafka_broker_config() -> Mapping[str, str]:
    """Override in a conftest.py (as a session fixture) to configure ``kafka_broker``."""
    return {}


@pytest.fixture(scope="session")
def kafka_broker(kafka_broker_config: Mapping[str, str], pytestconfig: pytest.Config) -> Iterator[InProcessBroker]:
    pytestconfig.stash[STARTED_WITH] = dict(kafka_broker_config)
    with InProcessBroker(overrides=kafka_broker_config) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: InProcessBroker) -> str:
    return kafka_broker.bootstrap_servers


@pytest.fixture
def kafka_topic_name(request: pytest.FixtureRequest) -> Iterator[str]:
    legal = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[: TOPIC_NAME_CHARS_MAX - 9]
    name = f"{legal}-{uuid.uuid4().hex[:8]}"
    yield name
    if "kafka_broker" in request.fixturenames:
        broker: InProcessBroker = request.getfixturevalue("kafka_broker")
        if broker.running:
            broker.delete_topics([topic for topic in broker.topics() if topic.startswith(name)])


@pytest.fixture
def kafka_topic(kafka_broker: InProcessBroker, kafka_topic_name: str, request: pytest.FixtureRequest) -> str:
    marker = request.node.get_closest_marker("kafka_topic")
    options = dict(marker.kwargs) if marker else {}
    partitions = int(options.pop("partitions", os.environ.get("KAFKALIKE_TOPIC_PARTITIONS", "1")))
    configs = {name.replace("_", "."): str(value) for name, value in options.items()}
    kafka_broker.create_topic(kafka_topic_name, partitions, configs)
    return kafka_topic_name


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    marker = request.node.get_closest_marker("kafka_cluster")
    options = dict(marker.kwargs) if marker else {}
    brokers = int(options.pop("brokers", 3))
    configs = {name.replace("_", "."): str(value) for name, value in options.items()}
    cluster = Cluster(brokers=brokers, overrides=configs)
    with cluster:
        yield cluster
        cluster.heal()
    errors = cluster.logged_errors if _check_errors(request.config) else []
    if errors:
        pytest.fail("the kafka_cluster logged errors during this test:\n" + "\n".join(errors), pytrace=False)


@pytest.fixture
def kafka_broker_process(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def start(*overrides: str) -> BrokerProcess:
        broker = BrokerProcess(tmp_path / f"kafkalike-{len(started)}", overrides)
        started.append(broker)
        return broker.start()

    request.node.stash[BROKER_PROCESSES] = started
    yield start
    reports = []
    for number, broker in enumerate(started):
        problems = _stop_process(broker)
        if _check_errors(request.config) and broker.logged_errors():
            problems.append("logged errors")
        if problems:
            output = "".join(broker.output[-200:])
            reports.append(f"broker process {number} ({broker.data_dir}): {', '.join(problems)}; output:\n{output}")
    if reports:
        pytest.fail("\n\n".join(reports), pytrace=False)


def _stop_process(broker: BrokerProcess) -> list[str]:
    """Stop it cleanly if it still runs; what went wrong."""
    if not broker.running:
        return []
    try:
        code = broker.stop()
    except subprocess.TimeoutExpired:
        broker.kill()
        return ["did not stop after SIGTERM"]
    return [] if code == 0 else [f"exited with {code} when stopped"]


@pytest.fixture(autouse=True)
def _kafka_broker_checks(request: pytest.FixtureRequest) -> Iterator[None]:
    """For tests that use ``kafka_broker``: afterwards, clear its faults and check it is well."""
    if "kafka_broker" not in request.fixturenames:
        yield
        return
    broker: InProcessBroker = request.getfixturevalue("kafka_broker")
    wanted = dict(request.getfixturevalue("kafka_broker_config"))
    started_with = request.config.stash[STARTED_WITH]
    if wanted != started_with:
        pytest.fail(
            f"this test's kafka_broker_config is {wanted}, but the session's kafka_broker was started with "
            f"{started_with} for other tests: define kafka_broker_config once, where every test sees it",
            pytrace=False,
        )
    since = len(broker.logged_errors)
    yield
    if broker.running:
        broker.faults.clear()
    errors = broker.logged_errors[since:] if _check_errors(request.config) else []
    if errors or not broker.running:
        what = "stopped" if not broker.running else "logged errors"
        pytest.fail(f"the kafka_broker {what} during this test:\n" + "\n".join(errors), pytrace=False)
