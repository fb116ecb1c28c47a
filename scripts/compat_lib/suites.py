"""The suites: the Java client (per version), the Go clients, and the pytest-based ones (the Python
clients, the differential runs against Apache Kafka). Each returns a SuiteRun; a suite that cannot
even start (no JDK, a build that fails) reports one failed ``setup`` row instead of crashing the run.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from compat_lib.results import FAIL, NA, PASS, Row, SuiteRun, short
from compat_lib.runner import (
    COMPAT,
    LOGS,
    WORK,
    Ran,
    broker_faults,
    have,
    java_env,
    kafkalike_broker,
    run,
    say,
    tail,
)

JAVA_DIR = COMPAT / "java"
GO_DIR = COMPAT / "go"
MAVEN = ["mvn", "-B", "-q", "-Dstyle.color=never"]


def setup_failure(suite: SuiteRun, client: str, why: str) -> SuiteRun:
    say(f"{suite.name}: setup failed: {why}")
    suite.rows.append(Row(client, "setup", FAIL, why))
    return suite


def json_rows(ran: Ran, client_of: Callable[[dict[str, object]], str]) -> tuple[list[Row], dict[str, str]]:
    """Rows from a scenario runner's JSON lines; versions as the runner reported them."""
    rows, versions = [], {}
    for line in ran.stdout.splitlines():
        if not line.startswith("{"):
            continue
        item = json.loads(line)
        client = client_of(item)
        versions[client] = str(item.get("client_version", "?"))
        status = {"pass": PASS, "fail": FAIL}.get(str(item["status"]), NA)
        rows.append(Row(client, str(item["scenario"]), status, str(item.get("error") or ""), int(item["ms"]) / 1000))
    return rows, versions


def check_broker_row(client: str, broker: object) -> Row:
    fault = broker_faults(broker)  # type: ignore[arg-type]
    return Row(client, "broker-healthy", FAIL if fault else PASS, fault)


# -- Java ------------------------------------------------------------------------------------------


def java_jar(version: str) -> Path:
    return WORK / "java" / f"client-{version}" / f"compat-client-{version}.jar"


def _newest_source(root: Path) -> float:
    return max(p.stat().st_mtime for p in [root / "pom.xml", *root.glob("src/**/*.java")])


def build_java_client(version: str) -> str | None:
    """Build the scenario jar for one kafka-clients version; None when it is ready, else why not."""
    jar = java_jar(version)
    source = JAVA_DIR / "client"
    if jar.exists() and jar.stat().st_mtime > _newest_source(source):
        return None
    ran = run(
        [*MAVEN, "package", f"-Dkafka.version={version}"],
        cwd=source,
        timeout_s=900,
        env=java_env(),
        log_name=f"build-java-{version}",
    )
    if ran.returncode != 0 or not jar.exists():
        return f"mvn package (kafka-clients {version}) exited {ran.returncode}: {tail(ran.stdout + ran.stderr)}"
    return None


def java_suite(version: str, bootstrap: str | None = None, label: str = "") -> SuiteRun:
    """The Java client scenarios with kafka-clients ``version`` against a fresh kafkalike broker
    (or, with ``bootstrap``, against that broker: the reference runs)."""
    client = f"java-{version}"
    suite = SuiteRun(f"java {version}{label}")
    started = time.monotonic()
    if not have("java") or not have("mvn"):
        return setup_failure(suite, client, "java and mvn are needed on PATH")
    say(f"building the Java scenarios for kafka-clients {version}")
    why = build_java_client(version)
    if why:
        return setup_failure(suite, client, why)
    args = ["java", "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", str(java_jar(version))]
    say(f"running the Java scenarios (kafka-clients {version}){label}")
    if bootstrap is None:
        with kafkalike_broker(f"java-{version}") as broker:
            ran = run([*args, broker.bootstrap], timeout_s=1800, env=java_env(), log_name=f"java-{version}")
        rows, versions = json_rows(ran, lambda _: client)
        rows.append(check_broker_row(client, broker))
    else:
        ran = run([*args, bootstrap], timeout_s=1800, env=java_env(), log_name=f"java-{version}{label}")
        rows, versions = json_rows(ran, lambda _: client)
    if ran.returncode != 0:
        rows.append(Row(client, "runner", FAIL, f"scenario runner exited {ran.returncode}: {tail(ran.stderr)}"))
    suite.rows, suite.clients = rows, versions or {client: version}
    suite.seconds = time.monotonic() - started
    return suite


