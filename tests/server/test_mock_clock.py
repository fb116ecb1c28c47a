"""Time-driven behaviour on trio's MockClock (autojump): the broker built with a ``TrioClock``
reads every time from it, so idle connections close, sessions and transactions time out, and
retention deletes segments as the test sleeps, without real waiting. Each test asserts what the
broker did and when on the mock clock; none measures real time."""

from __future__ import annotations

from pathlib import Path

import trio
from trio.testing import MockClock

from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.testing.clock import DEFAULT_EPOCH_MS, TrioClock
from tests.server.conftest import serving
from tests.server.test_broker_basics import _create, _fetch_body, _produce_body
from tests.server.test_connection_limits import answers, closed_by_broker
from tests.server.test_groups import DESCRIBE, FAST, connect, heartbeat, join, sync
from tests.server.test_transactions import SMALL, Producer, completed, consume, fetch

PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2
MINUTE_S = 60


async def _produce(client: object, topic: str, *values: bytes) -> int:
    batch = build_batch([Record(value=v) for v in values], base_timestamp=0)
    response = await client.request(PRODUCE, 9, _produce_body(topic, 0, batch))  # type: ignore[attr-defined]
    part = response.responses[0].partition_responses[0]
    assert part.error_code == E.NONE
    return int(part.base_offset)


async def _log_start(client: object, topic: str) -> int:
    """The partition's log start offset, from a fetch at the high watermark's side (offset 2)."""
    response = await client.request(FETCH, 12, _fetch_body(topic, 0, 2, min_bytes=0))  # type: ignore[attr-defined]
    part = response.responses[0].partitions[0]
    assert part.error_code == E.NONE and part.high_watermark == 2
    return int(part.log_start_offset)


