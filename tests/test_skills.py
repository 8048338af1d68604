"""`kwiki export skills DIR`: one Agent Skill per page and a router skill, within the format's limits.

The limits are the Agent Skills specification's (https://agentskills.io/specification): `name` 1 to
64 characters of lowercase letters, digits and single hyphens, not first or last, equal to its
folder; `description` 1 to 1024 characters; the body under 500 lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kwiki.agents import skills
from kwiki.cli import main


@pytest.fixture
def root(fixture_copy) -> Path:
    return fixture_copy("query", "wiki-root")


def _front(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text[4:].split("\n---\n", 1)[0])


def test_every_page_becomes_a_valid_skill_and_a_router_tells_how_to_query(root, tmp_path, capsys):
    out = tmp_path / "skills"
    assert main(["export", "skills", str(out), "--root", str(root)]) == 0
    assert "wrote 8 skills" in capsys.readouterr().out  # seven valid pages and the router
    folders = sorted(p.name for p in out.iterdir())
    assert "kernelwiki" in folders and "technique-tma-multicast" in folders
    for folder in folders:
        text = (out / folder / "SKILL.md").read_text(encoding="utf-8")
        assert skills.problems(folder, text) == [], folder
        front = _front(text)
        assert front["name"] == folder and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", folder) and len(folder) <= 64
        assert 1 <= len(front["description"]) <= 1024
        assert len(text.split("\n---\n", 1)[1].splitlines()) < 500
    page = (out / "technique-tma-multicast" / "SKILL.md").read_text(encoding="utf-8")
    for section in ("## When to use it", "## The recipe", "## Verified numbers", "## How to re-verify"):
        assert section in page
    assert "| 1.31 x" in page and "driver 570.86.15" in page  # the number and the run it comes from
    # a row cites its run by a short label, defined once with the run's id and provenance below the table
    assert "| r1 |" in page and re.search(r"^- r1 `[^`]+`: .*driver 570\.86\.15", page, re.M)
    assert "kwiki verify technique-tma-multicast" in page
    router = (out / "kernelwiki" / "SKILL.md").read_text(encoding="utf-8")
    assert "get_ladder(" in router and "kwiki query" in router and "`technique-tma-multicast`" in router


@pytest.mark.parametrize("name, front, body, problem", [
    ("Bad-Name", "name: Bad-Name\ndescription: d\n", "", "lowercase letters"),
    ("a--b", "name: a--b\ndescription: d\n", "", "single hyphens"),
    ("-a", "name: -a\ndescription: d\n", "", "not first or last"),
    ("x" * 65, f"name: {'x' * 65}\ndescription: d\n", "", "1 to 64"),
    ("other", "name: skill\ndescription: d\n", "", "differs from its folder"),
    ("skill", "name: skill\ndescription: ''\n", "", "description: 1 to 1024"),
    ("skill", f"name: skill\ndescription: {'d' * 1025}\n", "", "description: 1 to 1024"),
    ("skill", "name: skill\ndescription: d\nversion: 1\n", "", "unknown field 'version'"),
    ("skill", "name: skill\ndescription: d\nmetadata: {n: 1}\n", "", "metadata: a mapping of strings"),
    ("skill", "name: skill\ndescription: d\n", "line\n" * 500, "keep it under 500"),
])
def test_the_format_check_refuses_what_the_specification_does(name, front, body, problem):
    found = skills.problems(name, f"---\n{front}---\n{body}")
    assert found and problem in found[0], found


def test_a_long_summary_is_cut_to_the_description_limit():
    doc = {"id": "p", "title": "T", "type": "kernel", "evidence_level": "verified", "path": "wiki/p.md",
           "front_matter": {"summary": "A sentence that goes on. " * 100, "applies_to_ops": ["gemv"]}}
    text = skills.description(doc)
    assert len(text) <= skills.DESCRIPTION_MAX and text.endswith("Use when writing or tuning gemv kernels.")
    assert skills.skill_name("Technique_TMA--Multicast!") == "technique-tma-multicast"
    assert len(skills.skill_name("a" * 80)) == 64


def test_a_second_export_removes_only_the_skills_kwiki_wrote_for_pages_now_gone(root, tmp_path):
    out = tmp_path / "skills"
    skills.export(root, out)
    mine = out / "my-own-skill"
    mine.mkdir()
    (mine / "SKILL.md").write_text("---\nname: my-own-skill\ndescription: mine\n---\nMine.\n", encoding="utf-8")
    (root / "wiki" / "nvidia" / "concepts" / "memory-coalescing.md").unlink()
    written = skills.export(root, out)
    assert "concept-memory-coalescing" not in written and not (out / "concept-memory-coalescing").exists()
    assert (mine / "SKILL.md").is_file()  # not kwiki's: kept


def test_a_link_in_the_way_is_refused_before_anything_is_written(root, tmp_path):
    out = tmp_path / "skills"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "kernelwiki").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(skills.ExportError, match="in the way"):
        skills.export(root, out)
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in out.iterdir()) == ["kernelwiki"]


REPO = Path(__file__).resolve().parent.parent
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)")


@pytest.fixture(scope="module")
def repo_export(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("skills")
    skills.export(REPO, out)
    return out


def test_every_link_of_the_exported_skills_opens_a_file_of_the_export(repo_export):
    """All 56 relative links of the export were broken (wiki paths in a flat export): each now opens a file."""
    followed = 0
    for skill in sorted(repo_export.glob("*/SKILL.md")):
        for target in _LINK.findall(skill.read_text(encoding="utf-8")):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # a URL
            assert not target.startswith("#"), f"{skill}: {target}"
            assert (skill.parent / target.split("#")[0]).resolve().is_file(), f"{skill}: {target}"
            followed += 1
    assert followed >= 40  # the pages link to each other: the test follows them, it does not find none


def test_no_home_page_and_each_skill_within_the_size_advice(repo_export):
    folders = sorted(p.name for p in repo_export.iterdir())
    assert "home" not in folders and "kernelwiki" in folders and len(folders) >= 10
    for folder in folders:
        text = (repo_export / folder / "SKILL.md").read_text(encoding="utf-8")
        assert skills.problems(folder, text) == [], folder
        body = text.split("\n---\n", 1)[1]
        assert len(body) <= skills.BODY_TOKENS * skills.CHARS_PER_TOKEN and len(body.splitlines()) < 500


def test_the_size_check_refuses_a_body_past_5000_tokens():
    found = skills.problems("skill", "---\nname: skill\ndescription: d\n---\n" + "word " * 4001)
    assert found and "tokens" in found[0]


def test_a_link_outside_the_export_becomes_its_text_and_repository_path():
    text = ("[loads](../techniques/vectorized-loads.md#hints) [code](../../../artifacts/gemv_bf16_sm90a/gemv.cu) "
            "[home](../../index.md) [here](#the-recipe) [web](https://example.com/x)")
    out = skills.relink(text, "wiki/nvidia/kernels/gemv-bf16.md",
                        {"wiki/nvidia/techniques/vectorized-loads.md": "technique-vectorized-loads"})
    assert out == ("[loads](../technique-vectorized-loads/SKILL.md) code (`artifacts/gemv_bf16_sm90a/gemv.cu` in the "
                   "KernelWiki repository) home (`wiki/index.md` in the KernelWiki repository) here "
                   "[web](https://example.com/x)")


def test_the_routers_calls_name_the_tools_and_parameters_the_server_has(repo_export):
    from kwiki.agents.mcp import build_server

    params = build_server(REPO).tool_params
    router = (repo_export / "kernelwiki" / "SKILL.md").read_text(encoding="utf-8")
    calls = re.findall(r"\b([a-z_]+)\(([^()]*)\)", router)
    named = [(tool, args) for tool, args in calls if tool in params]
    assert {tool for tool, _ in named} == set(params) - {"list_tags"}
    for tool, args in named:
        for arg in re.findall(r"\b([a-z_]+)=", args):
            assert arg in params[tool], f"{tool}({arg}=...) is not a parameter of {tool}"
    for words in ("covered: false", "mentions", "best: true", "warps per SM", "H200"):
        assert words in router
