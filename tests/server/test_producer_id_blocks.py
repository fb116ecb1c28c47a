"""A broker's producer id blocks (Kafka's RPCProducerIdManager rule): the next block is wanted
once 90% of the current one is handed out, the current one is used to its end before the next,
and no id is handed out twice."""

from __future__ import annotations

from kafkalike.server.producer_ids import ProducerIdBlock, ProducerIdBlocks


def test_no_block_no_id_and_a_block_is_wanted() -> None:
    blocks = ProducerIdBlocks()
    assert blocks.take() is None and blocks.wants_block() and not blocks.has_id()


def test_the_next_block_is_wanted_at_ninety_percent_and_used_after_the_current_one() -> None:
    blocks = ProducerIdBlocks()
    blocks.add(ProducerIdBlock(1000, 10))
    taken = [blocks.take() for _ in range(9)]
    assert taken == list(range(1000, 1009))
    assert blocks.wants_block()  # 9 of 10 handed out
    blocks.add(ProducerIdBlock(5000, 10))
    assert not blocks.wants_block()
    assert blocks.take() == 1009  # the current block to its end first
    assert blocks.take() == 5000
    assert blocks.current == ProducerIdBlock(5000, 10) and blocks.following is None


def test_below_ninety_percent_no_block_is_wanted() -> None:
    blocks = ProducerIdBlocks()
    blocks.add(ProducerIdBlock(0, 1000))
    for _ in range(899):
        blocks.take()
    assert not blocks.wants_block()
    blocks.take()
    assert blocks.wants_block()


def test_ids_over_many_blocks_are_never_repeated() -> None:
    blocks = ProducerIdBlocks()
    given: list[int] = []
    next_start = 0
    for _ in range(5000):
        if blocks.wants_block():
            blocks.add(ProducerIdBlock(next_start, 100))
            next_start += 100
        taken = blocks.take()
        assert taken is not None
        given.append(taken)
    assert len(set(given)) == len(given) == 5000
    assert given == sorted(given)
