"""`kwiki show ID`: front matter, claims with their latest measurement and verdict, body."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kwiki import SCHEMA_VERSION
from kwiki.agents.index import PageNotFound
from kwiki.agents.show import show
from kwiki.cli import main

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def root(fixture_copy) -> Path:
    return fixture_copy("query", "wiki-root")


def show_json(root: Path, page_id: str, capsys) -> tuple[int, dict | None, str]:
    rc = main(["show", page_id, "--root", str(root), "--json"])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if out.out else None), out.err


def test_claims_carry_the_latest_measurement_and_verdict(root, capsys):
    rc, doc, _ = show_json(root, "technique-tma-multicast", capsys)
    assert rc == 0 and doc["schema_version"] == SCHEMA_VERSION
    claims = {c["id"]: c for c in doc["claims"]}
    assert claims["multicast-speedup"]["measured"]["value"] == 1.31
    assert claims["multicast-speedup"]["measured"]["unit"] == "x"
    assert claims["multicast-speedup"]["verdict"] == "reproduced"
    assert claims["multicast-time"]["verdict"] == "better"
    run = claims["multicast-time"]["measured"]["run"]  # each run's provenance once, in `runs`
    assert doc["runs"][run]["driver"] == "570.86.15" and "provenance" not in claims["multicast-time"]["measured"]
    assert doc["measurements"] == {"evidence_level": "verified", "verified_on": "NVIDIA H200",
                                   "date": "2026-01-15T10:00:00Z"}


def test_a_worse_result_shows_its_detail(root, capsys):
    _, doc, _ = show_json(root, "technique-wgmma-pipeline", capsys)
    claim = doc["claims"][0]
    assert claim["verdict"] == "worse" and claim["measured"]["detail"] == "12.5% below the claim"
    assert doc["evidence_level"] == "measured"  # kwiki's level, not the author's source-reported


def test_front_matter_and_body_are_included(root, capsys):
    _, doc, _ = show_json(root, "technique-tma-multicast", capsys)
    fm = doc["front_matter"]
    assert fm["id"] == "technique-tma-multicast" and fm["architectures"] == ["sm_90a"]
    assert fm["evidence_level"] == "source-reported"  # as the author wrote it
    assert fm["artifacts"] == {"bench": "artifacts/tma_multicast_sm90a"}
    assert doc["body"].lstrip().startswith("# TMA multicast")
    assert doc["path"] == "wiki/nvidia/techniques/tma-multicast.md"


def test_an_unmeasured_claim(root, capsys):
    _, doc, _ = show_json(root, "technique-vectorized-loads", capsys)
    assert "measured" not in doc["claims"][0] and "verdict" not in doc["claims"][0]  # compact: no nulls
    assert "measurements" not in doc


def test_json_matches_the_schema(root, capsys):
    import jsonschema  # a declared test dependency: its absence is a failure, not a skip
    schema = json.loads((REPO / "schema" / "show.schema.json").read_text(encoding="utf-8"))
    for page_id in ("technique-tma-multicast", "technique-wgmma-pipeline", "concept-memory-coalescing"):
        jsonschema.validate(show_json(root, page_id, capsys)[1], schema)


def test_an_unknown_id_exits_1_with_one_line(root, capsys):
    rc, doc, err = show_json(root, "technique-nope", capsys)
    assert rc == 1 and doc is None
    assert err.strip() == "kwiki show: no page with id 'technique-nope'"


def test_a_page_with_errors_says_so(root):
    with pytest.raises(PageNotFound, match=r"bad-type.md\) has errors; run 'kwiki check'"):
        show(root, "pattern-bad-type")


def test_an_edit_shows_at_once(root):
    page = root / "wiki" / "nvidia" / "concepts" / "memory-coalescing.md"
    show(root, "concept-memory-coalescing")
    page.write_text(page.read_text(encoding="utf-8").replace("title: Memory coalescing", "title: Coalesced access"),
                    encoding="utf-8")
    assert show(root, "concept-memory-coalescing")["title"] == "Coalesced access"


def test_text_on_a_terminal(root, capsys, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    assert main(["show", "technique-tma-multicast", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("technique-tma-multicast: TMA multicast across a thread-block cluster\n")
    # issue 40: a block written before run ids is never verified
    assert "measured (kwiki verify on NVIDIA H200, 2026-01-15T10:00:00Z)" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("multicast-speedup"))
    assert row.split()[1:] == [">=", "1.2", "x", "1.31", "x", "reproduced", "NVIDIA", "H200", "2026-01-15T10:00:00Z"]
    assert "# TMA multicast" in out


def test_a_measurement_without_provenance_takes_the_blocks_gpu_and_date(root):
    from kwiki.wiki.markers import render

    block = render("measurements", (
        "measurements:\n"
        "  evidence_level: measured\n"
        "  verified_on: NVIDIA H200\n"
        "  date: '2026-02-01'\n"
        "  claims:\n"
        "    c:\n"
        "      verdict: not-run\n"
    ), yaml=True)
    page = root / "wiki" / "bare.md"
    page.write_text(
        "---\nid: concept-bare\ntitle: Bare\ntype: concept\nclaims:\n"
        "  - {id: c, statement: It ends., metric: outcome, unit: run, expect: passed}\n"
        + block + "---\nBody.\n",
        encoding="utf-8",
    )
    doc = show(root, "concept-bare")
    claim = doc["claims"][0]
    assert claim["verdict"] == "not-run" and doc["runs"][claim["measured"]["run"]] == {
        "gpu": "NVIDIA H200", "date": "2026-02-01"}
    assert "value" not in claim["measured"]
    assert claim["claimed"] == {"text": "ends: passed", "expect": "passed"}


def test_each_claim_and_each_run_once_and_no_generated_tables(root, capsys):
    """`show --json` (MCP get_page) gave the claims twice (front matter and views), the provenance once
    per claim, and kwiki's generated tables again in the body: each is given once now."""
    page = root / "wiki" / "nvidia" / "techniques" / "tma-multicast.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n<!-- kwiki:ladder sha256=0123456789abcdef -->\n"
                    "| variant | time |\n| --- | --- |\n| `a` | 1.0 |\n<!-- /kwiki:ladder -->\n\nAfter.\n",
                    encoding="utf-8")
    _, doc, _ = show_json(root, "technique-tma-multicast", capsys)
    assert "claims" not in doc["front_matter"] and "measurements" not in doc["front_matter"]
    assert [c["id"] for c in doc["claims"]] == ["multicast-speedup", "multicast-time"]
    assert len(doc["runs"]) == 1 and all("provenance" not in c.get("measured", {}) for c in doc["claims"])
    assert "| `a` | 1.0 |" not in doc["body"] and "<!-- kwiki:ladder: generated by kwiki verify" in doc["body"]
    assert doc["body"].rstrip().endswith("After.")
    assert "null" not in json.dumps(doc)


