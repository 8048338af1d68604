"""Sources a reader can open, and outside figures our measurement contradicts (issue 13, items 1, 2, 10).

`kwiki check` rejects a source without a public locator (http(s) URL, DOI, arXiv id) or an in-repo
path that keeps the containment rule; a claim's `source` names one of the page's sources; a claim
marked `contradicted_by` points at a claim kwiki measures and never counts towards the page's state;
`kwiki show --json` gives every claim its evidence, conditions, source and contradiction.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from kwiki.cli import main
from kwiki.results.standing import State, standing
from kwiki.wiki.check import check, public
from kwiki.wiki.model import PageMeta

REPO = Path(__file__).resolve().parent.parent

OTHER = """---
id: other
title: Other
type: technique
artifacts:
  bench: artifacts/bench
claims:
  - id: measured-here
    statement: It reads at least 1 TB/s.
    metric: bandwidth
    unit: TB/s
    at_least: 1.0
    measure: {artifact: bench, of: {variant: v, figure: tb_per_s}}
---
Body.
"""


def wiki(root: Path, front: str) -> Path:
    (root / "wiki").mkdir(parents=True, exist_ok=True)
    (root / "artifacts" / "bench").mkdir(parents=True, exist_ok=True)
    (root / "artifacts" / "bench" / "artifact.yaml").write_text(
        "name: bench\ntitle: Bench\ntargets: [sm_90a]\nbuild:\n  sources: [bench.cu]\n"
        "variants:\n  - {name: v}\n  - {name: a}\n  - {name: b}\n", encoding="utf-8")
    (root / "artifacts" / "bench" / "bench.cu").write_text("int main() { return 0; }\n", encoding="utf-8")
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "notes.md").write_text("notes\n", encoding="utf-8")
    (root / "wiki" / "other.md").write_text(OTHER, encoding="utf-8")
    (root / "wiki" / "page.md").write_text(f"---\nid: page\ntitle: Page\ntype: technique\n{front}---\nBody.\n",
                                           encoding="utf-8")
    return root


def problems(root: Path) -> list[tuple[int, str, str]]:
    return [(p.line, p.field, p.message) for p in check(root).problems if p.path == "wiki/page.md"]


# ---------------------------------------------------------------- locators


@pytest.mark.parametrize("url", [
    "https://github.com/pranjalssh/fast.cu", "http://docs.nvidia.com/cuda/", "doi:10.1145/3458817.3476182",
    "arXiv:2402.03300", "arXiv:2402.03300v2", "https://arxiv.org/abs/2402.03300",
])
def test_public_locators_are_accepted(url):
    assert public(url)


@pytest.mark.parametrize("url", [
    "/work/shared/H200.md", "shared/H200.md", "file:///work/shared/H200.md", "http://localhost:8000/notes",
    "https://127.0.0.1/x", "https://intranet/notes", "KernelWiki H200 bring-up notes", "doi:12.3/x", "arXiv:1",
])
def test_private_or_unopenable_locators_are_refused(url):
    assert not public(url)


def test_a_source_without_a_locator_is_an_error(tmp_path: Path):
    root = wiki(tmp_path, "sources:\n  - id: notes\n    title: Bring-up notes (/work/shared/H200.md)\n")
    assert problems(root) == [(6, "sources[0]", "source 'notes' names no locator a reader can open (an http(s) URL, "
                                                "'doi:10.…' or 'arXiv:NNNN.NNNNN' as `url`, or a file of this "
                                                "repository as `path`)")]
    assert not check(root).ok


def test_a_bare_source_id_is_an_error(tmp_path: Path):
    root = wiki(tmp_path, "sources: [blog-yue-nvfp4]\n")
    assert [(line, field) for line, field, _ in problems(root)] == [(5, "sources[0]")]


def test_a_machine_path_as_url_is_an_error(tmp_path: Path):
    root = wiki(tmp_path, "sources:\n  - id: notes\n    url: /work/shared/H200.md\n")
    assert problems(root) == [(7, "sources[0].url", "'/work/shared/H200.md' is not a public locator (an http(s) "
                                                    "URL, 'doi:10.…' or 'arXiv:NNNN.NNNNN' as `url`, or a file of "
                                                    "this repository as `path`)")]


@pytest.mark.parametrize("path, why", [
    ("/work/shared/H200.md", "is an absolute path"),
    ("../shared/H200.md", "leaves the repository"),
    ("docs/missing.md", "does not exist"),
])
def test_an_in_repo_path_keeps_the_containment_rule(tmp_path: Path, path, why):
    root = wiki(tmp_path, f"sources:\n  - id: notes\n    path: {path}\n")
    [(line, field, message)] = problems(root)
    assert (line, field) == (7, "sources[0].path") and why in message


def test_a_link_out_of_the_repository_is_not_an_in_repo_path(tmp_path: Path):
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n", encoding="utf-8")
    root = tmp_path / "repo"
    wiki(root, "sources:\n  - id: notes\n    path: docs/link.md\n")
    os.symlink(outside, root / "docs" / "link.md")
    [(_, field, message)] = problems(root)
    assert field == "sources[0].path" and "leads out of the repository" in message


def test_public_and_in_repo_sources_pass(tmp_path: Path):
    root = wiki(tmp_path, "sources:\n  - id: web\n    url: https://github.com/pranjalssh/fast.cu\n"
                          "  - id: paper\n    url: arXiv:2402.03300\n  - id: notes\n    path: docs/notes.md\n")
    assert problems(root) == []
    assert [p for p in check(root, strict=True).problems  # the fixture's id 'page' predates '<type>-<slug>'
            if p.path == "wiki/page.md" and p.field != "id"] == []


def test_a_claim_must_cite_a_listed_source(tmp_path: Path):
    root = wiki(tmp_path, "sources:\n  - id: web\n    url: https://example.org/x\n"
                          "claims:\n  - id: c\n    statement: It took 39 us.\n    metric: time\n    unit: us\n"
                          "    value: 39\n    evidence: source-reported\n    source: h200-bringup\n")
    assert problems(root) == [(15, "claims[0].source", "no entry of 'sources' has id 'h200-bringup'")]


def test_check_cli_fails_on_an_unopenable_source(tmp_path: Path, capsys, monkeypatch):
    root = wiki(tmp_path, "sources:\n  - id: notes\n    title: notes\n")
    monkeypatch.chdir(root)
    assert main(["check"]) == 1
    assert "wiki/page.md:6: sources[0]: source 'notes' names no locator" in capsys.readouterr().out


REPLACED = re.compile(r"replaced\s+(kernel\s*)?wiki", re.IGNORECASE)


def _tests_path(locator: str | None) -> bool:
    return locator is not None and locator.strip().lstrip("./").startswith("tests/")


def test_the_committed_wiki_cites_no_replaced_wiki_and_no_test_path():
    """A source is something any reader can open: never 'the replaced wiki' (pages no reader can open any more) and
    never a file under tests/ (a fixture, which the site does not publish). Fourteen mentions of the one, with a test
    path of this repository as its source, went in issue 30; the last two were source notes."""
    from kwiki.wiki.catalog import load_wiki

    pages = [p for p in load_wiki(REPO).pages if p.meta is not None]
    assert len(pages) > 20
    said = [(p.path, m.group()) for p in pages for m in REPLACED.finditer(p.file.read_text(encoding="utf-8"))]
    assert said == []
    cited = [(p.path, loc) for p in pages for entry in p.meta.sources if not isinstance(entry, str)
             for loc in (entry.url, entry.path) if _tests_path(loc)]
    cited += [(p.path, loc.path) for p in pages for loc in p.meta.source if _tests_path(loc.path)]
    assert cited == []
    assert _tests_path("tests/fixtures/reference/wiki/x.md") and not _tests_path("https://github.com/NVIDIA/cutlass")
    assert REPLACED.search("as the Replaced KernelWiki reported")


# ---------------------------------------------------------------- contradicted outside figures

CONTRADICTED = """artifacts:
  bench: artifacts/bench
