"""``kafkalike storage format`` and ``random-uuid``: what they write, and each refusal in
kafka-storage's words with its exit status (1, one line on stderr, nothing written)."""

from __future__ import annotations

import base64
import re
import uuid
from pathlib import Path

import pytest

from kafkalike.cli.main import main
from kafkalike.cli.storage_format import java_hash_map_order, parse_uuid, random_uuid, release_version
from kafkalike.log.snapshot_files import SnapshotFiles, SnapshotId
from kafkalike.log.storage import FileLogDirectory
from kafkalike.protocol.metadata_records import MetadataRecordType, read_snapshot
from kafkalike.server.config import parse_properties

CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"
COMBINED = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.quorum.voters": "1@127.0.0.1:9093",
}


def write_config(tmp_path: Path, values: dict[str, str | None]) -> Path:
    props = {**COMBINED, "log.dirs": f"{tmp_path / 'd1'},{tmp_path / 'd2'}", **values}
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items() if v is not None))
    return path


def storage(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    code = main(["storage", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def format_node(capsys: pytest.CaptureFixture[str], config: Path, *more: str) -> tuple[int, list[str], list[str]]:
    return storage(capsys, "format", "-t", CLUSTER_ID, "-c", str(config), *more)


def feature_levels(path: Path) -> list[tuple[str, int]]:
    contents = read_snapshot(path.read_bytes())
    assert all(r.type == MetadataRecordType.FEATURE_LEVEL_RECORD for r in contents.records)
    return [(r.name, r.feature_level) for r in contents.records]


def test_random_uuid_is_a_kafka_uuid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = storage(capsys, "random-uuid")
    assert (code, err, len(out)) == (0, [], 1)
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", out[0]) and not out[0].startswith("-")
    assert parse_uuid(out[0]).bytes == base64.urlsafe_b64decode(out[0] + "==")
    assert len({random_uuid() for _ in range(200)}) == 200


def test_format_writes_meta_properties_and_the_bootstrap_snapshot_in_every_log_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = format_node(capsys, write_config(tmp_path, {}))
    assert (code, err) == (0, [])
    assert sorted(out) == [
        f"Formatting data directory {tmp_path / 'd2'} with metadata.version 4.0-IV3.",
        f"Formatting metadata directory {tmp_path / 'd1'} with metadata.version 4.0-IV3.",
    ]
    directory_ids = set()
    for d in ("d1", "d2"):
        text = (tmp_path / d / "meta.properties").read_text()
        assert re.fullmatch(r"#\n#\w{3} \w{3} \d\d \d\d:\d\d:\d\d UTC \d{4}\n(.+=.+\n){4}", text)
        meta = parse_properties(text)
        assert list(meta) == ["node.id", "directory.id", "version", "cluster.id"]
        assert (meta["node.id"], meta["version"], meta["cluster.id"]) == ("1", "1", CLUSTER_ID)
        directory_ids.add(parse_uuid(meta["directory.id"]))
        assert feature_levels(tmp_path / d / "bootstrap.checkpoint") == [
            ("metadata.version", 25),
            ("group.version", 1),
            ("transaction.version", 2),
        ]
        # Static voters: no dynamic-quorum snapshot.
        assert not (tmp_path / d / "__cluster_metadata-0").exists()
    assert len(directory_ids) == 2


def test_standalone_writes_the_first_voters_snapshot_with_the_metadata_directory_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path, {"controller.quorum.voters": None, "controller.quorum.bootstrap.servers": "127.0.0.1:9093"}
    )
    code, out, _ = format_node(capsys, config, "--standalone")
    assert code == 0 and sorted(out) == [
        f"Formatting data directory {tmp_path / 'd2'} with metadata.version 4.0-IV3.",
        f"Formatting dynamic metadata voter directory {tmp_path / 'd1'} with metadata.version 4.0-IV3.",
    ]
    metadata = tmp_path / "d1" / "__cluster_metadata-0"
    files = SnapshotFiles(FileLogDirectory(metadata))
    assert files.ids() == [SnapshotId(0, 0)]
    contents = read_snapshot(files.read(SnapshotId(0, 0)))
    assert contents.kraft_version == 1 and contents.records == ()
    (voter,) = contents.voters.voters
    directory_id = parse_properties((tmp_path / "d1" / "meta.properties").read_text())["directory.id"]
    assert voter.voter_directory_id == parse_uuid(directory_id)
    assert (voter.voter_id, voter.endpoints[0].name, voter.endpoints[0].host, voter.endpoints[0].port) == (
        1,
        "CONTROLLER",
        "127.0.0.1",
        9093,
    )
    # kraft.version is the quorum's: never a bootstrap record.
    assert "kraft.version" not in dict(feature_levels(tmp_path / "d1" / "bootstrap.checkpoint"))
    assert not (tmp_path / "d2" / "__cluster_metadata-0").exists()


def test_initial_controllers_give_this_node_its_listed_directory_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine, other = uuid.uuid4(), uuid.uuid4()
    text = f"1@127.0.0.1:9093:{base64.urlsafe_b64encode(mine.bytes).decode()[:22]},"
    text += f"2@127.0.0.1:9094:{base64.urlsafe_b64encode(other.bytes).decode()[:22]}"
    config = write_config(tmp_path, {"controller.quorum.voters": None, "controller.quorum.bootstrap.servers": "h:1"})
    assert format_node(capsys, config, "--initial-controllers", text)[0] == 0
    meta = parse_properties((tmp_path / "d1" / "meta.properties").read_text())
    assert parse_uuid(meta["directory.id"]) == mine
    snapshot = (tmp_path / "d1" / "__cluster_metadata-0" / SnapshotId(0, 0).file_name).read_bytes()
    voters = read_snapshot(snapshot).voters.voters
    assert [(v.voter_id, v.voter_directory_id, v.endpoints[0].port) for v in voters] == [
        (1, mine, 9093),
        (2, other, 9094),
    ]


def test_directories_are_taken_in_the_order_of_a_java_hash_map() -> None:
    # As kafka-storage printed these paths: by String.hashCode bucket, not by name.
    paths = [Path(f"/tmp/sc/ml/{name}") for name in ("a0", "d1", "d2", "meta")]
    assert [p.name for p in java_hash_map_order(paths)] == ["d1", "d2", "a0", "meta"]
    many = [Path(f"/data/{i}") for i in range(40)]  # a table grown past 16 buckets still holds each once
    assert sorted(java_hash_map_order(many)) == sorted(many)


def test_the_already_formatted_directory_named_is_the_first_of_a_copied_map() -> None:
    # Two paths kafka-storage (Java 17) named d2 of, already formatted: a copy of a two-entry map
    # has four buckets, where their hashes (1388123631 and 1388123632) fall in 2 and 1.
    base = Path("/tmp/pytest-of-root/pytest-214/test_formatted_twice_is_refuse0/node")
    paths = [base / "d1", base / "d2"]
    assert [p.name for p in java_hash_map_order(paths, copied=True)] == ["d2", "d1"]
    assert [p.name for p in java_hash_map_order(paths)] == ["d1", "d2"]


def test_release_version_sets_the_feature_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = format_node(capsys, write_config(tmp_path, {}), "--release-version", "3.9")
    assert code == 0 and out[0].endswith("with metadata.version 3.9-IV0.")
    assert feature_levels(tmp_path / "d1" / "bootstrap.checkpoint") == [("metadata.version", 21)]
    assert release_version("4.0-IV1") == "4.0-IV1" and release_version("3.7") == "3.7-IV4"


def test_already_formatted_is_refused_unless_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, {})
    assert format_node(capsys, config)[0] == 0
    before = (tmp_path / "d1" / "meta.properties").read_text()
    assert format_node(capsys, config) == (
        1,
        [],
        [
            f"Log directory {java_hash_map_order([tmp_path / 'd1', tmp_path / 'd2'], copied=True)[0]} is already formatted. Use --ignore-formatted to ignore this "
            "directory and format the others."
        ],
    )
    assert format_node(capsys, config, "--ignore-formatted") == (
        0,
        ["All of the log directories are already formatted."],
        [],
    )
    # A directory added later is formatted; the formatted one is left alone.
    config = write_config(tmp_path, {"log.dirs": f"{tmp_path / 'd1'},{tmp_path / 'd3'}"})
    code, out, _ = format_node(capsys, config, "-g")
    assert (code, out) == (0, [f"Formatting data directory {tmp_path / 'd3'} with metadata.version 4.0-IV3."])
    assert (tmp_path / "d1" / "meta.properties").read_text() == before


def test_a_directory_of_another_cluster_or_node_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, {})
    assert format_node(capsys, config)[0] == 0
    code, _, err = storage(capsys, "format", "-t", "AAAAAAAAAAAAAAAAAAAAAA", "-c", str(config), "-g")
    assert (code, err) == (
        1,
        [
            f"Invalid cluster.id in: {tmp_path / 'd1' / 'meta.properties'}. Expected AAAAAAAAAAAAAAAAAAAAAA, but read {CLUSTER_ID}"
        ],
    )
    code, _, err = format_node(capsys, write_config(tmp_path, {"node.id": "2"}), "-g")
    assert code == 1 and err[0].startswith(f"Stored node id 1 doesn't match previous node id 2 in {tmp_path / 'd1'}")


