"""``kafkalike serve``: run a single-node broker (broker and controller in one process)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

import trio

from kafkalike.server.broker import Broker
from kafkalike.server.config import BrokerConfig, parse_listener

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
    serve.add_argument("--log-level", default="INFO")
    return parser


def config_from_args(args: argparse.Namespace) -> BrokerConfig:
    config = BrokerConfig.load(args.config, args.override)
    if args.listen:
        config.explicit["listeners"] = f"PLAINTEXT://{args.listen}"
    if args.advertised:
        config.explicit["advertised.listeners"] = f"PLAINTEXT://{args.advertised}"
    if args.data_dir:
        config.explicit["log.dirs"] = str(args.data_dir)
    return config


async def run_broker(config: BrokerConfig) -> None:
    host, port = parse_listener((config.get("listeners") or "").split(",")[0])
    broker = Broker(config)
    broker.open()
    try:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                bound = await nursery.start(broker.serve, host, port)
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
    if args.command != "serve":
        build_parser().print_help()
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stdout, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = config_from_args(args)
    except (OSError, ValueError) as exc:
        log.error("bad configuration: %s", exc)
        return 2
    trio.run(run_broker, config)
    return 0
