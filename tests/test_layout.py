"""The package's layout: the pipeline's stages are folders, and imports only run downwards.

core <- wiki <- verify <- {site, agents} <- cli. Site and agents are siblings (neither imports the
other); the library never prints or parses arguments (that is the CLI's job).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kwiki"
LAYERS = {"core": 0, "wiki": 1, "verify": 2, "site": 3, "agents": 3, "cli": 4}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _stage(path: Path) -> str | None:
    rel = path.relative_to(PACKAGE).parts
    return rel[0] if len(rel) > 1 else None


def _imported_stages(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "kwiki" and len(parts) > 1 and parts[1] in LAYERS:
                out.append((node.lineno, parts[1]))
    return out


def test_every_module_lives_in_a_stage_folder() -> None:
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules outside a stage folder: {loose}"
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(LAYERS)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_only_run_downwards(path: Path) -> None:
    stage = _stage(path)
    if stage is None:
        return
    for line, other in _imported_stages(path):
        if other == stage:
            continue
        assert LAYERS[other] < LAYERS[stage], (
            f"kwiki/{path.relative_to(PACKAGE)}:{line}: {stage} imports {other}, which sits above or beside it")


def test_the_layout_test_catches_an_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from kwiki.site.render import html_text\n")
    assert _imported_stages(bad) == [(1, "site")]


@pytest.mark.parametrize("path", [p for p in _modules() if _stage(p) not in (None, "cli")],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_library_code_neither_prints_nor_parses_arguments(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            pytest.fail(f"kwiki/{path.relative_to(PACKAGE)}:{node.lineno}: print() outside kwiki/cli/")
        if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
            pytest.fail(f"kwiki/{path.relative_to(PACKAGE)}:{node.lineno}: argparse outside kwiki/cli/")
