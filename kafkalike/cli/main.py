"""``kafkalike serve``: run a node (:class:`kafkalike.server.node.Node`): without a config the
single node (broker and controller in one process); with ``--config`` any role combination of a
cluster's node.

A broker that cannot start says why in one line on stderr and exits non-zero, never with a
traceback: 2 for bad arguments or configuration (as argparse does), 1 for what the machine
refuses (the port taken, the data directory unusable or locked, meta.properties disagreeing).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import trio

from kafkalike.cli import controller
from kafkalike.server.broker import StartupError, client_listeners
from kafkalike.server.config import TEST_PROFILE, BrokerConfig, parse_listener
from kafkalike.server.node import BROKER, is_single_node, run_node

log = logging.getLogger("kafkalike")

BAD_USAGE_EXIT, CANNOT_START_EXIT = 2, 1
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkalike", description="A broker that speaks the Kafka protocol.")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run a broker")
    serve.add_argument("--listen", help="HOST:PORT to listen on (default 127.0.0.1:9092)")
    serve.add_argument("--advertised", help="HOST:PORT clients should connect to")
    serve.add_argument("--data-dir", type=Path, help="where logs and metadata live (default ./kafkalike-data)")
    serve.add_argument("--config", type=Path, help="a server.properties file with Kafka's config names")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="set one config")
    serve.add_argument("--ephemeral", action="store_true", help="keep everything in memory: no disk, no fsync")
    serve.add_argument("--port-file", type=Path, help="write the bound port to this file once ready")
    serve.add_argument(
        "--test-profile", action="store_true", help="defaults for test suites: auto-create, short group timeouts"
    )
    serve.add_argument("--seed-topics", metavar="NAME:PARTITIONS,...", help="topics to create at start-up")
    serve.add_argument("--log-level", default="INFO")
    from kafkalike.cli import storage  # ``kafkalike storage verify``: offline, never needed to serve

    storage.add_parser(sub)
    from kafkalike.cli import cluster  # ``kafkalike cluster``: nodes as child processes

    cluster.add_parser(sub)
    return parser


def config_from_args(args: argparse.Namespace) -> BrokerConfig:
    config = BrokerConfig.load(args.config, args.override)
    if args.test_profile:
        config.explicit = {**TEST_PROFILE, **config.explicit}
    # Both set the address of the first client listener and keep every other listener.
    if args.listen:
        config.explicit["listeners"] = _first_client_at(config, "listeners", args.listen)
    if args.advertised:
        config.explicit["advertised.listeners"] = _first_client_at(config, "advertised.listeners", args.advertised)
    if args.data_dir:
        config.explicit["log.dirs"] = str(args.data_dir)
    return config


def _first_client_at(config: BrokerConfig, name: str, address: str) -> str:
    """``name`` (``listeners``, or ``advertised.listeners``: else the client ones of
    ``listeners``) with the first client listener of ``listeners`` at ``address`` (PLAINTEXT
    when ``listeners`` has none)."""
    first = (client_listeners(config) or ["PLAINTEXT://"])[0]
    listener = first.split("://", 1)[0].strip().upper() if "://" in first else "PLAINTEXT"
    if name == "listeners" or config.get(name) is None:
        entries = client_listeners(config) if name != "listeners" else _entries(config.get("listeners"))
    else:
        entries = _entries(config.get(name))
    wanted = f"{listener}://{address}"
    replaced = [wanted if _name_of(e) == listener else e for e in entries]
    return ",".join(replaced if wanted in replaced else [wanted, *entries])


def _entries(text: str | None) -> list[str]:
    return [e.strip() for e in (text or "").split(",") if e.strip()]


def _name_of(entry: str) -> str:
    return entry.split("://", 1)[0].strip().upper() if "://" in entry else ""


def parse_seed_topics(text: str | None) -> list[tuple[str, int]]:
    topics = []
    for item in (text or "").split(","):
        if item.strip():
            name, _, count = item.strip().partition(":")
            try:
                topics.append((name, int(count or "1")))
            except ValueError:
                raise ValueError(f"bad --seed-topics {text!r}: expected name:partitions,...") from None
    return topics


def listen_address(config: BrokerConfig) -> tuple[str, int]:
    """The first client listener's (host, port); ValueError in Kafka's words when it is not one."""
    return parse_listener((client_listeners(config) or [""])[0])


def _write_port_file(port_file: Path, port: int) -> None:
    # Atomic, so a reader polling for the file never sees it half written.
    partial = port_file.with_name(port_file.name + ".tmp")
    try:
        partial.write_text(f"{port}\n")
        partial.replace(port_file)
    except OSError as exc:
        raise StartupError(f"Unable to write --port-file {port_file}: {exc.strerror}") from exc


def _startup_failure(exc: BaseException) -> StartupError | None:
    """The StartupError ``exc`` is, or that nurseries wrapped alone in exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, StartupError) else None


def fail(message: str, exit_code: int) -> int:
    """The one line a broker that cannot start prints."""
    print(f"kafkalike: {message}", file=sys.stderr, flush=True)
    return exit_code


def _serve_node(config: BrokerConfig, args: argparse.Namespace) -> int:
    """Any node: the single one (no roles or voters but itself) or a node of a cluster."""
    unknown = config.unknown_names()
    if not is_single_node(config):
        unknown = [n for n in unknown if n not in controller.READ_BY_CONTROLLER]
    if unknown:
        # AbstractConfig.logUnused's words; Kafka prints the set as [a, b].
        log.warning("These configurations '[%s]' were supplied but are not used yet.", ", ".join(unknown))
    seeds = parse_seed_topics(args.seed_topics)
    try:
        trio.run(
            lambda: run_node(
                config,
                ephemeral=args.ephemeral,
                port_file=args.port_file,
                seed_topics=seeds,
                write_port_file=_write_port_file,
            )
        )
    except (StartupError, BaseExceptionGroup) as exc:
        failure = _startup_failure(exc)
        if failure is None:
            raise
        return fail(str(failure), CANNOT_START_EXIT)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "storage":
        from kafkalike.cli import storage

        return storage.run(args)
    if args.command == "cluster":
        from kafkalike.cli import cluster

        return cluster.run(args)
    if args.command != "serve":
        build_parser().print_help()
        return 2
    level = args.log_level.upper()
    if level not in LOG_LEVELS:
        return fail(f"bad --log-level {args.log_level!r}: expected one of {', '.join(LOG_LEVELS)}", BAD_USAGE_EXIT)
    logging.basicConfig(level=level, stream=sys.stdout, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = config_from_args(args)
        config.check()
        if is_single_node(config):
            listen_address(config)
        else:
            controller.quorum_settings(config)
            if BROKER in controller.roles_of(config):
                listen_address(config)
        parse_seed_topics(args.seed_topics)
    except OSError as exc:
        return fail(f"bad configuration: cannot read {exc.filename}: {exc.strerror}", BAD_USAGE_EXIT)
    except ValueError as exc:
        return fail(f"bad configuration: {exc}", BAD_USAGE_EXIT)
    return _serve_node(config, args)