async def test_an_idle_connection_is_closed_at_connections_max_idle_ms(
    tmp_path: Path, autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    async with serving(tmp_path, clock=trio_clock, ephemeral=True, connections_max_idle_ms="60000") as running:
        idle = await running.client()
        assert await answers(idle)
        await trio.sleep(50)
        assert await answers(idle)  # a request: idle from here again
        last_request = trio.current_time()
        assert await closed_by_broker(idle.stream, deadline_s=3600)
        # The idle check looks every 6 s (a tenth of the limit): closed within that of the limit.
        assert 60 <= trio.current_time() - last_request <= 60 + 7


async def test_a_member_that_stops_heartbeating_is_expired_at_its_session_timeout(
    tmp_path: Path, autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    async with serving(tmp_path, clock=trio_clock, ephemeral=True, **FAST) as running:
        client = await connect(running, "app")
        await _create(client, "events", 1)
        joined = await join(client, session_timeout_ms=30_000)
        assert joined.error_code == E.NONE
        assert (await sync(client, joined.member_id, 1)).error_code == E.NONE
        await trio.sleep(25)
        assert await heartbeat(client, joined.member_id, 1) == E.NONE  # within the session: renewed
        await trio.sleep(25)
        assert await heartbeat(client, joined.member_id, 1) == E.NONE  # 50 s after joining, 25 s after the last one
        await trio.sleep(31)
        described = await client.request(DESCRIBE, 5, {"groups": ["g"], "include_authorized_operations": False})
        assert described.groups[0].group_state == "Empty" and described.groups[0].members == []
        assert await heartbeat(client, joined.member_id, 1) == E.UNKNOWN_MEMBER_ID


async def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(
    tmp_path: Path, autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    # Kafka's defaults: the coordinator looks for timed-out transactions every 10 s.
    async with serving(tmp_path, clock=trio_clock, ephemeral=True, **SMALL) as running:
        client = await running.client()
        await _create(client, "t")
        producer = Producer(client, "tx", timeout_ms=60_000)
        assert (await producer.init()).error_code == E.NONE
        await producer.add("t", 0)
        assert (await producer.send("t", 0, b"doomed")).error_code == E.NONE
        await trio.sleep(50)
        described = await client.request(65, 0, {"transactional_ids": ["tx"]})
        assert described.transaction_states[0].transaction_state == "Ongoing"  # not yet timed out
        await trio.sleep(25)
        assert await completed(running, client, "tx") == "CompleteAbort"
        assert consume(await fetch(client, "t", 0, committed=True)) == []
        assert (await fetch(client, "t", 0, committed=True)).last_stable_offset == 2  # the record and the marker
        assert await producer.end(commit=True) == E.PRODUCER_FENCED


async def test_retention_by_time_deletes_a_segment_once_its_records_are_older_than_retention_ms(
    tmp_path: Path, autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    overrides = {"log_retention_check_interval_ms": "60000", "connections_max_idle_ms": "-1"}
    async with serving(tmp_path, clock=trio_clock, ephemeral=True, **overrides) as running:
        client = await running.client()
        # LogAppendTime: the records' times are the broker's wall clock, as retention's is.
        await _create(client, "aged", retention_ms="3600000", message_timestamp_type="LogAppendTime")
        assert await _produce(client, "aged", b"a", b"b") == 0
        appended = trio.current_time()
        await trio.sleep(50 * MINUTE_S)
        assert await _log_start(client, "aged") == 0
        # Deleted at the first retention check (every minute) after the hour; the deadline is
        # generous because a check may wait for a worker thread while the mock clock jumps.
        with trio.fail_after(30 * MINUTE_S):
            while await _log_start(client, "aged") != 2:
                await trio.sleep(MINUTE_S / 4)
        assert trio.current_time() - appended > 60 * MINUTE_S  # never before retention.ms
        gone = (await client.request(FETCH, 12, _fetch_body("aged", 0, 0))).responses[0].partitions[0]
        assert gone.error_code == E.OFFSET_OUT_OF_RANGE


async def test_a_long_poll_fetch_is_answered_at_max_wait_ms_or_when_a_record_comes(
    tmp_path: Path, autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    async with serving(tmp_path, clock=trio_clock, ephemeral=True) as running:
        consumer, producer = await running.client(), await running.client()
        await _create(consumer, "polled", message_timestamp_type="LogAppendTime")
        asked = trio.current_time()
        empty = await consumer.request(FETCH, 12, _fetch_body("polled", 0, 0, max_wait_ms=30_000))
        assert 30 <= trio.current_time() - asked < 31  # answered at its deadline, on the mock clock
        part = empty.responses[0].partitions[0]
        assert part.error_code == E.NONE and part.records in (None, b"")

        answered: list[object] = []

        async def long_poll() -> None:
            answered.append(await consumer.request(FETCH, 12, _fetch_body("polled", 0, 0, max_wait_ms=60_000)))

        async with trio.open_nursery() as nursery:
            asked = trio.current_time()
            nursery.start_soon(long_poll)
            await trio.sleep(5)
            assert answered == []
            await _produce(producer, "polled", b"x")
            appended_ms = DEFAULT_EPOCH_MS + int(trio.current_time() * 1000)
        assert 5 <= trio.current_time() - asked < 6  # answered by the record, not at max_wait_ms
        (response,) = answered
        records = response.responses[0].partitions[0].records  # type: ignore[attr-defined]
        ((pos, header),) = list(iter_batches(bytes(records)))
        # Stamped by the broker's wall clock: the mock clock's time since TrioClock's epoch.
        assert header.max_timestamp == appended_ms
        assert [r.value for r in decode_records(bytes(records), pos, header)] == [b"x"]


async def test_a_waiting_fetch_answers_offsets_that_moved_under_it_without_new_records(
    tmp_path: Path, autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    # DeleteRecords during the wait moves the log start, not what the fetch reads: the fetch
    # waits on, and its answer at max_wait_ms carries the log start as it is then.
    async with serving(tmp_path, clock=trio_clock, ephemeral=True) as running:
        consumer, admin = await running.client(), await running.client()
        await _create(consumer, "trimmed")
        assert await _produce(admin, "trimmed", b"a", b"b") == 0
        answered: list[object] = []

        async def long_poll() -> None:
            answered.append(await consumer.request(FETCH, 12, _fetch_body("trimmed", 0, 2, max_wait_ms=30_000)))

        async with trio.open_nursery() as nursery:
            asked = trio.current_time()
            nursery.start_soon(long_poll)
            await trio.sleep(5)
            body = {
                "topics": [{"name": "trimmed", "partitions": [{"partition_index": 0, "offset": 1}]}],
                "timeout_ms": 1000,
            }
            deleted = await admin.request(21, 2, body)
            assert deleted.topics[0].partitions[0].low_watermark == 1
            await trio.sleep(5)
            assert answered == []  # nothing to read yet: still waiting
        assert 30 <= trio.current_time() - asked < 31
        part = answered[0].responses[0].partitions[0]  # type: ignore[attr-defined]
        assert part.error_code == E.NONE and part.records in (None, b"")
        assert (part.log_start_offset, part.high_watermark) == (1, 2)


async def test_a_read_committed_fetch_waits_through_an_open_transaction_and_is_answered_at_its_commit(
    tmp_path: Path, autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    # The transaction's records move the high watermark, not the last stable offset where a
    # read_committed fetch reads: it waits until the commit marker moves that.
    async with serving(tmp_path, clock=trio_clock, ephemeral=True, **SMALL) as running:
        client, reader = await running.client(), await running.client()
        await _create(client, "t")
        producer = Producer(client, "tx")
        assert (await producer.init()).error_code == E.NONE
        await producer.add("t", 0)
        answered: list[object] = []

        async def long_poll() -> None:
            body = {**_fetch_body("t", 0, 0, max_wait_ms=60_000), "isolation_level": 1}
            answered.append(await reader.request(FETCH, 12, body))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_poll)
            await trio.sleep(5)
            assert (await producer.send("t", 0, b"pending")).error_code == E.NONE
            await trio.sleep(5)
            assert answered == []  # the high watermark moved, the last stable offset did not
            committed_at = trio.current_time()
            assert await producer.end(commit=True) == E.NONE
        assert trio.current_time() - committed_at < 5  # answered by the commit, not at max_wait_ms
        part = answered[0].responses[0].partitions[0]  # type: ignore[attr-defined]
        assert part.error_code == E.NONE and consume(part) == [b"pending"]