sources:
  - id: old
    url: https://example.org/old
claims:
  - id: outside
    statement: The old wiki reported 1.26x.
    metric: ratio
    unit: x
    value: 1.26
    evidence: source-reported
    source: old
    contradicted_by: {claim: ours, note: kwiki measures well under 1.26x on the H200}
  - id: ours
    statement: It does not raise bandwidth.
    metric: ratio
    unit: x
    at_most: 1.05
    measure: {artifact: bench, of: {variant: a, figure: tb_per_s}, per: {variant: b, figure: tb_per_s}}
"""


def test_a_contradiction_names_a_measured_claim_of_the_page(tmp_path: Path):
    assert problems(wiki(tmp_path, CONTRADICTED)) == []
    bad = CONTRADICTED.replace("{claim: ours,", "{claim: outside,")
    [(_, field, message)] = problems(wiki(tmp_path / "bad", bad))
    assert field == "claims[0].contradicted_by.claim"
    assert "not a claim of this page that kwiki measures" in message


def test_a_measured_claim_cannot_be_marked_contradicted():
    fields = {"id": "p", "title": "P", "type": "technique", "artifacts": {"bench": "artifacts/bench"},
              "claims": [{"id": "c", "statement": "s", "metric": "ratio", "unit": "x", "at_most": 1.05,
                          "measure": {"artifact": "bench", "of": {"variant": "a"}, "per": {"variant": "b"}},
                          "contradicted_by": {"claim": "c", "note": "n"}}]}
    with pytest.raises(ValidationError) as exc:
        PageMeta.model_validate(fields)
    assert "marks an outside figure" in str(exc.value)


def test_a_contradiction_on_another_page_must_exist(tmp_path: Path):
    ok = CONTRADICTED.replace("{claim: ours,", "{claim: measured-here, page: other,")
    assert problems(wiki(tmp_path, ok)) == []
    missing = CONTRADICTED.replace("{claim: ours,", "{claim: nothing, page: other,")
    [(line, field, message)] = problems(wiki(tmp_path / "m", missing))
    assert (line, field) == (18, "claims[0].contradicted_by.page")
    assert message == "page 'other' has no claim 'nothing' that kwiki measures (one with a 'measure')"
    nopage = CONTRADICTED.replace("{claim: ours,", "{claim: ours, page: nowhere,")
    [(_, _, message)] = problems(wiki(tmp_path / "n", nopage))
    assert message == "no page has id 'nowhere'"


def _page(front: str) -> PageMeta:
    import yaml

    return PageMeta.model_validate({"id": "page", "title": "Page", "type": "technique", **yaml.safe_load(front)})


def test_a_contradicted_claim_never_counts_towards_the_page_state():
    only_history = CONTRADICTED.split("  - id: ours")[0].replace("{claim: ours,", "{claim: x, page: other,")
    st = standing(_page(only_history))
    assert st.state == State.not_measured
    assert st.claims == 0
    assert st.summary() == "no claims to measure"
    st = standing(_page(CONTRADICTED))
    assert st.claims == 1  # `ours` only


# ---------------------------------------------------------------- what agents see


def test_show_json_gives_each_claim_its_source_evidence_conditions_and_contradiction(tmp_path: Path, capsys,
                                                                                    monkeypatch):
    front = CONTRADICTED.replace("    source: old\n",
                                 "    source: old\n    conditions: {gpu: H200, note: cluster of 2}\n")
    front = front.replace("  - id: old\n    url: https://example.org/old\n",
                          "  - id: old\n    title: The old wiki\n    url: https://example.org/old\n")
    root = wiki(tmp_path, front)
    monkeypatch.chdir(root)
    assert main(["show", "page", "--json"]) == 0
    claims = {c["id"]: c for c in json.loads(capsys.readouterr().out)["claims"]}
    outside = claims["outside"]
    # compact views (kwiki.agents.views.compact) leave out nulls and a goal's evidence
    assert outside["evidence"] == "source-reported"
    assert outside["source"] == {"id": "old", "title": "The old wiki", "url": "https://example.org/old"}
    assert outside["conditions"] == {"gpu": "H200", "note": "cluster of 2"}
    assert outside["contradicted_by"] == {"claim": "ours", "note": "kwiki measures well under 1.26x on the H200"}
    assert claims["ours"].get("evidence", "goal") == "goal" and claims["ours"].get("source") is None
    assert claims["ours"].get("contradicted_by") is None
