"""``kafkalike storage``: work on a node's data directories offline.

``verify DIR`` checks a data directory (see ``kafkalike.log.verify``): exit status 0 when nothing
is wrong, 1 when a problem was found, 2 when DIR cannot be read. Run it on a stopped broker's
directory: a running broker's active segment may end in a batch still being written.

``format`` and ``random-uuid`` are Kafka's ``kafka-storage`` commands of those names (see
``kafkalike.cli.storage_format``): exit status 0, or 1 with one line on stderr, as kafka-storage's
(its argument errors too).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import NoReturn

from kafkalike.server.config import parse_properties

# The tools' own modules are imported where they run: ``kafkalike serve`` does not pay for them.

FAILED_EXIT = 1


class _KafkaStorageParser(argparse.ArgumentParser):
    """kafka-storage's argument errors exit 1 (argparse4j's), not argparse's 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(FAILED_EXIT, f"{self.prog}: error: {message}\n")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    storage = sub.add_parser("storage", help="work on a data directory offline")
    actions = storage.add_subparsers(dest="storage_command", required=True, parser_class=_KafkaStorageParser)
    check = actions.add_parser(
        "verify", help="check every batch's CRC and records, and the indexes, of a log dir or partition directory"
    )
    check.add_argument("dir", help="a log dir (holding <topic>-<partition> directories) or one partition directory")
    check.add_argument("--output", choices=["text", "json"], default="text")
    actions.add_parser("random-uuid", help="print a random id, as a cluster id or directory id")
    fmt = actions.add_parser(
        "format",
        help="format the log directories of a node (Kafka's kafka-storage format)",
    )
    fmt.add_argument("--config", "-c", required=True, type=Path, help="the node's server.properties")
    fmt.add_argument("--cluster-id", "-t", required=True, help="the cluster id to use")
    fmt.add_argument(
        "--ignore-formatted", "-g", action="store_true", help="skip already formatted directories, format the others"
    )
    fmt.add_argument("--release-version", "-r", help="the release whose feature levels the cluster starts at")
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument("--standalone", "-s", action="store_true", help="a controller that is a quorum of one")
    quorum.add_argument(
        "--no-initial-controllers", "-N", action="store_true", help="a node without a dynamic quorum topology"
    )
    quorum.add_argument(
        "--initial-controllers", "-I", help="the initial dynamic voters: id@host:port:directory-id, comma-separated"
    )


def run(args: argparse.Namespace) -> int:
    from kafkalike.cli.storage_format import random_uuid

    if args.storage_command == "random-uuid":
        print(random_uuid())
        return 0
    if args.storage_command == "format":
        return run_format_command(args)
    return run_verify(args)


def run_format_command(args: argparse.Namespace) -> int:
    from kafkalike.cli.storage_format import FormatError, FormatRequest, plan_format, run_format

    try:
        text = args.config.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"Unable to read {args.config}: {exc.strerror or exc}", file=sys.stderr)
        return FAILED_EXIT
    request = FormatRequest(
        cluster_id=args.cluster_id,
        properties=parse_properties(text),
        standalone=args.standalone,
        initial_controllers=args.initial_controllers,
        no_initial_controllers=args.no_initial_controllers,
        ignore_formatted=args.ignore_formatted,
        release_version=args.release_version,
    )
    try:
        lines = run_format(plan_format(request), now_ms=int(time.time() * 1000))
    except FormatError as exc:
        print(exc, file=sys.stderr)
        return FAILED_EXIT
    except OSError as exc:
        print(f"Error while formatting {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return FAILED_EXIT
    for line in lines:
        print(line)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from kafkalike.log.verify import format_text, verify

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
