"""Fuzz targets for everything that parses bytes a client sends, and a small engine to run them.

Each target takes one input (bytes) and returns normally when the code under test kept its
invariant; anything it raises is a finding. The invariants:

- the protocol layer (``framing``, ``requests``, ``records``, ``record_bodies``,
  ``compression``): decode or raise ``ProtocolError``, nothing else. The frame splitter must
  also split exactly as a reference splitter of the same bytes does, and an accepted request
  must re-encode to a stable form.
- what clients hand the group and transaction coordinators (``consumer_protocol``,
  ``coordinator_records``): decoded, or refused with ``ProtocolError`` / ``RecordError``, and a
  record loaded at start-up never breaks the coordinator that loads it.
- the request path (``request_path``, ``request_stream``): a frame sent to a running broker gets
  an answer or a closed connection within a bound, a connection that ends is closed, and the
  broker logs no error or traceback. Only requests
  that may wait by design (Fetch up to its max wait, JoinGroup and SyncGroup for the rest of
  their group) are let off the bound.

Two engines run the same targets: atheris (coverage-guided, ``scripts/fuzz.py``), and
``mutation_run`` here, a seeded, deterministic mutator of the seed corpus that the test suite
runs for a bounded number of inputs. Seeds live in ``tests/fuzz/corpus/<target>/``;
``write_seeds`` regenerates them from this project's own encoders.
"""

from __future__ import annotations

from kafkalike.testing.fuzz.engine import (
    Crash,
    RunStats,
    mutate,
    mutation_run,
    replay_command,
    run_one,
    save_crash,
)
from kafkalike.testing.fuzz.request_path import RequestPath, check_request_path, check_request_stream, stop_request_path
from kafkalike.testing.fuzz.seeds import SEED_DIR_FOR, SEEDS, read_corpus, write_seeds
from kafkalike.testing.fuzz.targets import (
    BROKEN_PATTERN,
    MAX_UNCOMPRESSED_BYTES,
    Finding,
    Target,
    check_broken_decoder,
    check_compression,
    check_consumer_protocol,
    check_coordinator_records,
    check_framing,
    check_record_blob,
    check_record_bodies,
    check_records,
    check_request,
    framed_batch,
)

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("framing", check_framing, 4096, "FrameSplitter against a reference split"),
        Target("requests", check_request, 4096, "decode_request for every registered API and version"),
        Target("records", check_records, 8192, "batches, records, legacy message sets, control records"),
        Target("record_bodies", check_record_bodies, 8192, "records behind a right header and CRC, every codec"),
        Target("consumer_protocol", check_consumer_protocol, 2048, "subscriptions and assignments in group requests"),
        Target("coordinator_records", check_coordinator_records, 2048, "group and transaction records as loaded"),
        Target("compression", check_compression, 4096, "every codec's decoder, and round trips"),
        Target("request_path", check_request_path, 4096, "frames into a running broker over loopback"),
        Target("request_stream", check_request_stream, 4096, "a raw byte stream into a running broker, then its end"),
    )
}
# Not run by default: it exists to show that a run catches what it should.
NEGATIVE_CONTROL = Target("broken_decoder", check_broken_decoder, 4096, "a decoder with a planted KeyError")


def target(name: str) -> Target:
    if name == NEGATIVE_CONTROL.name:
        return NEGATIVE_CONTROL
    return TARGETS[name]


__all__ = [
    "BROKEN_PATTERN",
    "MAX_UNCOMPRESSED_BYTES",
    "NEGATIVE_CONTROL",
    "SEEDS",
    "SEED_DIR_FOR",
    "TARGETS",
    "Crash",
    "Finding",
    "RequestPath",
    "RunStats",
    "Target",
    "check_broken_decoder",
    "check_compression",
    "check_consumer_protocol",
    "check_coordinator_records",
    "check_framing",
    "check_record_blob",
    "check_record_bodies",
    "check_records",
    "check_request",
    "check_request_path",
    "check_request_stream",
    "framed_batch",
    "mutate",
    "mutation_run",
    "read_corpus",
    "replay_command",
    "run_one",
    "save_crash",
    "stop_request_path",
    "target",
    "write_seeds",
]
