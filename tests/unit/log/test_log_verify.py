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
from kafkalike.log.verify import verify
from kafkalike.protocol.records import CRC_OFFSET, CRC_START, Record, build_batch, read_batch_header

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


def damage_crc(partition: Path) -> None:
    victim = segments(partition)[1]
    data = bytearray(victim.read_bytes())
    first = read_batch_header(data, 0)
    data[first.size + 70] ^= 0xFF  # inside the second batch's records
    victim.write_bytes(bytes(data))


def damage_records(partition: Path) -> None:
    """A record length that runs past its batch, with a CRC that matches: only the record walk sees it."""
    victim = segments(partition)[0]
    data = bytearray(victim.read_bytes())
    data[61] = 0x7E  # the first record's length varint: 63, past the end of the records
    recrc(data, 0)
    victim.write_bytes(bytes(data))


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
