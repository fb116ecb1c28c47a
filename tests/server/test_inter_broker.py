"""The inter-broker client against a small server of WriteTxnMarkers answers: a request is
answered over one connection per broker, a broken connection is made again by the next request,
a broker that does not answer in time, has no endpoint, or is cut off by the test kit's
NetworkFaults fails the request with BrokerUnreachable."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalike.protocol.api import decode_request, encode_response
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.server.inter_broker import BrokerUnreachable, InterBrokerClient
from kafkalike.server.quorum.channel import NetworkFaults
from kafkalike.server.routing import NodeEndpoint

WRITE_TXN_MARKERS = 27
BODY = {
    "markers": [
        {
            "producer_id": 7,
            "producer_epoch": 0,
            "transaction_result": True,
            "topics": [{"name": "t", "partition_indexes": [0]}],
            "coordinator_epoch": 1,
        }
    ]
}


class MarkerServer:
    """Answers each WriteTxnMarkers with NONE for every partition; ``mute`` stops answering,
    ``hang_up_next`` closes the connection instead of the next answer."""

    def __init__(self) -> None:
        self.port = 0
        self.connections = 0
        self.mute = False
        self.hang_up_next = False

    async def serve(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        splitter = FrameSplitter(1 << 20)
        async with stream:
            while data := await stream.receive_some(65536):
                splitter.feed(data)
                while (frame := splitter.take_frame()) is not None:
                    header, request = decode_request(memoryview(frame))
                    if self.hang_up_next:
                        self.hang_up_next = False
                        return
                    if self.mute:
                        continue
                    markers = [
                        {
                            "producer_id": m.producer_id,
                            "topics": [
                                {
                                    "name": t.name,
                                    "partitions": [
                                        {"partition_index": p, "error_code": 0} for p in t.partition_indexes
                                    ],
                                }
                                for t in m.topics
                            ],
                        }
                        for m in request.markers
                    ]
                    answer = encode_response(
                        header.api_key, header.api_version, header.correlation_id, {"markers": markers}
                    )
                    await stream.send_all(answer)


async def _client(server: MarkerServer, faults: NetworkFaults | None = None) -> InterBrokerClient:
    return InterBrokerClient(
        1,
        lambda broker_id: NodeEndpoint(broker_id, "127.0.0.1", server.port) if broker_id == 2 else None,
        faults=faults,
        request_timeout_ms=500,
    )


async def test_requests_share_one_connection_and_a_broken_one_is_made_again() -> None:
    server = MarkerServer()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        client = await _client(server)
        for _ in range(3):
            answer = await client.request(2, WRITE_TXN_MARKERS, 1, BODY)
            assert answer.markers[0].topics[0].partitions[0].error_code == 0
        assert server.connections == 1
        server.hang_up_next = True
        with pytest.raises(BrokerUnreachable):
            await client.request(2, WRITE_TXN_MARKERS, 1, BODY)
        answer = await client.request(2, WRITE_TXN_MARKERS, 1, BODY)
        assert answer.markers[0].producer_id == 7 and server.connections == 2
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_no_answer_in_time_no_endpoint_or_cut_off_fail_the_request() -> None:
    server = MarkerServer()
    faults = NetworkFaults()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        client = await _client(server, faults)
        server.mute = True
        with trio.fail_after(5), pytest.raises(BrokerUnreachable, match="did not answer"):
            await client.request(2, WRITE_TXN_MARKERS, 1, BODY)
        server.mute = False
        with pytest.raises(BrokerUnreachable, match="no live endpoint"):
            await client.request(3, WRITE_TXN_MARKERS, 1, BODY)
        faults.isolate(2)
        with pytest.raises(BrokerUnreachable, match="cut off"):
            await client.request(2, WRITE_TXN_MARKERS, 1, BODY)
        faults.heal()
        answer = await client.request(2, WRITE_TXN_MARKERS, 1, BODY)  # a new connection after the timeout
        assert answer.markers[0].topics[0].partitions[0].error_code == 0
        await client.aclose()
        nursery.cancel_scope.cancel()
