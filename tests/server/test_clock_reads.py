"""The server reads time only through its clock (``kafkalike.server.clock``): a direct read of
the wall clock or of trio's clock anywhere else would not follow a test's MockClock. Checked on
the syntax tree of every server module; no module is exempt but the clock's own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kafkalike.server

SERVER_DIR = Path(kafkalike.server.__file__).parent
CLOCK_MODULE = SERVER_DIR / "clock.py"
# Modules allowed a direct read besides the clock's own: none.
ALLOWED: frozenset[str] = frozenset()
CLOCK_READS = frozenset(
    {
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "time.perf_counter",
        "time.perf_counter_ns",
        "time.clock_gettime",
        "time.clock_gettime_ns",
        "trio.current_time",
        "trio.lowlevel.current_clock",
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
    }
)


def clock_reads(source: str, filename: str = "<source>") -> list[str]:
    """``line: name`` for each use of a clock-reading function in ``source`` (called or not,
    however it was imported or aliased)."""
    tree = ast.parse(source, filename)
    aliases: dict[str, str] = {}  # a local name -> the qualified name it stands for
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for name in node.names:
                if name.asname:
                    aliases[name.asname] = name.name
                else:
                    top = name.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for name in node.names:
                qualified = f"{node.module}.{name.name}"
                aliases[name.asname or name.name] = qualified
                if qualified in CLOCK_READS:
                    found.append(f"{node.lineno}: {qualified}")
    for node in ast.walk(tree):
        qualified = _qualified(node, aliases)
        if qualified in CLOCK_READS:
            found.append(f"{node.lineno}: {qualified}")  # type: ignore[attr-defined]
    return sorted(set(found), key=lambda entry: int(entry.split(":")[0]))


def _qualified(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """The qualified name a ``Name`` or dotted ``Attribute`` refers to, through the imports."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def server_modules() -> list[Path]:
    return sorted(path for path in SERVER_DIR.rglob("*.py") if path != CLOCK_MODULE)


def test_no_server_module_reads_a_clock_but_the_clock_module() -> None:
    offenders = {}
    for path in server_modules():
        name = str(path.relative_to(SERVER_DIR.parent.parent))
        reads = clock_reads(path.read_text(encoding="utf-8"), name)
        if reads and name not in ALLOWED:
            offenders[name] = reads
    assert offenders == {}, "read the time through the broker's clock (kafkalike.server.clock)"


def test_the_scan_covers_the_handlers_and_services() -> None:
    names = {path.relative_to(SERVER_DIR).as_posix() for path in server_modules()}
    assert {"broker.py", "connection.py", "group_service.py", "txn_service.py", "handlers/fetch.py"} <= names


# -- negative controls: what the check exists to catch, it catches ------------------------------


def test_the_clock_module_itself_is_caught() -> None:
    reads = clock_reads(CLOCK_MODULE.read_text(encoding="utf-8"))
    assert {entry.split(": ")[1] for entry in reads} == {"time.time_ns", "trio.current_time"}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import time\ndef now_ms():\n    return int(time.time() * 1000)\n", "time.time"),
        ("import time as t\nstart = t.monotonic()\n", "time.monotonic"),
        ("from time import perf_counter\n", "time.perf_counter"),
        ("from time import time as wall\n", "time.time"),
        ("import trio\ndeadline = trio.current_time() + 1\n", "trio.current_time"),
        ("from trio import current_time\n", "trio.current_time"),
        ("import trio.lowlevel\nclock = trio.lowlevel.current_clock()\n", "trio.lowlevel.current_clock"),
        ("import trio\nnow = trio.current_time\n", "trio.current_time"),  # passed on, not called
        ("from datetime import datetime\nstamp = datetime.now()\n", "datetime.datetime.now"),
        ("import datetime\nday = datetime.date.today()\n", "datetime.date.today"),
    ],
)
def test_a_direct_clock_read_added_back_is_caught(source: str, expected: str) -> None:
    assert expected in {entry.split(": ")[1] for entry in clock_reads(source)}


def test_what_is_not_a_clock_read_is_not_caught() -> None:
    source = (
        "import trio\nimport time\n"
        "async def wait(clock):\n"
        "    await trio.sleep(1)\n"
        "    with trio.move_on_at(clock.monotonic_s() + 1):\n"
        "        pass\n"
        "    return clock.wall_ms(), time.strftime\n"
    )
    assert clock_reads(source) == []
