"""``kafkalike storage verify DIR``: check a data directory offline (see ``kafkalike.log.verify``).

Exit status 0 when nothing is wrong, 1 when a problem was found, 2 when DIR cannot be read.
Run it on a stopped broker's directory: a running broker's active segment may end in a batch
still being written.
"""

from __future__ import annotations

import argparse
import json
import sys

from kafkalike.log.verify import format_text, verify


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    storage = sub.add_parser("storage", help="work on a data directory offline")
    actions = storage.add_subparsers(dest="storage_command", required=True)
    check = actions.add_parser(
        "verify", help="check every batch's CRC and records, and the indexes, of a log dir or partition directory"
    )
    check.add_argument("dir", help="a log dir (holding <topic>-<partition> directories) or one partition directory")
    check.add_argument("--output", choices=["text", "json"], default="text")


def run(args: argparse.Namespace) -> int:
    try:
        report = verify(args.dir)
    except OSError as exc:
        print(f"kafkalike storage verify: cannot read {args.dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if args.output == "json":
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(format_text(report))
    return 0 if report.ok else 1