# -- Go --------------------------------------------------------------------------------------------

GO_BINARY = WORK / "go" / "compat"
GO_CLIENTS = {"franz": "franz-go", "sarama": "sarama"}


def go_suite(bootstrap: str | None = None, label: str = "") -> SuiteRun:
    suite = SuiteRun(f"go{label}")
    started = time.monotonic()
    if not have("go"):
        return setup_failure(suite, "go", "go is needed on PATH")
    say("building the Go scenarios")
    env = dict(os.environ, GOFLAGS="-mod=mod")
    built = run(["go", "build", "-o", str(GO_BINARY), "."], cwd=GO_DIR, timeout_s=900, env=env, log_name="build-go")
    if built.returncode != 0:
        return setup_failure(suite, "go", f"go build exited {built.returncode}: {tail(built.stderr)}")
    for flag, client in GO_CLIENTS.items():
        say(f"running the {client} scenarios{label}")
        args = [str(GO_BINARY), "-client", flag, "-bootstrap"]
        if bootstrap is None:
            with kafkalike_broker(client) as broker:
                ran = run([*args, broker.bootstrap], timeout_s=1200, log_name=f"go-{client}")
            rows, versions = json_rows(ran, lambda _, c=client: c)  # type: ignore[misc]
            rows.append(check_broker_row(client, broker))
        else:
            ran = run([*args, bootstrap], timeout_s=1200, log_name=f"go-{client}{label}")
            rows, versions = json_rows(ran, lambda _, c=client: c)  # type: ignore[misc]
        if ran.returncode != 0:
            rows.append(Row(client, "runner", FAIL, f"scenario runner exited {ran.returncode}: {tail(ran.stderr)}"))
        suite.rows += rows
        suite.clients.update(versions or {client: "?"})
    suite.seconds = time.monotonic() - started
    return suite


# -- pytest ----------------------------------------------------------------------------------------

# Test modules named test_<client>.py report as <client>, with these spellings.
PYTHON_CLIENTS = {"kafka_python": "kafka-python", "confluent_kafka": "confluent-kafka", "confluent": "confluent-kafka"}
PYTHON_DISTRIBUTIONS = {"kafka-python": "kafka-python", "confluent-kafka": "confluent-kafka", "aiokafka": "aiokafka"}


def python_client_versions(clients: list[str]) -> dict[str, str]:
    versions = {}
    for client in clients:
        dist = PYTHON_DISTRIBUTIONS.get(client)
        try:
            version = metadata.version(dist) if dist else "(tests using several of the clients above)"
        except metadata.PackageNotFoundError:
            version = "not installed"
        if client == "confluent-kafka":
            try:
                import confluent_kafka

                version += f" (librdkafka {confluent_kafka.libversion()[0]})"
            except ImportError:
                pass
        if client == "kcat" and have("kcat"):
            ran = run(["kcat", "-V"], timeout_s=30)
            match = re.search(r"^Version (\S+)", ran.stdout + ran.stderr, re.MULTILINE)
            version = match.group(1) if match else tail(ran.stdout, 1)
            lib = re.search(r"librdkafka (\d\S*)", ran.stdout + ran.stderr)
            if lib:
                version += f" (librdkafka {lib.group(1)})"
        versions[client] = version or "?"
    return versions


KNOWN_PYTHON_CLIENTS = ("kafka_python", "confluent_kafka", "confluent", "aiokafka", "kcat")


def client_of_module(module: str) -> tuple[str, str]:
    """test_<client>.py -> (client, ""); test_<topic>_<client>.py -> (client, "<topic>.");
    a module named after no client (test_durability.py) is a "client" of its own."""
    stem = module.rsplit(".", 1)[-1].removeprefix("test_")
    for known in KNOWN_PYTHON_CLIENTS:
        if stem == known or stem.endswith("_" + known):
            prefix = stem[: -len(known)].rstrip("_")
            return PYTHON_CLIENTS.get(known, known), f"{prefix}." if prefix else ""
    return stem.replace("_", "-"), ""


