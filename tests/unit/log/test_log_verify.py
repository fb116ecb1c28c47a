"""``kafkalike storage verify``: a clean directory passes, and each kind of damage is found
(each check's negative control), without the directory being changed."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import crc32c
import pytest
from logtest_batches import make_batch
from test_cleaner_support import end_txn

from kafkalike.cli.main import main
from kafkalike.log import LogConfig, LogManager
from kafkalike.log.verify import Problem, verify
from kafkalike.protocol.records import CRC_OFFSET, CRC_START, Record, build_batch, read_batch_header
from kafkalike.protocol.validation import RecordsRefused, TopicSettings, validate_produce_records
from kafkalike.testing.hostile_batches import ACCEPTED, CASES, HostileCase

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=100)
GZIP = 1


def build(tmp_path: Path) -> tuple[Path, int]:
    """A log dir with one partition: plain, gzip, transactional and aborted batches over several
    segments, shut down cleanly. Returns the partition directory and its record count."""
    manager = LogManager([tmp_path])
    log = manager.get_or_create("v", 0, CONFIG, 0)
    records = 0
    for i in range(30):
        log.append(make_batch([f"plain-{i}-{j}".encode() for j in range(3)]), leader_epoch=0, now_ms=0)
        compressed = build_batch([Record(value=b"z" * 50) for _ in range(4)], compression=GZIP, base_timestamp=5)
        log.append(bytearray(compressed), leader_epoch=0, now_ms=0)
        records += 7
    log.append(
        make_batch([b"t"], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True),
        leader_epoch=0,
        now_ms=0,
    )
    end_txn(log, commit=False, producer_id=9, producer_epoch=0, now_ms=1)
    records += 2
    log.high_watermark = log.log_end_offset
    manager.close_all()
    return tmp_path / "v-0", records


def snapshot(directory: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_size, p.read_bytes()) for p in sorted(directory.rglob("*")) if p.is_file()}


def segments(partition: Path) -> list[Path]:
    return sorted(partition.glob("*.log"))


def recrc(data: bytearray, pos: int) -> None:
    header = read_batch_header(data, pos)
    struct.pack_into(">I", data, pos + CRC_OFFSET, crc32c.crc32c(bytes(data[pos + CRC_START : pos + header.size])))


def test_a_clean_directory_passes_and_is_left_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partition, records = build(tmp_path)
    before = snapshot(tmp_path)
    report = verify(tmp_path)
    assert report.ok, report.problems
    assert (report.partitions, report.records) == (1, records)
    assert report.segments == len(segments(partition)) > 1
    assert main(["storage", "verify", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().endswith("no problems")
    assert main(["storage", "verify", str(partition), "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert snapshot(tmp_path) == before


# Where a damage to one batch was done: the segment file and the byte its batch starts at.
Damaged = tuple[Path, int]


def damage_crc(partition: Path) -> Damaged:
    victim = segments(partition)[1]
    data = bytearray(victim.read_bytes())
    first = read_batch_header(data, 0)
    data[first.size + 70] ^= 0xFF  # inside the second batch's records
    victim.write_bytes(bytes(data))
    return victim, first.size


def damage_records(partition: Path) -> Damaged:
    """A record length that runs past its batch, with a CRC that matches: only the record walk sees it."""
    victim = segments(partition)[0]
    data = bytearray(victim.read_bytes())
    data[61] = 0x7E  # the first record's length varint: 63, past the end of the records
    recrc(data, 0)
    victim.write_bytes(bytes(data))
    return victim, 0


def damage_compressed_payload(partition: Path) -> Damaged:
    """The gzip stream of a compressed batch broken (its magic bytes), with a CRC that matches."""
    victim = segments(partition)[0]
    data = bytearray(victim.read_bytes())
    position = read_batch_header(data, 0).size  # the first gzip batch
    assert read_batch_header(data, position).compression == GZIP
    data[position + 61] ^= 0xFF
    recrc(data, position)
    victim.write_bytes(bytes(data))
    return victim, position


def damage_torn_tail(partition: Path) -> None:
    victim = segments(partition)[-1]
    with open(victim, "ab") as f:
        f.write(make_batch([b"half a batch"])[:30])


def damage_offsets(partition: Path) -> None:
    """The last segment's first batch renumbered to an offset the segment before already holds."""
    victim = segments(partition)[-1]
    data = bytearray(victim.read_bytes())
    struct.pack_into(">q", data, 0, 0)  # the base offset is outside the CRC
    victim.write_bytes(bytes(data))


def damage_index(partition: Path) -> None:
    index = partition / segments(partition)[0].name.replace(".log", ".index")
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 4, struct.unpack_from(">i", data, 4)[0] + 1)  # first entry's position, off by one
    index.write_bytes(bytes(data))


def damage_timeindex(partition: Path) -> None:
    index = partition / segments(partition)[0].name.replace(".log", ".timeindex")
    data = bytearray(index.read_bytes())
    struct.pack_into(">q", data, 0, 1 << 50)
    index.write_bytes(bytes(data))


def damage_txnindex(partition: Path) -> None:
    (index,) = partition.glob("*.txnindex")
    index.write_bytes(index.read_bytes()[:-3])


def damage_snapshot(partition: Path) -> None:
    snap = sorted(partition.glob("*.snapshot"))[-1]
    data = bytearray(snap.read_bytes())
    data[-1] ^= 0x01
    snap.write_bytes(bytes(data))


