"""The reference runs: the Java, Go and tools scenarios against Apache Kafka itself.

A scenario that fails there is wrong (or asks for something Apache Kafka does not do), whatever
kafkalike does; the report shows these runs apart from the judged rows.
"""

from __future__ import annotations

import shutil

from compat_lib.results import FAIL, Row, SuiteRun
from compat_lib.runner import BROKER_OVERRIDES, WORK, have, say
from compat_lib.suites import go_suite, java_suite
from compat_lib.tools import ak_lib_dir, resolve_ak, tools_suite


def reference_suites(ak_version: str, java_versions: list[str], only: list[str]) -> list[SuiteRun]:
    from kafkalike.testing.apache_kafka import ApacheKafkaProcess

    label = f" vs Apache Kafka {ak_version}"
    failed = SuiteRun(f"reference{label}")
    if not have("java"):
        failed.rows.append(Row("apache-kafka", "setup", FAIL, "java is needed on PATH"))
        return [failed]
    why = resolve_ak(ak_version)
    if why:
        failed.rows.append(Row("apache-kafka", "setup", FAIL, why))
        return [failed]
    work = WORK / "brokers" / "apache-kafka-reference"
    shutil.rmtree(work, ignore_errors=True)
    say(f"starting Apache Kafka {ak_version} for the reference runs")
    broker = ApacheKafkaProcess(ak_lib_dir(ak_version), work, BROKER_OVERRIDES)
    try:
        broker.start()
    except (RuntimeError, OSError) as exc:
        failed.rows.append(Row("apache-kafka", "setup", FAIL, str(exc)[:500]))
        return [failed]
    suites = []
    try:
        if "java" in only:
            suites += [java_suite(v, broker.bootstrap, label) for v in java_versions]
        if "go" in only:
            suites.append(go_suite(broker.bootstrap, label))
        if "tools" in only:
            suites.append(tools_suite(ak_version, broker.bootstrap, label))
    finally:
        broker.stop()
        (WORK / "logs").mkdir(parents=True, exist_ok=True)
        (WORK / "logs" / "apache-kafka-reference.log").write_text("".join(broker.output))
        shutil.rmtree(work, ignore_errors=True)
    return suites