def junit_rows(path: Path, client_of: Callable[[str, str], tuple[str, str]]) -> list[Row]:
    """One row per junit test case; ``client_of(classname, name)`` gives (client, scenario)."""
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        client, scenario = client_of(case.get("classname", ""), case.get("name", ""))
        seconds = float(case.get("time") or 0)
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            rows.append(Row(client, scenario, FAIL, _junit_error(failure), seconds))
        elif skipped is not None:
            rows.append(Row(client, scenario, NA, short(skipped.get("message") or "skipped", 160), seconds))
        else:
            rows.append(Row(client, scenario, PASS, "", seconds))
    return rows


def _junit_error(element: ET.Element) -> str:
    message = element.get("message") or ""
    text = element.text or ""
    # pytest's message is the exception line; the last "E   " lines of the traceback say more.
    detail = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    return short(message if message and len(message) > 20 else " ".join(detail[-3:]) or message)


def pytest_suite(
    name: str,
    args: list[str],
    client_of: Callable[[str, str], tuple[str, str]],
    *,
    env: dict[str, str] | None = None,
    timeout_s: float = 1800,
) -> tuple[SuiteRun, Ran | None]:
    suite = SuiteRun(name)
    started = time.monotonic()
    junit = WORK / f"junit-{name}.xml"
    junit.unlink(missing_ok=True)
    say(f"running pytest for {name}")
    ran = run(
        [sys.executable, "-m", "pytest", *args, f"--junitxml={junit}", "-p", "no:cacheprovider", "-q"],
        cwd=COMPAT.parent,
        timeout_s=timeout_s,
        env=env,
        log_name=f"pytest-{name}",
    )
    suite.seconds = time.monotonic() - started
    if not junit.exists():
        why = "timed out" if ran.timed_out else f"exited {ran.returncode}"
        setup_failure(suite, name, f"pytest {why} without a junit report: {tail(ran.stdout + ran.stderr)}")
        return suite, ran
    suite.rows = junit_rows(junit, client_of)
    if ran.timed_out:
        suite.rows.append(Row(name, "runner", FAIL, f"pytest killed after {timeout_s:.0f} s"))
    elif ran.returncode not in (0, 1, 5):  # 1: some tests failed; 5: none collected
        suite.rows.append(Row(name, "runner", FAIL, f"pytest exited {ran.returncode}: {tail(ran.stdout)}"))
    suite.notes.append(f"log: {(LOGS / f'pytest-{name}.log').relative_to(COMPAT.parent)}")
    return suite, ran


def _python_row_name(classname: str, name: str) -> tuple[str, str]:
    if not classname:  # a module that failed to import: pytest names the module, no test
        return client_of_module(name)[0], f"{name.rsplit('.', 1)[-1]}.collect"
    parts = classname.split(".")
    module = next((p for p in reversed(parts) if p.startswith("test_")), parts[-1])
    cls = parts[-1] if parts[-1] != module else ""
    scenario = name.removeprefix("test_")
    client, prefix = client_of_module(module)
    return client, prefix + (f"{cls}.{scenario}" if cls else scenario)


def python_clients_suite() -> SuiteRun:
    """The Python clients' tests (compat_tests/test_*.py), whatever clients they cover."""
    tests = sorted(p for p in COMPAT.glob("test_*.py"))
    if not tests:
        suite = SuiteRun("python clients")
        suite.rows.append(Row("python", "tests-present", NA, "no compat_tests/test_*.py yet"))
        return suite
    suite, _ = pytest_suite(
        "python-clients",
        # A module that does not import (someone editing it) is one failed row, not a lost suite.
        ["--continue-on-collection-errors", *(str(p.relative_to(COMPAT.parent)) for p in tests)],
        _python_row_name,
    )
    suite.name = "python clients"
    clients = list(dict.fromkeys(r.client for r in suite.rows))
    suite.clients = python_client_versions(clients)
    return suite


def differential_suite(ak_lib: Path, ak_version: str) -> SuiteRun:
    env = dict(os.environ, KAFKALIKE_AK_LIB=str(ak_lib), KAFKALIKE_COMPAT_LOGS=str(LOGS))

    def name(classname: str, test: str) -> tuple[str, str]:
        module = classname.rsplit(".", 1)[-1].removeprefix("test_")
        return "differential", f"{module}.{test.removeprefix('test_')}"

    suite, _ = pytest_suite(
        "differential", ["compat_tests/differential", "-m", "differential"], name, env=env, timeout_s=1500
    )
    suite.clients = {"differential": f"Apache Kafka {ak_version} (KRaft, combined) vs kafkalike"}
    return suite
