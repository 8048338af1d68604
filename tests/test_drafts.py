"""Drafts stay drafts: a page with `status: draft`, or still holding `kwiki new`'s placeholder summary, is left out
of the site (pages, listings, llms.txt, index.json), the query index (`query`, `show`, MCP) and the skills export,
and `kwiki check --strict` warns about it (a located warning, never an error).

The two drafts are real files under tests/fixtures/drafts/, copied into a fixture wiki beside valid pages.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kwiki.agents.index import PageNotFound, skipped, with_index
from kwiki.agents.query import Query, search
from kwiki.agents.show import show
from kwiki.cli import main
from kwiki.wiki.drafts import PLACEHOLDER, draft_reason, is_draft
from kwiki.wiki.model import PageMeta
from kwiki.wiki.skeletons import PAGE_TEMPLATE

DRAFTS = Path(__file__).resolve().parent / "fixtures" / "drafts"
SITE = Path(__file__).resolve().parent / "fixtures" / "site"
DRAFT_IDS = {"technique-half-written", "technique-never-summarised"}


def add_drafts(root: Path, folder: str) -> None:
    for page in DRAFTS.glob("*.md"):
        shutil.copyfile(page, root / "wiki" / folder / page.name)


@pytest.fixture
def root(fixture_copy) -> Path:
    root = fixture_copy("query", "wiki-root")
    add_drafts(root, "nvidia/techniques")
    return root


def _meta(**kw: object) -> PageMeta:
    return PageMeta.model_validate({"id": "technique-x", "title": "X", "type": "technique", **kw})


def test_the_predicate_names_why_and_matches_the_skeleton():
    assert PLACEHOLDER in " ".join(PAGE_TEMPLATE.split())  # the text kwiki new writes is the text looked for
    assert draft_reason(_meta(status="draft")) == "its status is draft"
    folded = "What it buys.\n  " + PLACEHOLDER.replace("; ", ";\n  ")  # a literal block keeps the line break
    assert "placeholder" in (draft_reason(_meta(status="review", summary=folded)) or "")
    assert not is_draft(_meta(status="review", summary="What it buys."))
    assert not is_draft(_meta())


def test_query_leaves_drafts_out_and_does_not_count_them_as_errors(root, capsys):
    found = {r["id"] for r in search(root, Query(limit=0))["results"]}
    assert found and not found & DRAFT_IDS
    assert search(root, Query(limit=0, text="zebraquill"))["results"] == []
    assert main(["query", "--root", str(root), "--tag", "tma", "--json"]) == 0
    out = capsys.readouterr().out
    assert "technique-tma-multicast" in out and "half-written" not in out and "never-summarised" not in out
    left_out = with_index(root, skipped)  # what `kwiki query` counts as "pages with errors left out"
    assert [path for path, _ in left_out] == ["wiki/nvidia/broken/bad-type.md"]  # the fixture's broken page only


def test_show_and_mcp_lookups_say_a_draft_is_a_draft(root):
    for page_id in DRAFT_IDS:
        with pytest.raises(PageNotFound, match="is a draft"):
            show(root, page_id)


def test_a_page_that_becomes_a_draft_leaves_the_index_on_the_next_query(root):
    """The index is refreshed incrementally: an edit of the summary alone must not keep a new draft indexed."""
    page = root / "wiki" / "nvidia" / "patterns" / "split-k.md"
    assert "pattern-split-k" in {r["id"] for r in search(root, Query(limit=0))["results"]}
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("summary: Split the reduction", f"summary: {PLACEHOLDER} Split the reduction"),
                    encoding="utf-8")
    assert "pattern-split-k" not in {r["id"] for r in search(root, Query(limit=0))["results"]}


def test_skills_export_leaves_drafts_out(root, tmp_path):
    from kwiki.agents import skills

    written = skills.export(root, tmp_path / "skills")
    assert "technique-tma-multicast" in written
    assert not {name for name in written if "half-written" in name or "never-summarised" in name}
    router = (tmp_path / "skills" / "kernelwiki" / "SKILL.md").read_text(encoding="utf-8")
    assert "half-written" not in router and "never-summarised" not in router


def test_check_strict_warns_once_per_draft_where_it_is(root, capsys):
    shutil.rmtree(root / "wiki" / "nvidia" / "broken")  # the fixture's broken page: its error is not ours
    main(["check", "--root", str(root), "--strict", "--json"])
    problems = json.loads(capsys.readouterr().out)["problems"]
    drafts = [p for p in problems if p["path"].endswith(("status-draft.md", "placeholder-summary.md"))]
    assert sorted((p["path"], p["line"], p["field"], p["severity"]) for p in drafts) == [
        ("wiki/nvidia/techniques/placeholder-summary.md", 10, "summary", "warning"),
        ("wiki/nvidia/techniques/status-draft.md", 5, "status", "warning"),
    ]
    why = {p["path"].rsplit("/", 1)[1]: p["message"] for p in drafts}
    assert "status is draft" in why["status-draft.md"] and "placeholder" in why["placeholder-summary.md"]
    main(["check", "--root", str(root), "--json"])  # without --strict a draft is no problem at all
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert not [p for p in problems if p["path"].endswith(("status-draft.md", "placeholder-summary.md"))]


def test_the_site_leaves_drafts_out_of_pages_listings_llms_txt_and_index_json(tmp_path):
    from kwiki.site.stage import build_site

    root = tmp_path / "project"
    for name in ("wiki", "artifacts", "results"):
        shutil.copytree(SITE / name, root / name)
    add_drafts(root, "techniques")
    build_site(root, root / "site")
    site = root / "site"
    assert (site / "techniques" / "vector-copy" / "index.html").is_file()  # the published page beside them
    assert not (site / "techniques" / "status-draft").exists()
    assert not (site / "techniques" / "placeholder-summary").exists()
    assert not (site / "techniques" / "status-draft.md").exists()
    ids = {p["id"] for p in json.loads((site / "index.json").read_text(encoding="utf-8"))["pages"]}
    assert "vector-copy" in ids and not ids & DRAFT_IDS
    published = [p for p in site.rglob("*") if p.is_file() and p.suffix in (".html", ".txt", ".json", ".md", ".xml")]
    leaks = [p for p in published if "zebraquill" in p.read_text(encoding="utf-8", errors="replace")
             or "status-draft" in p.read_text(encoding="utf-8", errors="replace")
             or "A technique still being written" in p.read_text(encoding="utf-8", errors="replace")]
    assert leaks == []


def test_a_published_page_linking_to_a_draft_is_reported_before_the_build_breaks(root, capsys):
    page = root / "wiki" / "nvidia" / "patterns" / "split-k.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [the draft](../techniques/status-draft.md).\n",
                    encoding="utf-8")
    lines = len(page.read_text(encoding="utf-8").splitlines())
    main(["check", "--root", str(root), "--json"])
    links = [p for p in json.loads(capsys.readouterr().out)["problems"] if "leads to a draft" in p["message"]]
    assert [(p["path"], p["line"], p["field"], p["severity"]) for p in links] == [
        ("wiki/nvidia/patterns/split-k.md", lines, "link", "warning")]
    main(["check", "--root", str(root), "--strict", "--json"])  # an error under --strict, as the build fails
    links = [p for p in json.loads(capsys.readouterr().out)["problems"] if "leads to a draft" in p["message"]]
    assert [p["severity"] for p in links] == ["error"]
