"""Handlers touch what their narrow context offers (``server/context.py``), never the broker
object nor a partition's log class: checked on the syntax tree of every handler module, with
negative controls that put each forbidden use back into a real handler's source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kafkalike.server.handlers

HANDLERS_DIR = Path(kafkalike.server.handlers.__file__).parent
# Names a handler may not import, by the module they come from (any module, for the names).
FORBIDDEN_NAMES = frozenset({"Broker", "PartitionLog"})
FORBIDDEN_MODULES = frozenset({"kafkalike.log.partition_log"})
# Attribute names that lead to the broker object: ``ctx.broker``, a facade's ``_broker``.
FORBIDDEN_ATTRIBUTES = frozenset({"broker", "_broker"})


def reaches_past_the_context(source: str, filename: str = "<source>") -> list[str]:
    """``line: what`` for each forbidden import or attribute in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in FORBIDDEN_MODULES:
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            if node.module in FORBIDDEN_MODULES:
                found.append(f"{node.lineno}: from {node.module}")
            for alias in node.names:
                if alias.name in FORBIDDEN_NAMES:
                    found.append(f"{node.lineno}: import of {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(f"{node.lineno}: {node.id}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "vars")
            and any(isinstance(a, ast.Constant) and a.value in FORBIDDEN_ATTRIBUTES for a in node.args)
        ):
            found.append(f"{node.lineno}: {node.func.id}(..., {FORBIDDEN_ATTRIBUTES})")
    return found


def handler_modules() -> list[Path]:
    return sorted(p for p in HANDLERS_DIR.glob("*.py") if p.name != "__init__.py")


def test_there_are_handlers_to_check() -> None:
    assert len(handler_modules()) >= 35


@pytest.mark.parametrize("path", handler_modules(), ids=lambda p: p.name)
def test_handlers_use_only_their_context(path: Path) -> None:
    assert reaches_past_the_context(path.read_text(), str(path)) == []


@pytest.mark.parametrize(
    "added",
    [
        "    partitions = ctx.broker.partitions",
        "    partitions = ctx.metadata._broker.partitions",
        "    broker = getattr(ctx, 'broker')",
        "    from kafkalike.server.broker import Broker",
        "    from kafkalike.log import PartitionLog",
        "    from kafkalike.log.partition_log import FileRange",
        "    import kafkalike.log.partition_log",
    ],
)
def test_negative_control_a_handler_reaching_the_broker_or_a_log_is_caught(added: str) -> None:
    source = (HANDLERS_DIR / "produce.py").read_text()
    marker = "    acks = request.acks\n"
    assert marker in source
    tampered = source.replace(marker, marker + added + "\n", 1)
    assert reaches_past_the_context(source) == []
    assert reaches_past_the_context(tampered) != []
