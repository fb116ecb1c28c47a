#!/usr/bin/env python3
"""The whole client-compatibility suite, in one command:

    python scripts/compat.py

runs every client against fresh kafkalike brokers and writes compat_tests/REPORT.md: one row per
client x scenario (pass / fail with the error / n/a) and the versions used. The suites:

- python: the Python clients' tests (compat_tests/test_*.py: kafka-python, confluent-kafka, ...)
- java: the Java client's scenarios (compat_tests/java/client), once per kafka-clients version
- go: franz-go and Sarama scenarios (compat_tests/go)
- tools: Apache Kafka's command-line tools from its Maven Central jars (compat_tests/java/tools)
- differential: the same raw requests to Apache Kafka and to kafkalike, compared field by field
  (compat_tests/differential, also runnable with pytest -m differential)
- reference: the java, go and tools scenarios once more against Apache Kafka itself, to show the
  scenarios are right (reported apart; a failure there is a warning)

Known gaps are listed in compat_tests/allow.txt (`client scenario  # reason`, globs allowed). The
exit status is non-zero when any row fails that the allowlist does not name, when an allowlisted
row passes ("passes now: remove from allowlist"), or when an allowlist entry matches nothing.

Needs: the project's .venv (scripts/test makes it), Java 17+ and Maven (jars come from Maven
Central into ~/.m2), Go (modules from the Go module proxy). Every process is bounded by a timeout;
every broker listens on 127.0.0.1 only. Build output, logs and junit files go to
compat_tests/.work/ (git-ignored). Options: --only SUITE[,SUITE], --java-versions, --ak-version,
--no-reference; --help for the rest.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"

SUITES = ("python", "java", "go", "tools", "differential", "reference")
DEFAULT_JAVA_VERSIONS = "4.4.0,4.0.2,3.9.1"
# The reference: the newest Apache Kafka, which the project follows. 4.0.2 (the oldest 4.x) stays
# checkable with --ak-version 4.0.2; the differential tests know where the two answer differently.
DEFAULT_AK_VERSION = "4.4.0"


def _reexec_in_venv() -> None:
    """Run under the project's virtualenv (which has kafkalike, pytest and the Python clients)."""
    if VENV_PYTHON.exists() and Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *sys.argv])


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--only", default=",".join(SUITES), help=f"comma-separated suites (default: all of {', '.join(SUITES)})"
    )
    parser.add_argument(
        "--java-versions", default=DEFAULT_JAVA_VERSIONS, help="kafka-clients versions for the java suite"
    )
    parser.add_argument(
        "--ak-version", default=DEFAULT_AK_VERSION, help="Apache Kafka version for tools, differential, reference"
    )
    parser.add_argument("--no-reference", action="store_true", help="skip the reference runs against Apache Kafka")
    parser.add_argument("--report", type=Path, default=ROOT / "compat_tests" / "REPORT.md")
    parser.add_argument("--allowlist", type=Path, default=ROOT / "compat_tests" / "allow.txt")
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="run nothing: judge the last run's results (compat_tests/.work/results.json) against the allowlist again",
    )
    args = parser.parse_args(argv)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.only) - set(SUITES)
    if unknown:
        parser.error(f"unknown suites: {', '.join(sorted(unknown))}")
    if args.no_reference and "reference" in args.only:
        args.only.remove("reference")
    return args


def main(argv: list[str]) -> int:
    _reexec_in_venv()
    sys.path.insert(0, str(ROOT))
    from compat_lib.reference import reference_suites
    from compat_lib.results import load_allowlist, load_runs, save_runs
    from compat_lib.runner import WORK
    from compat_lib.suites import differential_suite, go_suite, java_suite, python_clients_suite
    from compat_lib.tools import ak_lib_dir, resolve_ak, tools_suite

    args = parse_args(argv)
    load_allowlist(args.allowlist)  # a malformed allowlist fails before anything runs
    started_at = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    started = time.monotonic()
    java_versions = [v.strip() for v in args.java_versions.split(",") if v.strip()]

    results = WORK / "results.json"
    if args.rejudge:
        suites, reference, meta = load_runs(results)
        argv = [str(a) for a in meta.get("argv", [])]  # type: ignore[attr-defined]
        return finish(args, argv, suites, reference, str(meta["started"]), float(meta["seconds"]))  # type: ignore[arg-type]

    suites = []
    if "python" in args.only:
        suites.append(python_clients_suite())
    if "java" in args.only:
        suites += [java_suite(version) for version in java_versions]
    if "go" in args.only:
        suites.append(go_suite())
    if "tools" in args.only:
        suites.append(tools_suite(args.ak_version))
    if "differential" in args.only:
        why = resolve_ak(args.ak_version)
        if why:
            from compat_lib.results import FAIL, Row, SuiteRun

            suites.append(SuiteRun("differential", rows=[Row("differential", "setup", FAIL, why)]))
        else:
            suites.append(differential_suite(ak_lib_dir(args.ak_version), args.ak_version))
    reference = []
    if "reference" in args.only:
        reference = reference_suites(args.ak_version, java_versions, args.only)

    seconds = time.monotonic() - started
    WORK.mkdir(parents=True, exist_ok=True)
    save_runs(results, suites, reference, {"started": started_at, "seconds": seconds, "argv": argv})
    return finish(args, argv, suites, reference, started_at, seconds)


def finish(
    args: argparse.Namespace, argv: list[str], suites: list[Any], reference: list[Any], started_at: str, seconds: float
) -> int:
    """Judge the rows against the allowlist, write the report, say what is wrong; the exit status."""
    from compat_lib.results import judge, load_allowlist, render_report, stale_entries
    from compat_lib.runner import say

    allow = load_allowlist(args.allowlist, args.ak_version)
    rows = [row for suite in suites for row in suite.rows]
    verdicts = judge(rows, allow)
    clients_run = {row.client for row in rows}
    stale = stale_entries(rows, allow, clients_run)
    environment = {"java": _java_version(), "go": _go_version(), "python": sys.version.split()[0]}
    report = render_report(
        suites,
        verdicts,
        stale,
        command="python scripts/compat.py" + (" " + " ".join(argv) if argv else ""),
        started=started_at,
        seconds=seconds,
        environment=environment,
        reference=reference,
        ak_version=args.ak_version,
    )
    args.report.write_text(report)
    bad = [v for v in verdicts if not v.ok]
    for v in bad:
        say(f"UNEXPECTED {v.row.client} {v.row.scenario}: {v.text}")
    for entry in stale:
        say(f"STALE allowlist line {entry.line}: {entry.client} {entry.scenario}")
    ref_failures = [r for s in reference for r in s.rows if r.status == "fail"]
    if ref_failures:
        say(f"warning: {len(ref_failures)} scenarios fail against Apache Kafka too (see the report)")
    say(
        f"{len(verdicts)} rows, {len(bad)} unexpected, {len(stale)} stale allowlist entries; "
        f"{seconds / 60:.1f} min; report: {args.report}"
    )
    return 1 if bad or stale else 0


def _java_version() -> str:
    from compat_lib.runner import have, run

    if not have("java"):
        return "not installed"
    ran = run(["java", "-version"], timeout_s=60)
    return (ran.stderr or ran.stdout).splitlines()[0] if (ran.stderr or ran.stdout) else "?"


def _go_version() -> str:
    from compat_lib.runner import have, run

    return run(["go", "version"], timeout_s=60).stdout.strip() if have("go") else "not installed"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
