"""The command line scripts/bench.py starts kafkalike with runs the tree it means: this checkout,
or the ``--baseline-tree`` one, wherever the benchmark itself was started (no broker is run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_lib.brokers import KafkalikeBroker  # noqa: E402

from kafkalike.testing.process import BrokerProcess  # noqa: E402


def imported_from(proc: BrokerProcess, cwd: Path | None) -> Path:
    """The kafkalike package the broker's command imports, started in ``cwd``: the same interpreter
    and environment asked with ``-c``, which puts the working directory first on the path as the
    command's ``-m`` does."""
    command = proc.command()
    assert command[1:4] == ["-m", "kafkalike", "serve"]
    found = subprocess.run(
        [command[0], "-c", "import kafkalike; print(kafkalike.__file__)"],
        cwd=cwd,
        env=proc.environment(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return Path(found.stdout.strip()).parent.resolve()


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    """Another tree with a kafkalike package of its own."""
    package = tmp_path / "baseline" / "kafkalike"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    return package.parent.resolve()


def started(broker: KafkalikeBroker) -> BrokerProcess:
    broker.work_dir.mkdir(parents=True)  # as start() makes it
    return broker.proc


def test_a_baseline_broker_runs_the_baseline_tree(tmp_path: Path, baseline: Path) -> None:
    proc = started(KafkalikeBroker(tmp_path / "work", source=baseline, name="baseline"))
    assert imported_from(proc, proc.cwd) == baseline / "kafkalike"


def test_the_measured_broker_runs_this_checkout(tmp_path: Path) -> None:
    proc = started(KafkalikeBroker(tmp_path / "work"))
    assert imported_from(proc, proc.cwd) == ROOT / "kafkalike"


def test_started_in_a_checkout_the_baseline_would_be_that_checkout(tmp_path: Path, baseline: Path) -> None:
    """The negative control: the same command started in this checkout (the benchmark's own
    directory, where Popen started it before) imports this checkout's package, not the baseline's."""
    proc = started(KafkalikeBroker(tmp_path / "work", source=baseline, name="baseline"))
    assert proc.cwd is not None and not proc.cwd.is_relative_to(ROOT)
    assert imported_from(proc, ROOT) == ROOT / "kafkalike"


def test_a_relative_work_directory_still_names_the_same_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    proc = KafkalikeBroker(Path("work")).proc
    data_dir = proc.command()[proc.command().index("--data-dir") + 1]
    assert data_dir == str(tmp_path / "work" / "data")
