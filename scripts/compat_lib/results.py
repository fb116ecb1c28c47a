"""Rows, the allowlist, verdicts and REPORT.md.

A row is one client (with its version) and one scenario: pass, fail (with a short error) or n/a.
The allowlist (``compat_tests/allow.txt``) names known gaps, one ``client scenario  # reason`` a
line; both names may hold ``*`` globs (``java-* group-*``); brackets are literal. A row's verdict:

- pass, not allowlisted: ok
- fail, allowlisted: known gap (ok, the reason is shown)
- fail, not allowlisted: FAIL
- pass, allowlisted: FAIL, "passes now: remove from allowlist"
- n/a: ok (skipped, or not applicable to that client)

An allowlist entry that matches no row of a suite that ran is stale, and fails too.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

PASS, FAIL, NA = "pass", "fail", "n/a"


@dataclass(frozen=True)
class Row:
    client: str
    scenario: str
    status: str  # PASS, FAIL or NA
    error: str = ""
    seconds: float = 0.0


@dataclass
class SuiteRun:
    """What one suite (a client, a group of clients, the tools...) produced."""

    name: str
    clients: dict[str, str] = field(default_factory=dict)  # client -> version, as reported
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AllowEntry:
    client: str
    scenario: str
    reason: str
    line: int

    def matches(self, row: Row) -> bool:
        return glob_match(self.client, row.client) and glob_match(self.scenario, row.scenario)

    def covers_client(self, client: str) -> bool:
        return glob_match(self.client, client)


def glob_match(pattern: str, name: str) -> bool:
    """``*`` matches any run of characters; everything else, brackets included, is literal."""
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), name) is not None


RELEASE_CONDITION = re.compile(r"ak(>=|<)(\d+(?:\.\d+)*)")


def release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def load_allowlist(path: Path, ak_version: str | None = None) -> list[AllowEntry]:
    """The entries that apply to a run against Apache Kafka ``ak_version``: an entry may start
    with a condition on that release, ``ak>=4.2`` or ``ak<4.2`` (a gap against some releases only);
    without ``ak_version`` every entry is kept (the file's syntax is checked)."""
    entries = []
    for number, raw in enumerate(path.read_text().splitlines(), 1) if path.exists() else []:
        text, _, reason = raw.partition("#")
        parts = text.split()
        if not parts:
            continue
        condition = RELEASE_CONDITION.fullmatch(parts[0]) if len(parts) == 3 else None
        if condition is not None:
            parts = parts[1:]
        if len(parts) != 2:
            raise ValueError(f"{path}:{number}: expected '[ak>=X.Y] client scenario  # reason', got {raw!r}")
        if not reason.strip():
            raise ValueError(f"{path}:{number}: every allowlist entry needs a reason after '#'")
        if condition is not None and ak_version is not None:
            newer = release(ak_version) >= release(condition.group(2))
            if newer != (condition.group(1) == ">="):
                continue
        entries.append(AllowEntry(parts[0], parts[1], reason.strip(), number))
    return entries


@dataclass(frozen=True)
class Verdict:
    row: Row
    ok: bool
    text: str  # what the report's result column says


def judge(rows: list[Row], allow: list[AllowEntry]) -> list[Verdict]:
    verdicts = []
    for row in rows:
        entry = next((e for e in allow if e.matches(row)), None)
        if row.status == NA:
            verdicts.append(Verdict(row, True, f"n/a: {row.error}" if row.error else "n/a"))
        elif row.status == PASS and entry is None:
            verdicts.append(Verdict(row, True, "pass"))
        elif row.status == PASS:
            verdicts.append(Verdict(row, False, f"**passes now: remove from allowlist** (line {entry.line})"))  # type: ignore[union-attr]
        elif entry is not None:
            verdicts.append(Verdict(row, True, f"fail, allowlisted: {entry.reason} — {short(row.error, 160)}"))
        else:
            verdicts.append(Verdict(row, False, f"**FAIL**: {short(row.error)}"))
    return verdicts


def stale_entries(rows: list[Row], allow: list[AllowEntry], clients_run: set[str]) -> list[AllowEntry]:
    """Entries for a client that ran whose pattern matches none of its rows."""
    stale = []
    for entry in allow:
        if not any(entry.covers_client(c) for c in clients_run):
            continue
        if not any(entry.matches(r) for r in rows):
            stale.append(entry)
    return stale


def short(text: str, limit: int = 240) -> str:
    one_line = re.sub(r"\s+", " ", text or "").strip()
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_report(
    suites: list[SuiteRun],
    verdicts: list[Verdict],
    stale: list[AllowEntry],
    *,
    command: str,
    started: str,
    seconds: float,
    environment: dict[str, str],
    reference: list[SuiteRun] | None = None,
    ak_version: str = "",
) -> str:
    bad = [v for v in verdicts if not v.ok]
    overall = "PASS" if not bad and not stale else "FAIL"
    lines = [
        "# Compatibility report",
        "",
        f"Generated by `{command}` at {started}, in {seconds / 60:.1f} min. "
        f"**{overall}**: {len(verdicts)} rows, {sum(v.ok for v in verdicts)} as expected, "
        f"{len(bad)} unexpected, {len(stale)} stale allowlist entries.",
        "",
        "Known gaps are listed in `compat_tests/allow.txt`; protocol differences from Apache Kafka in "
        "`compat_tests/FINDINGS.md`.",
        "",
        "## Versions",
        "",
        "| client | version | suite |",
        "| --- | --- | --- |",
    ]
    for suite in suites:
        for client, version in suite.clients.items():
            lines.append(f"| {client} | {_cell(version)} | {suite.name} |")
    for key, value in environment.items():
        lines.append(f"| ({key}) | {_cell(value)} | |")
    lines += [
        "",
        "## Summary",
        "",
        "| client | pass | fail, allowlisted | n/a | unexpected |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    clients = list(dict.fromkeys(v.row.client for v in verdicts))
    for client in clients:
        mine = [v for v in verdicts if v.row.client == client]
        passed = sum(v.ok and v.row.status == PASS for v in mine)
        known = sum(v.ok and v.row.status == FAIL for v in mine)
        na = sum(v.row.status == NA for v in mine)
        unexpected = sum(not v.ok for v in mine)
        lines.append(f"| {client} | {passed} | {known} | {na} | {unexpected} |")
    lines += ["", "## Suites", "", "| suite | time | notes |", "| --- | ---: | --- |"]
    for suite in suites:
        lines.append(f"| {suite.name} | {suite.seconds:.0f} s | {_cell('; '.join(suite.notes))} |")
    if stale:
        lines += ["", "## Stale allowlist entries (match no row: remove them)", ""]
        lines += [f"- line {e.line}: `{e.client} {e.scenario}` # {e.reason}" for e in stale]
    if bad:
        lines += ["", "## Unexpected", "", "| client | scenario | result |", "| --- | --- | --- |"]
        lines += [f"| {v.row.client} | {_cell(v.row.scenario)} | {_cell(v.text)} |" for v in bad]
    lines += ["", "## Results", "", "| client | scenario | result | time |", "| --- | --- | --- | ---: |"]
    for v in verdicts:
        lines.append(f"| {v.row.client} | {_cell(v.row.scenario)} | {_cell(v.text)} | {v.row.seconds:.1f} s |")
    if reference:
        lines += _reference_section(reference, ak_version)
    return "\n".join(lines) + "\n"


def _reference_section(reference: list[SuiteRun], ak_version: str) -> list[str]:
    """The same scenarios against Apache Kafka: the check that the scenarios themselves are right."""
    rows = [r for suite in reference for r in suite.rows]
    failed = [r for r in rows if r.status == FAIL]
    lines = [
        "",
        f"## Reference: the same scenarios against Apache Kafka {ak_version}",
        "",
        f"{len(rows)} rows, {sum(r.status == PASS for r in rows)} pass, {len(failed)} fail "
        "(a failure here means the scenario, not kafkalike, needs a look; not judged by the allowlist).",
        "",
        "| suite | time |",
        "| --- | ---: |",
    ]
    lines += [f"| {suite.name} | {suite.seconds:.0f} s |" for suite in reference]
    if failed:
        lines += ["", "| client | scenario | error |", "| --- | --- | --- |"]
        lines += [f"| {r.client} | {_cell(r.scenario)} | {_cell(short(r.error))} |" for r in failed]
    return lines


def save_runs(path: Path, suites: list[SuiteRun], reference: list[SuiteRun], meta: dict[str, object]) -> None:
    """Everything a report is made of, so that it can be judged again (--rejudge) without a rerun."""
    data = {
        "meta": meta,
        "suites": [dataclasses.asdict(s) for s in suites],
        "reference": [dataclasses.asdict(s) for s in reference],
    }
    path.write_text(json.dumps(data, indent=1))


def load_runs(path: Path) -> tuple[list[SuiteRun], list[SuiteRun], dict[str, object]]:
    data = json.loads(path.read_text())

    def suite(item: dict[str, object]) -> SuiteRun:
        rows = [Row(**r) for r in item.pop("rows")]  # type: ignore[attr-defined]
        return SuiteRun(**item, rows=rows)  # type: ignore[arg-type]

    return [suite(s) for s in data["suites"]], [suite(s) for s in data["reference"]], data["meta"]
