"""Apache Kafka's own command-line tools, run from the Maven Central jars with ``java -cp 'lib/*' MAIN``
(what the distribution's ``bin/kafka-*.sh`` wrappers run), against a broker.

Each scenario is one tool doing one job, checked by its output; topics and records a scenario needs
beforehand are made with this project's raw protocol client, so scenarios do not depend on each other.
"""

from __future__ import annotations

import re
import time
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from compat_lib.results import FAIL, PASS, Row, SuiteRun, short
from compat_lib.runner import COMPAT, WORK, broker_faults, have, java_env, kafkalike_broker, run, say, tail
from compat_lib.suites import MAVEN, setup_failure
from kafkalike.testing.wire_client import WireClient

TOOLS_POM = COMPAT / "java" / "tools"

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIGS = "kafka.admin.ConfigCommand"
# Tools rewritten in Java after 4.0, by their old main class: the new one, where the jars have it.
MOVED_MAINS = {CONFIGS: "org.apache.kafka.tools.ConfigCommand"}
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"

TOOL_TIMEOUT_S = 60


def ak_lib_dir(version: str) -> Path:
    return WORK / f"ak-{version}" / "lib"


def resolve_ak(version: str) -> str | None:
    """Copy kafka_2.13, kafka-tools and their dependencies into .work/ak-VERSION/lib (from ~/.m2,
    downloading what is missing). None when done, else why not."""
    lib = ak_lib_dir(version)
    marker = lib / ".complete"
    if marker.exists() and marker.stat().st_mtime > (TOOLS_POM / "pom.xml").stat().st_mtime:
        return None
    if not have("mvn"):
        return "mvn is needed on PATH"
    say(f"resolving Apache Kafka {version} (kafka_2.13, kafka-tools) from Maven")
    ran = run(
        [*MAVEN, "dependency:copy-dependencies", f"-Dkafka.version={version}", f"-DoutputDirectory={lib}"],
        cwd=TOOLS_POM,
        timeout_s=1200,
        env=java_env(),
        log_name=f"resolve-ak-{version}",
    )
    if ran.returncode != 0 or not any(lib.glob("kafka_2.13-*.jar")):
        return f"mvn dependency:copy-dependencies exited {ran.returncode}: {tail(ran.stdout + ran.stderr)}"
    marker.write_text(version + "\n")
    return None


class CheckFailed(Exception):
    pass


@dataclass
class Tools:
    lib: Path
    bootstrap: str
    log4j: Path
    suffix: str = ""
    mains: dict[str, str] = field(default_factory=dict)  # old main class -> the one these jars have

    def topic(self, tag: str) -> str:
        return f"tools-{tag}-{self.suffix}"

    def run(self, main: str, *args: str, stdin: str | None = None, ok: bool = True) -> str:
        """Run one tool; its stdout and stderr together. With ``ok``, a non-zero exit fails the check."""
        command = [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={self.log4j}",
            "-cp",
            str(self.lib / "*"),
            self.mains.get(main, main),
            *args,
        ]
        ran = run(command, timeout_s=TOOL_TIMEOUT_S, stdin=stdin, env=java_env())
        output = ran.stdout + ran.stderr
        if ran.timed_out:
            raise CheckFailed(f"{main.rsplit('.', 1)[-1]} still running after {TOOL_TIMEOUT_S} s: {tail(output)}")
        if ok and ran.returncode != 0:
            raise CheckFailed(f"{main.rsplit('.', 1)[-1]} exited {ran.returncode}: {error_line(output)}")
        return output

    # -- helpers that use the raw protocol client, not a tool ----------------------------------

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        host, _, port = self.bootstrap.rpartition(":")
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": 10000,
            "validate_only": False,
        }
        with WireClient(host, int(port)) as client:
            response = client.request(19, 5, body)
            code = response.topics[0].error_code
            if code != 0:
                raise CheckFailed(f"creating {name} failed with error {code}")
            # Apache Kafka makes the leader ready a moment after CreateTopics returns.
            wait_for(lambda: _partitions_ready(client, name, partitions), f"{name} to have leaders")

    def produce(self, topic: str, count: int, partition: int = 0) -> None:
        from kafkalike.protocol.records import Record, build_batch

        host, _, port = self.bootstrap.rpartition(":")
        now = int(time.time() * 1000)
        batch = build_batch(
            [Record(key=b"k%d" % i, value=b"value-%d" % i, timestamp_delta=i) for i in range(count)],
            base_timestamp=now,
        )
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
        }
        with WireClient(host, int(port)) as client:
            code = client.request(0, 9, body).responses[0].partition_responses[0].error_code
            if code != 0:
                raise CheckFailed(f"producing to {topic} failed with error {code}")


