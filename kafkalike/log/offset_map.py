"""The log cleaner's key -> latest offset map (Kafka's OffsetMap / SkimpyOffsetMap), bounded in size.

Keys of up to 15 bytes are stored as they are; longer keys by a 16-byte BLAKE2b digest, as Kafka
stores an MD5 digest of every key. The two forms cannot meet (a stored key is either shorter than
16 bytes or exactly a digest), and two long keys sharing a digest is as unlikely as Kafka's MD5
collision, which Kafka accepts too.

The bound is on entries, not bytes: ``entries_for_buffer`` turns Kafka's
``log.cleaner.dedupe.buffer.size`` into entries at what a dict entry costs in CPython (about 130
bytes with its key and offset objects; Kafka's map spends 24).
"""

from __future__ import annotations

import hashlib

# Measured: a dict holding 16-byte keys and large int offsets, per entry, on CPython 3.11.
ENTRY_BYTES = 136
_RAW_KEY_MAX = 15
_DIGEST_SIZE = 16


def entries_for_buffer(buffer_bytes: int, load_factor: float = 0.9) -> int:
    """How many keys a map may hold within ``buffer_bytes``, filled to ``load_factor`` like Kafka's."""
    return max(1, int(buffer_bytes // ENTRY_BYTES * load_factor))


def key_digest(key: bytes) -> bytes:
    return key if len(key) <= _RAW_KEY_MAX else hashlib.blake2b(key, digest_size=_DIGEST_SIZE).digest()


class OffsetMap:
    """Latest offset per key over the dirty part of one log, plus the last offset mapped.

    ``latest_offset`` is the offset up to which the dirty section was read into the map: records
    above it were never seen by the map, so the cleaner keeps them whatever their key.
    """

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("an offset map must hold at least one key")
        self.max_entries = max_entries
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1
        self.lookups = 0
        self.puts = 0

    def __len__(self) -> int:
        return len(self._offsets)

    def clear(self) -> None:
        self._offsets = {}
        self.latest_offset = -1
        self.lookups = 0
        self.puts = 0

    def can_take(self, new_keys: int) -> bool:
        """True when ``new_keys`` more keys fit (the cleaner asks per batch, with its record count)."""
        return len(self._offsets) + new_keys <= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[key_digest(key)] = offset
        self.puts += 1

    def get(self, key: bytes) -> int:
        """The latest offset mapped for ``key``, or -1."""
        self.lookups += 1
        return self._offsets.get(key_digest(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = max(self.latest_offset, offset)

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.max_entries
