"""The transaction coordinator's settings, with the broker config names they come from."""

from __future__ import annotations

from dataclasses import dataclass

from kafkalike.configs import declared_int


@dataclass(frozen=True)
class TxnConfig:
    # transaction.max.timeout.ms: InitProducerId's transaction timeout must be positive and at
    # most this (INVALID_TRANSACTION_TIMEOUT otherwise).
    max_timeout_ms: int = declared_int("transaction.max.timeout.ms")
    # transaction.abort.timed.out.transaction.cleanup.interval.ms: how often transactions open
    # longer than their timeout are looked for and aborted (the producer is fenced).
    abort_timed_out_interval_ms: int = declared_int("transaction.abort.timed.out.transaction.cleanup.interval.ms")
    # transactional.id.expiration.ms: an id idle (no transaction) this long is forgotten.
    id_expiration_ms: int = declared_int("transactional.id.expiration.ms")
    # transaction.remove.expired.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = declared_int("transaction.remove.expired.transaction.cleanup.interval.ms")
    # transaction.state.log.num.partitions (or the partition count of an existing topic).
    state_log_partitions: int = declared_int("transaction.state.log.num.partitions")
    # How soon a marker write or a state write that failed is tried again.
    retry_backoff_ms: int = 100

    def __post_init__(self) -> None:
        if self.state_log_partitions < 1:
            raise ValueError("transaction.state.log.num.partitions must be at least 1")
        if self.abort_timed_out_interval_ms < 1 or self.remove_expired_interval_ms < 1:
            raise ValueError("transaction cleanup intervals must be positive")
        if self.max_timeout_ms < 1:
            raise ValueError("transaction.max.timeout.ms must be positive")