def _partitions_ready(client: WireClient, name: str, partitions: int) -> bool:
    """Every partition answers ListOffsets: its leader takes writes (Apache Kafka's metadata names
    a leader a moment before that leader accepts records)."""
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(partitions)
                ],
            }
        ],
    }
    response = client.request(2, 7, body)
    return all(p.error_code == 0 for p in response.topics[0].partitions)


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise CheckFailed(f"timed out waiting for {what}")
        time.sleep(0.1)


def error_line(output: str) -> str:
    """The line of a tool's output that says what went wrong."""
    for line in output.splitlines():
        if re.search(r"(Exception|Error)\b.*:", line) and not line.lstrip().startswith("at "):
            return short(line, 200)
    return short(tail(output), 200)


def expect(output: str, *needles: str) -> None:
    for needle in needles:
        if needle not in output:
            raise CheckFailed(f"expected {needle!r} in the output: {error_line(output)}")


# -- the scenarios -------------------------------------------------------------------------------


def topics_create(t: Tools) -> None:
    name = t.topic("create")
    out = t.run(TOPICS, "--bootstrap-server", t.bootstrap, "--create", "--topic", name, "--partitions", "2",
                "--replication-factor", "1", "--config", "retention.ms=86400000")  # fmt: skip
    expect(out, f"Created topic {name}.")
    out = t.run(TOPICS, "--bootstrap-server", t.bootstrap, "--create", "--topic", name, "--partitions", "1", ok=False)
    expect(out, "already exists")


def topics_list(t: Tools) -> None:
    name = t.topic("list")
    t.create_topic(name)
    out = t.run(TOPICS, "--bootstrap-server", t.bootstrap, "--list")
    if name not in out.split():
        raise CheckFailed(f"--list lacks {name}: {short(out, 200)}")


def topics_describe(t: Tools) -> None:
    name = t.topic("describe")
    t.create_topic(name, 2, {"retention.ms": "86400000"})
    out = t.run(TOPICS, "--bootstrap-server", t.bootstrap, "--describe", "--topic", name)
    expect(out, f"Topic: {name}", "PartitionCount: 2", "ReplicationFactor: 1", "retention.ms=86400000", "Partition: 1")
    if not re.search(r"Partition: 0\s+Leader: \d+\s+Replicas: \d+\s+Isr: \d+", out):
        raise CheckFailed(f"no leader/replicas/isr line: {short(out, 300)}")


def topics_alter_partitions(t: Tools) -> None:
    name = t.topic("alter")
    t.create_topic(name, 1)
    t.run(TOPICS, "--bootstrap-server", t.bootstrap, "--alter", "--topic", name, "--partitions", "3")
    out = t.run(TOPICS, "--bootstrap-server", t.bootstrap, "--describe", "--topic", name)
    expect(out, "PartitionCount: 3")


def topics_delete(t: Tools) -> None:
    name = t.topic("delete")
    t.create_topic(name, 1)
    t.run(TOPICS, "--bootstrap-server", t.bootstrap, "--delete", "--topic", name)
    wait_for(lambda: name not in t.run(TOPICS, "--bootstrap-server", t.bootstrap, "--list").split(), "the topic to go")


