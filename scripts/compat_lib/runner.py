"""Paths, bounded subprocesses and the brokers the suites run against."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "compat_tests"
WORK = COMPAT / ".work"  # git-ignored: jars, binaries, junit files, logs, broker data
LOGS = WORK / "logs"

# The broker settings every client suite runs with (the Java scenarios' unknown-topic checks need
# auto-creation off); Apache Kafka gets the same ones for the reference runs.
BROKER_OVERRIDES = {"auto.create.topics.enable": "false"}

BROKER_FAULT = re.compile(r"Traceback|\bERROR\b|\bCRITICAL\b")


def say(message: str) -> None:
    print(f"[compat {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Ran:
    returncode: int | None  # None: killed after the timeout
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run(
    args: Sequence[str],
    *,
    timeout_s: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    log_name: str | None = None,
) -> Ran:
    """Run a command in its own process group; past ``timeout_s`` the whole group is killed."""
    started = time.monotonic()
    proc = subprocess.Popen(
        list(args),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    ran = Ran(code, out, err, time.monotonic() - started)
    if log_name:
        LOGS.mkdir(parents=True, exist_ok=True)
        (LOGS / f"{log_name}.log").write_text(
            f"$ {' '.join(args)}\n# exit {code} after {ran.seconds:.1f} s\n--- stdout\n{out}\n--- stderr\n{err}\n"
        )
    return ran


def tail(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(kept[-lines:])


def java_env() -> dict[str, str]:
    """The environment for JVMs: quiet, and not picking up options meant for other tools."""
    env = dict(os.environ)
    env.pop("JAVA_TOOL_OPTIONS", None)
    env.pop("_JAVA_OPTIONS", None)
    return env


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


@dataclass
class BrokerUnderTest:
    """A kafkalike broker process for one suite, and what it logged."""

    bootstrap: str
    output: list[str]
    alive: bool = True


@contextmanager
def kafkalike_broker(name: str) -> Iterator[BrokerUnderTest]:
    """A fresh ``kafkalike serve`` with its own data directory under .work/."""
    from kafkalike.testing.process import BrokerProcess

    data = WORK / "brokers" / name
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    broker = BrokerProcess(data, [f"{k}={v}" for k, v in BROKER_OVERRIDES.items()])
    broker.start()
    under_test = BrokerUnderTest(broker.bootstrap, broker.output)
    try:
        yield under_test
    finally:
        under_test.alive = broker.proc is not None and broker.proc.poll() is None
        if under_test.alive:
            try:
                broker.stop()
            except subprocess.TimeoutExpired:
                broker.kill()
        LOGS.mkdir(parents=True, exist_ok=True)
        (LOGS / f"broker-{name}.log").write_text("".join(broker.output))
        shutil.rmtree(data, ignore_errors=True)


def broker_faults(broker: BrokerUnderTest) -> str:
    """Empty when the broker stayed up and logged no error; else what went wrong, short."""
    if not broker.alive:
        return "the broker died during the suite: " + tail("".join(broker.output), 5)
    faults = [line.strip() for line in broker.output if BROKER_FAULT.search(line)]
    if faults:
        return f"{len(faults)} error lines in the broker log, first: {faults[0]}"
    return ""
