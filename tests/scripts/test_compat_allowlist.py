"""compat_tests/allow.txt: entries for some Apache Kafka releases only (``ak>=X.Y``, ``ak<X.Y``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from compat_lib.results import load_allowlist  # noqa: E402

ENTRIES = """\
# a comment
ak>=4.2 differential new.gap  # only against 4.2 and newer
ak<4.2 differential old.gap  # only against releases before 4.2
differential any.gap  # against every release
"""


def test_an_entry_applies_to_the_releases_its_condition_names(tmp_path: Path) -> None:
    path = tmp_path / "allow.txt"
    path.write_text(ENTRIES)
    assert [e.scenario for e in load_allowlist(path, "4.4.0")] == ["new.gap", "any.gap"]
    assert [e.scenario for e in load_allowlist(path, "4.2")] == ["new.gap", "any.gap"]
    assert [e.scenario for e in load_allowlist(path, "4.0.2")] == ["old.gap", "any.gap"]
    # No release (checking the file): every entry, its line numbers kept.
    assert [e.line for e in load_allowlist(path)] == [2, 3, 4]


def test_a_malformed_condition_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "allow.txt"
    path.write_text("ak=4.2 differential x  # no such condition\n")
    with pytest.raises(ValueError, match="expected"):
        load_allowlist(path, "4.4.0")


def test_the_projects_allowlist_reads() -> None:
    assert load_allowlist(ROOT / "compat_tests" / "allow.txt", "4.4.0")
    assert load_allowlist(ROOT / "compat_tests" / "allow.txt", "4.0.2")