def console_producer(t: Tools) -> None:
    name = t.topic("console-producer")
    t.create_topic(name, 1)
    lines = "".join(f"key-{i}:value-{i}\n" for i in range(20))
    t.run(CONSOLE_PRODUCER, "--bootstrap-server", t.bootstrap, "--topic", name,
          "--property", "parse.key=true", "--property", "key.separator=:", stdin=lines)  # fmt: skip
    out = t.run(GET_OFFSETS, "--bootstrap-server", t.bootstrap, "--topic", name, "--time", "-1")
    expect(out, f"{name}:0:20")


def console_consumer(t: Tools) -> None:
    name = t.topic("console-consumer")
    t.create_topic(name, 1)
    t.produce(name, 10)
    out = t.run(CONSOLE_CONSUMER, "--bootstrap-server", t.bootstrap, "--topic", name, "--partition", "0",
                "--offset", "3", "--max-messages", "7", "--timeout-ms", "30000",
                "--property", "print.key=true", "--property", "print.offset=true")  # fmt: skip
    expect(out, "Processed a total of 7 messages", "Offset:3\tk3\tvalue-3", "Offset:9\tk9\tvalue-9")
    if "value-2" in out:
        raise CheckFailed("read before the requested offset")


def console_consumer_group(t: Tools) -> None:
    name = t.topic("console-group")
    t.create_topic(name, 2)
    t.produce(name, 5, partition=0)
    t.produce(name, 5, partition=1)
    out = t.run(CONSOLE_CONSUMER, "--bootstrap-server", t.bootstrap, "--topic", name, "--group", f"g-{name}",
                "--from-beginning", "--max-messages", "10", "--timeout-ms", "30000")  # fmt: skip
    expect(out, "Processed a total of 10 messages")


def consumer_groups_list(t: Tools) -> None:
    out = t.run(CONSUMER_GROUPS, "--bootstrap-server", t.bootstrap, "--list", "--timeout", "15000")
    if "Exception" in out or "Error" in out:
        raise CheckFailed(error_line(out))


def consumer_groups_describe(t: Tools) -> None:
    name = t.topic("groups-describe")
    group = f"g-{name}"
    t.create_topic(name, 1)
    t.produce(name, 4)
    t.run(CONSOLE_CONSUMER, "--bootstrap-server", t.bootstrap, "--topic", name, "--group", group,
          "--from-beginning", "--max-messages", "4", "--timeout-ms", "30000")  # fmt: skip
    out = t.run(
        CONSUMER_GROUPS, "--bootstrap-server", t.bootstrap, "--describe", "--group", group, "--timeout", "15000"
    )
    if not re.search(rf"{re.escape(group)}\s+{re.escape(name)}\s+0\s+4\s+4\s+0", out):
        raise CheckFailed(f"no committed offset 4 / end 4 / lag 0 line: {error_line(out)}")


def configs_describe_topic(t: Tools) -> None:
    name = t.topic("configs")
    t.create_topic(name, 1, {"retention.ms": "86400000"})
    out = t.run(CONFIGS, "--bootstrap-server", t.bootstrap, "--entity-type", "topics", "--entity-name", name,
                "--describe")  # fmt: skip
    expect(out, f"Dynamic configs for topic {name} are:", "retention.ms=86400000", "DYNAMIC_TOPIC_CONFIG:retention.ms")
    out = t.run(CONFIGS, "--bootstrap-server", t.bootstrap, "--entity-type", "topics", "--entity-name", name,
                "--describe", "--all")  # fmt: skip
    expect(out, "cleanup.policy=delete", "max.message.bytes=1048588")


def configs_describe_broker(t: Tools) -> None:
    out = t.run(CONFIGS, "--bootstrap-server", t.bootstrap, "--entity-type", "brokers", "--entity-name", "1",
                "--describe", "--all")  # fmt: skip
    expect(out, "All configs for broker 1 are:", "num.partitions=", "log.retention.hours=")


