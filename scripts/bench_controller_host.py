#!/usr/bin/env python3
"""How fast the controller host answers writes over an in-process quorum (in-memory logs,
loopback TCP, one process): CreateTopics (one topic of N partitions per request) and broker
heartbeats, each answered once committed, sent one at a time over the CONTROLLER listener.

    python scripts/bench_controller_host.py --voters 1 --requests 200
    python scripts/bench_controller_host.py --voters 3 --requests 200 --partitions 10

Prints the median and p99 latency and the rate of each kind. Everything runs in one process on
one event loop (the quorum members and the client share it), so on a 2-core machine these are
figures of the whole path's CPU cost more than of the network.
"""

from __future__ import annotations

import argparse
import statistics
import time

import trio

from kafkalike.testing.controller_quorum import ControllerQuorum
from kafkalike.testing.controller_requests import heartbeat, registration
from kafkalike.testing.quorum import CLUSTER_ID
from kafkalike.testing.wire_client import AsyncWireClient


def summary(name: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    rate = len(seconds) / sum(seconds)
    return f"{name}: {len(seconds)} requests, median {statistics.median(ordered) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, {rate:.0f}/s"


async def bench(voters: int, requests: int, partitions: int) -> None:
    quorum = ControllerQuorum(voters)
    async with trio.open_nursery() as nursery:
        await quorum.start_all(nursery)
        host = await quorum.active_host()
        client = await AsyncWireClient.connect("127.0.0.1", quorum.port(host.node_id))
        registered = await client.request(62, 4, registration(1, CLUSTER_ID))
        epoch = registered.broker_epoch
        await client.request(63, 1, heartbeat(1, epoch, 2**40))
        creates, beats = [], []
        for i in range(requests):
            body = {
                "topics": [
                    {
                        "name": f"t{i}",
                        "num_partitions": partitions,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 30000,
            }
            start = time.perf_counter()
            answer = await client.request(19, 7, body)
            creates.append(time.perf_counter() - start)
            assert answer.topics[0].error_code == 0, answer
            start = time.perf_counter()
            beat = await client.request(63, 1, heartbeat(1, epoch, 2**40))
            beats.append(time.perf_counter() - start)
            assert beat.error_code == 0, beat
        print(f"{voters} voter(s), {partitions} partition(s) per topic")
        print(summary("CreateTopics", creates))
        print(summary("BrokerHeartbeat", beats))
        await client.aclose()
        nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voters", type=int, default=1)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=1)
    args = parser.parse_args()
    trio.run(bench, args.voters, args.requests, args.partitions)


if __name__ == "__main__":
    main()
