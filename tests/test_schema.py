"""schema/*.json is generated from the models: it must be committed, and never stale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kwiki.agents.schema import SCHEMAS, render, stale, write
from kwiki.cli import main

REPO = Path(__file__).resolve().parent.parent
SCHEMA_DIR = REPO / "schema"


@pytest.mark.parametrize("filename", sorted(SCHEMAS))
def test_committed_schema_is_what_the_models_generate(filename: str):
    path = SCHEMA_DIR / filename
    assert path.exists(), f"schema/{filename} is missing; run 'python3 -m kwiki.cli schema'"
    assert path.read_text(encoding="utf-8") == render(filename), f"schema/{filename} is stale; run 'kwiki schema'"


def test_rendering_is_deterministic_json_schema():
    for filename in SCHEMAS:
        text = render(filename)
        assert text == render(filename) and text.endswith("\n")
        schema = json.loads(text)
        assert schema["$id"] == filename and schema["$schema"].endswith("2020-12/schema")


def test_page_schema_knows_the_core_fields():
    schema = json.loads(render("page.schema.json"))
    assert {"id", "title", "type"} <= set(schema["required"])
    assert {"architectures", "tags", "claims", "evidence_level", "measurements"} <= set(schema["properties"])


def test_stale_and_write(tmp_path: Path):
    assert stale(tmp_path) == sorted(SCHEMAS)
    assert write(tmp_path) == sorted(SCHEMAS)
    assert stale(tmp_path) == [] and write(tmp_path) == []
    (tmp_path / "page.schema.json").write_text("{}\n", encoding="utf-8")
    assert stale(tmp_path) == ["page.schema.json"]


def test_schema_check_command_exits_1_when_stale(tmp_path: Path, capsys):
    (tmp_path / "wiki").mkdir()
    assert main(["schema", "--root", str(tmp_path), "--check"]) == 1
    assert "schema/page.schema.json: stale; run 'kwiki schema'" in capsys.readouterr().out
    assert main(["schema", "--root", str(tmp_path)]) == 0
    assert main(["schema", "--root", str(tmp_path), "--check"]) == 0