def configs_alter_topic(t: Tools) -> None:
    name = t.topic("alter-configs")
    t.create_topic(name, 1)
    out = t.run(CONFIGS, "--bootstrap-server", t.bootstrap, "--entity-type", "topics", "--entity-name", name,
                "--alter", "--add-config", "retention.ms=3600000")  # fmt: skip
    expect(out, f"Completed updating config for topic {name}.")
    out = t.run(CONFIGS, "--bootstrap-server", t.bootstrap, "--entity-type", "topics", "--entity-name", name,
                "--describe")  # fmt: skip
    expect(out, "retention.ms=3600000")


def get_offsets(t: Tools) -> None:
    name = t.topic("offsets")
    t.create_topic(name, 2)
    t.produce(name, 5, partition=0)
    t.produce(name, 3, partition=1)
    out = t.run(GET_OFFSETS, "--bootstrap-server", t.bootstrap, "--topic", name, "--time", "-1")
    expect(out, f"{name}:0:5", f"{name}:1:3")
    out = t.run(GET_OFFSETS, "--bootstrap-server", t.bootstrap, "--topic", name, "--time", "-2")
    expect(out, f"{name}:0:0", f"{name}:1:0")
    out = t.run(GET_OFFSETS, "--bootstrap-server", t.bootstrap, "--topic", name, "--time", "-3")
    expect(out, f"{name}:0:4", f"{name}:1:2")


def transactions_list(t: Tools) -> None:
    out = t.run(TRANSACTIONS, "--bootstrap-server", t.bootstrap, "list")
    expect(out, "TransactionalId")


def producer_perf_test(t: Tools) -> None:
    name = t.topic("producer-perf")
    t.create_topic(name, 3)
    out = t.run(PRODUCER_PERF, "--topic", name, "--num-records", "20000", "--record-size", "200", "--throughput", "-1",
                "--producer-props", f"bootstrap.servers={t.bootstrap}", "acks=all", "compression.type=lz4")  # fmt: skip
    expect(out, "20000 records sent")
    offsets = t.run(GET_OFFSETS, "--bootstrap-server", t.bootstrap, "--topic", name, "--time", "-1")
    total = sum(int(m) for m in re.findall(rf"{re.escape(name)}:\d+:(\d+)", offsets))
    if total != 20000:
        raise CheckFailed(f"the topic holds {total} records, not 20000")


def consumer_perf_test(t: Tools) -> None:
    name = t.topic("consumer-perf")
    t.create_topic(name, 1)
    for _ in range(4):
        t.produce(name, 500)
    out = t.run(CONSUMER_PERF, "--bootstrap-server", t.bootstrap, "--topic", name, "--messages", "2000",
                "--timeout", "30000")  # fmt: skip
    lines = [line for line in out.splitlines() if re.match(r"\d{4}-\d\d-\d\d", line)]
    if not lines or lines[-1].split(",")[4].strip() != "2000":
        raise CheckFailed(f"expected 2000 messages consumed: {error_line(out)}")


def delete_records(t: Tools) -> None:
    name = t.topic("delete-records")
    t.create_topic(name, 1)
    t.produce(name, 10)
    spec = WORK / f"delete-records-{t.suffix}.json"
    spec.write_text(f'{{"partitions": [{{"topic": "{name}", "partition": 0, "offset": 6}}], "version": 1}}')
    try:
        out = t.run(DELETE_RECORDS, "--bootstrap-server", t.bootstrap, "--offset-json-file", str(spec))
    finally:
        spec.unlink(missing_ok=True)
    expect(out, f"partition: {name}-0\tlow_watermark: 6")
    expect(t.run(GET_OFFSETS, "--bootstrap-server", t.bootstrap, "--topic", name, "--time", "-2"), f"{name}:0:6")


def metadata_quorum_describe(t: Tools) -> None:
    out = t.run(METADATA_QUORUM, "--bootstrap-server", t.bootstrap, "describe", "--status")
    expect(out, "ClusterId:", "LeaderId:", "CurrentVoters:")