def test_a_ladder_for_agents_flags_the_best_row_gives_occupancy_and_keeps_sass_for_full():
    """get_ladder on this repository's GEMV page: the best row of each shape is best_per_shape's, rows carry
    blocks and warps per SM from their records, and per-kernel SASS detail comes only with detail='full'."""
    import json

    from kwiki.agents.show import page_ladders
    from kwiki.results import ladders
    from kwiki.results.store import RecordRow, read_all
    from kwiki.wiki.manifest import load_manifest

    repo = Path(__file__).resolve().parent.parent
    brief = page_ladders(repo, "kernel-gemv-bf16", "16384x16384")
    full = page_ladders(repo, "kernel-gemv-bf16", "16384x16384", "full")
    summary = page_ladders(repo, "kernel-gemv-bf16")
    (group,) = brief["ladders"][0]["groups"]
    best = [r["variant"] for r in group["rows"] if r.get("best")]
    rows = [r for r in read_all(repo) if isinstance(r, RecordRow)]
    (ladder,) = ladders.from_store(load_manifest(repo / "artifacts/gemv_bf16_sm90a", repo), rows)
    expected = {g.label: r.variant for g, r in ladders.best_per_shape(ladder)}
    assert best == [expected["16384x16384, bf16"]]
    assert all("blocks_per_sm" in r and "warps_per_sm" in r for r in group["rows"] if r["variant"] == best[0])
    assert "mechanisms" not in json.dumps(brief) and full["ladders"][0]["mechanisms"]
    assert "adds" not in json.dumps(group) and brief["ladders"][0]["variants"][best[0]]["adds"]
    for g in summary["ladders"][0]["groups"]:  # without a shape: the best, baseline and ceiling rows of each
        assert [r["variant"] for r in g["rows"] if r.get("best")] == [expected[g["label"]]]
        assert g["rows_total"] > len(g["rows"]) and all(r.get("best") or r.get("role") for r in g["rows"])