BOOTSTRAP = {"controller.quorum.voters": None, "controller.quorum.bootstrap.servers": "127.0.0.1:9093"}
REFUSALS: dict[str, tuple[dict[str, str | None], tuple[str, ...], str]] = {
    "no process.roles": (
        {"process.roles": None},
        (),
        'Missing required configuration "process.roles" which has no default value.',
    ),
    "no node.id": ({"node.id": None}, (), 'Missing required configuration "node.id" which has no default value.'),
    "no voters nor bootstrap servers": (
        {"controller.quorum.voters": None},
        (),
        "If using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap "
        "controllers or controller.quorum.voters must contain a parseable set of controllers.",
    ),
    "a controller without voters nor quorum arguments": (
        BOOTSTRAP,
        (),
        "Because controller.quorum.voters is not set on this controller, you must specify one of the following: "
        "--standalone, --initial-controllers, or --no-initial-controllers.",
    ),
    "a broker listening on the controller listener": (
        {**BOOTSTRAP, "process.roles": "broker"},
        (),
        "requirement failed: controller.listener.names must not contain a value appearing in the 'listeners' "
        "configuration when running KRaft with just the broker role",
    ),
    "standalone on a broker": (
        {**BOOTSTRAP, "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:9092"},
        ("--standalone",),
        "You can only use --standalone on a controller.",
    ),
    "a broker among the voters": (
        {"process.roles": "broker"},
        (),
        "requirement failed: If process.roles contains just the 'broker' role, the node id 1 must not be "
        "included in the set of voters controller.quorum.voters=Set(1)",
    ),
    "no controller listener name": (
        {"controller.listener.names": None},
        (),
        "requirement failed: controller.listener.names must contain at least one value appearing in the "
        "'listeners' configuration when running the KRaft controller role",
    ),
    "an unknown release": (
        {},
        ("-r", "bogus"),
        "Version bogus is not a valid version. The minimum version is 3.3-IV3 and the maximum version is 4.1-IV0",
    ),
    "an unstable release": ({}, ("-r", "4.1-IV0"), "metadata.version 4.1-IV0 is not yet stable."),
    "a bad initial controller directory id": (
        BOOTSTRAP,
        ("--initial-controllers", "1@127.0.0.1:9093:bogus"),
        "Failed to parse directory ID in dynamic voter string.",
    ),
    "an initial controller listed twice": (
        BOOTSTRAP,
        ("-I", "1@h:1:AAAAAAAAAAAAAAAAAAAAAQ,1@h:2:AAAAAAAAAAAAAAAAAAAAAg"),
        "Node id 1 was specified more than once.",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_each_refusal_is_kafkas_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    values, args, message = REFUSALS[case]
    assert format_node(capsys, write_config(tmp_path, values), *args) == (1, [], [message])
    assert not (tmp_path / "d1").exists() and not (tmp_path / "d2").exists()


def test_argument_errors_exit_1_as_kafka_storage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, {})
    with pytest.raises(SystemExit) as exited:
        main(["storage", "format", "-c", str(config)])
    assert exited.value.code == 1 and "required: --cluster-id/-t" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["storage", "format", "-t", CLUSTER_ID, "-c", str(config), "--standalone", "-N"])
    assert exited.value.code == 1 and "not allowed with argument" in capsys.readouterr().err
    code, _, err = storage(capsys, "format", "-t", CLUSTER_ID, "-c", str(tmp_path / "nope.properties"))
    assert (code, err) == (1, [f"Unable to read {tmp_path / 'nope.properties'}: No such file or directory"])
