"""``kafkalike serve``: run a single-node broker (broker and controller in one process)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

import trio

from kafkalike.server.broker import Broker
from kafkalike.server.config import TEST_PROFILE, BrokerConfig, parse_listener

log = logging.getLogger("kafkalike")


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
    return parser


def config_from_args(args: argparse.Namespace) -> BrokerConfig:
    config = BrokerConfig.load(args.config, args.override)
    if args.test_profile:
        config.explicit = {**TEST_PROFILE, **config.explicit}
    if args.listen:
        config.explicit["listeners"] = f"PLAINTEXT://{args.listen}"
    if args.advertised:
        config.explicit["advertised.listeners"] = f"PLAINTEXT://{args.advertised}"
    if args.data_dir:
        config.explicit["log.dirs"] = str(args.data_dir)
    return config


def parse_seed_topics(text: str | None) -> list[tuple[str, int]]:
    topics = []
    for item in (text or "").split(","):
        if item.strip():
            name, _, count = item.strip().partition(":")
            topics.append((name, int(count or "1")))
    return topics


async def run_broker(
    config: BrokerConfig, *, ephemeral: bool = False, port_file: Path | None = None, seed_topics: str | None = None
) -> None:
    host, port = parse_listener((config.get("listeners") or "").split(",")[0])
    broker = Broker(config, ephemeral=ephemeral)
    broker.open()
    broker.seed_topics(parse_seed_topics(seed_topics))
    try:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                bound = await nursery.start(broker.serve, host, port)
                if port_file is not None:
                    # Atomic, so a reader polling for the file never sees it half written.
                    partial = port_file.with_name(port_file.name + ".tmp")
                    partial.write_text(f"{bound[1]}\n")
                    partial.replace(port_file)
                log.info(
                    "kafkalike ready on %s:%d (node %d, cluster %s, data %s)",
                    bound[0],
                    bound[1],
                    broker.node_id,
                    broker.cluster_id,
                    broker.data_dir,
                )
                async for signum in signals:
                    log.info("received %s, shutting down", signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()
                    break
    finally:
        broker.close()
        log.info("kafkalike stopped; logs flushed")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "storage":
        from kafkalike.cli import storage

        return storage.run(args)
    if args.command != "serve":
        build_parser().print_help()
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stdout, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = config_from_args(args)
        config.check()
    except (OSError, ValueError) as exc:
        log.error("bad configuration: %s", exc)
        return 2
    try:
        parse_seed_topics(args.seed_topics)
    except ValueError:
        log.error("bad --seed-topics %r: expected name:partitions,...", args.seed_topics)
        return 2
    trio.run(
        lambda: run_broker(config, ephemeral=args.ephemeral, port_file=args.port_file, seed_topics=args.seed_topics)
    )
    return 0
