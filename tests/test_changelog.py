"""CHANGELOG.md's table of format versions matches the version constants in the code."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

CHANGELOG = Path(__file__).resolve().parent.parent / "CHANGELOG.md"

PACKAGE = CHANGELOG.parent / "kwiki"
_ASSIGN = re.compile(r"^([A-Z][A-Z_]*_VERSION) *(?::[^=]*)?= *\d+\b", re.MULTILINE)


def constants() -> set[tuple[str, str]]:
    """(module, name) of every module-level `..._VERSION = <int>` in the package."""
    out = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        out.update((module, name) for name in _ASSIGN.findall(path.read_text(encoding="utf-8")))
    return out


CONSTANTS = constants()
_ROW = re.compile(r"^\| ([^|]+?) \| (\d+) \| (.+) \|$")
_CONSTANT = re.compile(r"`([A-Z_]+_VERSION)` in `(kwiki/[a-z_/]+)\.py`")


def table(text: str) -> dict[str, tuple[int, tuple[str, str] | None]]:
    """format -> (current version, (module, constant) or None) from the '## Format versions' table."""
    section = text.split("## Format versions", 1)[1].split("\n## ", 1)[0]
    out: dict[str, tuple[int, tuple[str, str] | None]] = {}
    for line in section.splitlines():
        m = _ROW.match(line)
        if m is None or m.group(2) == "current":
            continue
        c = _CONSTANT.search(m.group(3))
        module = c.group(2).replace("/", ".").removesuffix(".__init__") if c else None
        out[m.group(1)] = (int(m.group(2)), (module, c.group(1)) if c and module else None)
    return out


def test_table_names_every_version_constant():
    rows = table(CHANGELOG.read_text(encoding="utf-8"))
    named = {c for _, c in rows.values() if c}
    assert named == CONSTANTS, (
        f"version constants without a row in CHANGELOG.md's format table: {sorted(CONSTANTS - named)}; "
        f"rows naming no such constant: {sorted(named - CONSTANTS)}")
    assert {("kwiki.results.record", "RECORD_VERSION"), ("kwiki", "SCHEMA_VERSION")} <= CONSTANTS
    assert {"page front matter", "artifact manifest"} <= set(rows)


@pytest.mark.parametrize("module, name", sorted(CONSTANTS))
def test_changelog_says_the_current_version(module: str, name: str):
    rows = table(CHANGELOG.read_text(encoding="utf-8"))
    (version,) = [v for v, c in rows.values() if c == (module, name)]
    actual = getattr(importlib.import_module(module), name)
    assert actual == version, (
        f"{module}.{name} is {actual} but CHANGELOG.md's format table says {version}: "
        "record the change under 'Unreleased' and update the table")


def test_the_parser_reads_a_bumped_constant():
    text = CHANGELOG.read_text(encoding="utf-8").replace(
        "| result record | 1 | `RECORD_VERSION`", "| result record | 7 | `RECORD_VERSION`")
    assert table(text)["result record"] == (7, ("kwiki.results.record", "RECORD_VERSION"))
