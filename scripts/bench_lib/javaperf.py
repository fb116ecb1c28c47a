"""Apache Kafka's own load tools, kafka-producer-perf-test and kafka-consumer-perf-test, run from the
Maven Central jars (``java -cp 'LIB/*' org.apache.kafka.tools.ProducerPerformance ...``, what the
distribution's shell wrappers run).

The jar directory is the one the compatibility suite resolves (``compat_tests/.work/ak-VERSION/lib``,
made by ``scripts/compat_lib/tools.resolve_ak`` with ``mvn dependency:copy-dependencies``); if that
is not available, the same POM is resolved here into the benchmark's work directory.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOOLS_POM = ROOT / "compat_tests" / "java" / "tools"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
LOG4J = (
    "rootLogger.level = ERROR\nappender.err.type = Console\nappender.err.name = STDERR\n"
    "appender.err.target = SYSTEM_ERR\nappender.err.layout.type = PatternLayout\n"
    "appender.err.layout.pattern = %p %m (%c)%n\nrootLogger.appenderRef.err.ref = STDERR\n"
)
# The client JVMs: small and quick to start, so they take little of a 2-core machine from the broker.
CLIENT_JVM = ["-Xmx512m", "-XX:+UseParallelGC"]


def have_java() -> bool:
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


def resolve_lib(version: str, work: Path, say: Any) -> Path | None:
    """A directory with kafka_2.13, kafka-tools and their dependencies, or None (and why, said)."""
    compat_lib = ROOT / "compat_tests" / ".work" / f"ak-{version}" / "lib"
    if (compat_lib / ".complete").exists():
        return compat_lib
    try:
        sys.path.insert(0, str(ROOT / "scripts"))
        from compat_lib.tools import ak_lib_dir, resolve_ak

        why = resolve_ak(version)
        if why is None:
            return Path(ak_lib_dir(version))
        say(f"could not resolve Apache Kafka {version} jars: {why}")
    except ImportError:
        pass
    own = work / f"ak-{version}-lib"
    if (own / ".complete").exists():
        return own
    if shutil.which("mvn") is None:
        say("no mvn on PATH: no Apache Kafka jars")
        return None
    say(f"resolving Apache Kafka {version} jars from Maven Central into {own}")
    ran = subprocess.run(
        ["mvn", "-B", "-q", "dependency:copy-dependencies", f"-Dkafka.version={version}", f"-DoutputDirectory={own}"],
        cwd=TOOLS_POM,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if ran.returncode != 0 or not any(own.glob("kafka_2.13-*.jar")):
        say(f"mvn failed: {(ran.stdout + ran.stderr)[-500:]}")
        return None
    (own / ".complete").write_text(version + "\n")
    return own


class JavaTools:
    def __init__(self, lib: Path, work: Path) -> None:
        self.lib = lib
        work.mkdir(parents=True, exist_ok=True)
        self.log4j = work / "tools-log4j2.properties"
        self.log4j.write_text(LOG4J)

    def _run(self, main: str, args: list[str], timeout_s: float) -> str:
        java = shutil.which("java") or str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
        command = [java, *CLIENT_JVM, f"-Dlog4j2.configurationFile={self.log4j}", "-cp", str(self.lib / "*"), main]
        env = dict(os.environ)
        env.pop("JAVA_TOOL_OPTIONS", None)
        env.pop("_JAVA_OPTIONS", None)
        proc = subprocess.Popen(
            command + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
        )
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            raise RuntimeError(
                f"{main.rsplit('.', 1)[-1]} still running after {timeout_s:.0f} s: {out[-400:]}"
            ) from None
        if proc.returncode != 0:
            raise RuntimeError(f"{main.rsplit('.', 1)[-1]} exited {proc.returncode}: {out[-600:]}")
        return out

    def producer_perf(
        self,
        bootstrap: str,
        topic: str,
        records: int,
        size: int,
        acks: str,
        compression: str,
        timeout_s: float,
        throughput: int = -1,
    ) -> dict[str, Any]:
        props = [
            f"bootstrap.servers={bootstrap}",
            f"acks={acks}",
            f"compression.type={compression}",
            "linger.ms=5",
            "batch.size=65536",
            "buffer.memory=67108864",
        ]
        started = time.monotonic()
        out = self._run(
            PRODUCER_PERF,
            [
                "--topic",
                topic,
                "--num-records",
                str(records),
                "--record-size",
                str(size),
                "--throughput",
                str(throughput),
                "--producer-props",
                *props,
            ],
            timeout_s,
        )
        return parse_producer_perf(out, size) | {"wall_s": time.monotonic() - started}

    def consumer_perf(self, bootstrap: str, topic: str, messages: int, group: str, timeout_s: float) -> dict[str, Any]:
        out = self._run(
            CONSUMER_PERF,
            [
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                "--messages",
                str(messages),
                "--group",
                group,
                "--timeout",
                str(int(timeout_s * 1000)),
                "--hide-header",
            ],
            timeout_s + 60,
        )
        return parse_consumer_perf(out)


FINAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, "
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


def parse_producer_perf(out: str, size: int) -> dict[str, Any]:
    matches = list(FINAL.finditer(out))
    if not matches:
        raise RuntimeError(f"no summary line in ProducerPerformance output: {out[-600:]}")
    match = matches[-1]
    records, rate = int(match.group(1)), float(match.group(2))
    return {
        "records": records,
        "msgs_per_s": rate,
        "mb_per_s": rate * size / 1e6,  # the tool's own MB/sec is MiB; report 10^6 bytes like the rest
        "latency_avg_ms": float(match.group(4)),
        "latency_max_ms": float(match.group(5)),
        "p50": float(match.group(6)),
        "p95": float(match.group(7)),
        "p99": float(match.group(8)),
        "p99.9": float(match.group(9)),
    }


def parse_consumer_perf(out: str) -> dict[str, Any]:
    """The CSV line: start, end, MB, MB/s, nMsg, nMsg/s, rebalance ms, fetch ms, fetch MB/s, fetch nMsg/s."""
    rows = [line for line in out.splitlines() if re.match(r"\d{4}-\d\d-\d\d", line)]
    if not rows:
        raise RuntimeError(f"no result line in ConsumerPerformance output: {out[-600:]}")
    cells = [c.strip() for c in rows[-1].split(",")]
    mib, messages = float(cells[2]), int(cells[4])
    fetch_ms = float(cells[7])
    return {
        "consumed": messages,
        "mb": mib * 1.048576,
        "rebalance_ms": float(cells[6]),
        "fetch_ms": fetch_ms,
        "mb_per_s": mib * 1.048576 / (fetch_ms / 1000) if fetch_ms > 0 else 0.0,
        "msgs_per_s": messages / (fetch_ms / 1000) if fetch_ms > 0 else 0.0,
    }