def log_dirs_describe(t: Tools) -> None:
    name = t.topic("log-dirs")
    t.create_topic(name, 1)
    t.produce(name, 3)
    out = t.run(LOG_DIRS, "--bootstrap-server", t.bootstrap, "--describe", "--topic-list", name)
    expect(out, f'"partition":"{name}-0"')


SCENARIOS: dict[str, Callable[[Tools], None]] = {
    "kafka-topics-create": topics_create,
    "kafka-topics-list": topics_list,
    "kafka-topics-describe": topics_describe,
    "kafka-topics-alter-partitions": topics_alter_partitions,
    "kafka-topics-delete": topics_delete,
    "kafka-console-producer": console_producer,
    "kafka-console-consumer": console_consumer,
    "kafka-console-consumer-group": console_consumer_group,
    "kafka-consumer-groups-list": consumer_groups_list,
    "kafka-consumer-groups-describe": consumer_groups_describe,
    "kafka-configs-describe-topic": configs_describe_topic,
    "kafka-configs-describe-broker": configs_describe_broker,
    "kafka-configs-alter-topic": configs_alter_topic,
    "kafka-get-offsets": get_offsets,
    "kafka-transactions-list": transactions_list,
    "kafka-producer-perf-test": producer_perf_test,
    "kafka-consumer-perf-test": consumer_perf_test,
    "kafka-delete-records": delete_records,
    "kafka-metadata-quorum-describe": metadata_quorum_describe,
    "kafka-log-dirs-describe": log_dirs_describe,
}


def moved_mains(lib: Path) -> dict[str, str]:
    """The tools whose main class these jars have under its new name."""
    classes: set[str] = set()
    for jar in lib.glob("kafka-tools-*.jar"):
        with zipfile.ZipFile(jar) as archive:
            classes |= {n.removesuffix(".class").replace("/", ".") for n in archive.namelist()}
    return {old: new for old, new in MOVED_MAINS.items() if new in classes}


def run_scenarios(client: str, lib: Path, bootstrap: str) -> list[Row]:
    log4j = WORK / "tools-log4j2.properties"
    log4j.write_text(
        "appender.err.type = Console\nappender.err.name = STDERR\nappender.err.target = SYSTEM_ERR\n"
        "appender.err.layout.type = PatternLayout\nappender.err.layout.pattern = %p %m (%c)%n\n"
        "rootLogger.level = ERROR\nrootLogger.appenderRef.err.ref = STDERR\n"
    )
    tools = Tools(lib, bootstrap, log4j, uuid.uuid4().hex[:8], moved_mains(lib))
    rows = []
    for name, scenario in SCENARIOS.items():
        started = time.monotonic()
        try:
            scenario(tools)
            rows.append(Row(client, name, PASS, "", time.monotonic() - started))
        except CheckFailed as exc:
            rows.append(Row(client, name, FAIL, str(exc), time.monotonic() - started))
        except Exception as exc:
            rows.append(Row(client, name, FAIL, f"{type(exc).__name__}: {exc}", time.monotonic() - started))
    return rows


def tools_suite(version: str, bootstrap: str | None = None, label: str = "") -> SuiteRun:
    client = f"kafka-cli-{version}"
    suite = SuiteRun(
        f"kafka cli {version}{label}", clients={client: f"{version} (org.apache.kafka:kafka-tools, kafka_2.13)"}
    )
    started = time.monotonic()
    if not have("java"):
        return setup_failure(suite, client, "java is needed on PATH")
    why = resolve_ak(version)
    if why:
        return setup_failure(suite, client, why)
    say(f"running the Kafka command-line tools {version}{label}")
    if bootstrap is None:
        with kafkalike_broker("kafka-cli") as broker:
            suite.rows = run_scenarios(client, ak_lib_dir(version), broker.bootstrap)
        fault = broker_faults(broker)
        suite.rows.append(Row(client, "broker-healthy", FAIL if fault else PASS, fault))
    else:
        suite.rows = run_scenarios(client, ak_lib_dir(version), bootstrap)
    suite.seconds = time.monotonic() - started
    return suite