def damage_checkpoint(partition: Path) -> None:
    (partition.parent / "recovery-point-offset-checkpoint").write_text("0\n2\nv 0 12\n")


@pytest.mark.parametrize(
    ("damage", "kind"),
    [
        (damage_crc, "crc"),
        (damage_records, "records"),
        (damage_compressed_payload, "records"),
        (damage_torn_tail, "framing"),
        (damage_offsets, "offsets"),
        (damage_index, "index"),
        (damage_timeindex, "timeindex"),
        (damage_txnindex, "txnindex"),
        (damage_snapshot, "snapshot"),
        (damage_checkpoint, "checkpoint"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_each_kind_of_damage_is_reported_and_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: object, kind: str
) -> None:
    partition, _ = build(tmp_path)
    damage(partition)  # type: ignore[operator]
    before = snapshot(tmp_path)
    report = verify(tmp_path)
    assert [p.kind for p in report.problems] == [kind], report.problems
    assert main(["storage", "verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f": {kind}: " in out and out.strip().endswith("1 problem(s)")
    assert main(["storage", "verify", str(tmp_path), "--output", "json"]) == 1
    assert [p["kind"] for p in json.loads(capsys.readouterr().out)["problems"]] == [kind]
    assert snapshot(tmp_path) == before  # read only: nothing repaired


def test_a_missing_directory_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["storage", "verify", str(tmp_path / "nope")]) == 1
    assert "not a directory" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("damage", "kind"),
    [(damage_crc, "crc"), (damage_records, "records"), (damage_compressed_payload, "records")],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_a_damaged_batch_is_reported_with_its_segment_byte_and_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: object, kind: str
) -> None:
    partition, _ = build(tmp_path)
    victim, position = damage(partition)  # type: ignore[operator]
    base_offset = read_batch_header(victim.read_bytes(), position).base_offset
    (problem,) = verify(tmp_path).problems
    assert (problem.file, problem.kind, problem.position, problem.offset) == (str(victim), kind, position, base_offset)
    assert main(["storage", "verify", str(tmp_path)]) == 1
    assert f"{victim}: byte {position} offset {base_offset}: {kind}: " in capsys.readouterr().out


# ---- one definition of a well-formed batch: what produce stores passes, what it refuses is reported ----

NOW_MS = 1_700_000_000_000
# Refused by produce for the bytes of their records (not their headers): stored all the same (by a
# broker that did not check, or a disk that changed them under a right CRC), verify finds them.
RECORD_FAULTS = [
    "fewer_records_than_declared",
    "more_records_than_declared",
    "bytes_after_the_records",
    "record_length_too_long",
    "record_length_too_short",
    "record_length_past_the_batch",
    "record_length_varint_6_bytes",
    "timestamp_varint_11_bytes",
    "header_count_negative",
    "header_count_huge",
    "header_key_null",
    "garbage_records",
    *(f"{kind}_{codec}" for kind in ("garbage", "truncated") for codec in ("gzip", "snappy", "lz4", "zstd")),
    "garbage_snappy_raw",
    "truncated_snappy_raw",
    "compressed_more_records_than_declared",
    "compressed_fewer_records_than_declared",
]
_CASES = {case.name: case for case in CASES}


def settings_of(case: HostileCase) -> TopicSettings:
    assert set(case.configs) <= {"compression.type"}, case.configs
    return TopicSettings(compression_type=case.configs.get("compression.type", "producer"))


def stored(tmp_path: Path, batch: bytes) -> tuple[Path, int]:
    """A log holding a good batch of 3 records, then ``batch`` as it is; the segment and the byte
    ``batch`` starts at."""
    manager = LogManager([tmp_path])
    log = manager.get_or_create("s", 0, CONFIG, 0)
    first = make_batch([b"a", b"b", b"c"], base_timestamp=NOW_MS)
    log.append(first, leader_epoch=0, now_ms=NOW_MS)
    log.append(bytearray(batch), leader_epoch=0, now_ms=NOW_MS)
    log.high_watermark = log.log_end_offset
    manager.close_all()
    (segment,) = segments(tmp_path / "s-0")
    return segment, len(first)


@pytest.mark.parametrize("case", ACCEPTED, ids=lambda case: case.name)
def test_every_batch_produce_accepts_passes_once_stored(tmp_path: Path, case: HostileCase) -> None:
    """The negative control of the record check: odd batches Kafka accepts, a compressed one whose
    record lengths lie among them (the strict decoder refused that one), are no problem."""
    valid = validate_produce_records(
        case.make(NOW_MS), settings_of(case), now_ms=NOW_MS, api_version=case.api_version, topic_partition="s-0"
    )
    stored(tmp_path, bytes(valid.records))
    report = verify(tmp_path)
    assert report.ok, report.problems
    assert report.records == 3 + valid.record_count


@pytest.mark.parametrize("name", RECORD_FAULTS)
def test_records_produce_refuses_are_reported_once_stored_in_its_words(tmp_path: Path, name: str) -> None:
    case = _CASES[name]
    batch = case.make(NOW_MS)
    with pytest.raises(RecordsRefused) as refused:
        validate_produce_records(
            batch, settings_of(case), now_ms=NOW_MS, api_version=case.api_version, topic_partition="s-0"
        )
    segment, position = stored(tmp_path, batch)
    assert verify(tmp_path).problems == [Problem(str(segment), "records", str(refused.value), position, 3)]
