"""``kafkalike cluster``: a whole cluster on loopback in one command, for development and tests.

    kafkalike cluster --brokers 3 [--data-dir D] [--base-port P] [--override KEY=VALUE ...]

Starts ``--brokers`` nodes, each a ``kafkalike serve --config D/node-<id>/server.properties`` process
(broker and controller, all of them voters), formatted with ``kafkalike storage format``, and prints
one line once every node is ready and Metadata lists them all:

    kafkalike cluster ready on 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094 (3 nodes, cluster ID, data D)

Node ``i`` listens on ``P+i-1`` for clients and ``P+100+i-1`` for controllers (``--base-port 0``:
free ports); its output goes to ``D/node-<id>/output.log``. SIGTERM or Ctrl-C stops every node (SIGTERM
to each in turn, a clean shutdown, the active controller last; the last node is killed, no quorum being
left to approve its controlled shutdown) and exits 0. A node that cannot start stops the others, and the reason is
one line on stderr, exit status 1; bad arguments exit 2. A directory already formatted is started
again as it is, keeping its cluster id.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a cluster is run: ``kafkalike serve`` does not pay for it
    from kafkalike.testing.process_cluster import KafkalikeCluster, KafkalikeNode

BAD_USAGE_EXIT, CANNOT_START_EXIT = 2, 1
DEFAULT_BASE_PORT = 9092
DEFAULT_DATA_DIR = Path("kafkalike-cluster")
WATCH_INTERVAL_S = 0.5


class StopRequested(Exception):
    """SIGTERM or SIGINT arrived: stop every node and exit 0."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = sub.add_parser("cluster", help="run a cluster of nodes on loopback until SIGTERM or Ctrl-C")
    cluster.add_argument("--brokers", type=int, default=3, metavar="N", help="how many nodes (default 3)")
    cluster.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        metavar="D",
        help="one node-<id> directory per node (./kafkalike-cluster)",
    )
    cluster.add_argument(
        "--base-port",
        type=int,
        default=DEFAULT_BASE_PORT,
        metavar="P",
        help="node i's client port is P+i-1, its controller port P+100+i-1 (default 9092; 0: free ports)",
    )
    cluster.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="a config for every node")
    cluster.add_argument(
        "--ready-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for every node (default 60)",
    )


def fail(message: str, exit_code: int) -> int:
    print(f"kafkalike: {message}", file=sys.stderr, flush=True)
    return exit_code


def parse_overrides(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"bad --override {item!r}: expected KEY=VALUE")
        overrides[name.strip()] = value.strip()
    return overrides


def run(args: argparse.Namespace) -> int:
    from kafkalike.testing.process_cluster import MAX_NODES, KafkalikeCluster

    if not 1 <= args.brokers <= MAX_NODES:
        return fail(f"bad --brokers {args.brokers}: a cluster has 1 to {MAX_NODES} nodes", BAD_USAGE_EXIT)
    try:
        cluster = KafkalikeCluster(
            args.brokers,
            args.data_dir,
            base_port=args.base_port,
            overrides=parse_overrides(args.override),
            ready_timeout_s=args.ready_timeout,
        )
    except ValueError as exc:
        return fail(str(exc), BAD_USAGE_EXIT)
    previous = {sig: signal.signal(sig, _request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _serve(cluster)
    except StopRequested:
        return 0
    finally:
        # Whatever ended the run (a signal during start-up included), no node outlives this process.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _request_stop(signum: int, frame: FrameType | None) -> None:
    raise StopRequested(signal.Signals(signum).name)


def _serve(cluster: KafkalikeCluster) -> int:
    from kafkalike.testing.process_cluster import NodeExited, NodeNotReady

    try:
        cluster.start()
    except NodeExited as exc:
        return fail(f"node {exc.node_id} did not start: {exc.reason}", CANNOT_START_EXIT)
    except NodeNotReady as exc:
        return fail(str(exc), CANNOT_START_EXIT)
    data_dir = cluster.nodes[0].node_dir.parent
    print(
        f"kafkalike cluster ready on {cluster.bootstrap_servers} "
        f"({_nodes(len(cluster.nodes))}, cluster {cluster.cluster_id}, data {data_dir})",
        flush=True,
    )
    _watch(cluster.nodes)
    return CANNOT_START_EXIT


def _watch(nodes: list[KafkalikeNode]) -> None:
    """Until a signal (StopRequested): say once of each node that exits on its own; return when
    none is left."""
    reported: set[int] = set()
    while len(reported) < len(nodes):
        for node in nodes:
            if node.node_id not in reported and not node.running:
                reported.add(node.node_id)
                code = None if node.proc is None else node.proc.returncode
                fail(f"node {node.node_id} exited (status {code}): {node.exit_reason()}", CANNOT_START_EXIT)
        time.sleep(WATCH_INTERVAL_S)


def _nodes(count: int) -> str:
    return "1 node" if count == 1 else f"{count} nodes"
