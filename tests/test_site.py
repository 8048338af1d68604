"""The static site: generation (header, claims, charts, artifacts, indexes, agents' files), strict builds, escaping."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.results.standing import State, claim_rows_by_page, standing
from kwiki.results.store import RecordRow, read_all
from kwiki.site import charts
from kwiki.site.stage import SiteError, build_site, live_server, remote_resources
from kwiki.wiki.catalog import load_wiki

REPO = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "site"


def copy_project(src: Path, dst: Path) -> Path:
    for name in ("wiki", "artifacts", "results"):
        if (src / name).is_dir():
            shutil.copytree(src / name, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
    if (src / "mkdocs.yml").is_file():
        shutil.copy(src / "mkdocs.yml", dst / "mkdocs.yml")
    reference = src / "tests" / "fixtures" / "reference"  # pages cite it as their source: `kwiki check` needs it
    if reference.is_dir():
        shutil.copytree(reference, dst / "tests" / "fixtures" / "reference")
    return dst


def tree_hash(directory: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        h.update(path.relative_to(directory).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = copy_project(FIXTURE, tmp_path_factory.mktemp("project"))
    before = tree_hash(root / "wiki")
    report = build_site(root, root / "site")
    return root, report, before


def html(built, rel: str) -> str:
    return (built[0] / "site" / rel).read_text(encoding="utf-8")


def section(page: str, anchor: str) -> str:
    """The HTML from the heading with id `anchor` to the next h2."""
    start = page.index(f'id="{anchor}"')
    end = page.find("<h2", start)
    return page[start:] if end < 0 else page[start:end]


# ---------------------------------------------------------------- standing


def fixture_standings() -> dict[str, State]:
    wiki = load_wiki(FIXTURE)
    rows = claim_rows_by_page(read_all(FIXTURE))
    return {p.id: standing(p.meta, rows.get(p.id, [])).state for p in wiki.pages}


def test_standing_tells_verified_drifted_not_reproduced_and_never_measured():
    states = fixture_standings()
    assert states["vector-copy"] == State.verified
    assert states["gemv-drift"] == State.drifted
    assert states["reduce-worse"] == State.not_reproduced
    assert states["spec-only"] == State.not_measured


# ---------------------------------------------------------------- a technique page


def test_build_is_strict_and_leaves_wiki_untouched(built):
    root, report, before = built
    assert report.pages == 6
    assert report.warnings == []
    assert tree_hash(root / "wiki") == before


def test_header_shows_evidence_architectures_and_verified_on(built):
    page = html(built, "techniques/vector-copy/index.html")
    # issue 40: its block was written before run ids, so it is measured, never verified
    assert 'class="kw-badge kw-state kw-state-measured"' in page  # one state badge, the line beside it
    assert 'class="kw-badge kw-ev' not in page  # no 'verified' evidence badge beside a 'drifted' state
    assert "measured on NVIDIA H200, 2025-06-08: 2 of 2 claims reproduced" in page
    assert re.search(r'href="\.\./\.\./indexes/architectures/#sm-90a"[^>]*>sm_90a<', page)


def test_header_says_drifted_and_not_reproduced(built):
    assert "kw-state-drifted" in html(built, "kernels/gemv-drift/index.html")
    assert "kw-state-not-reproduced" in html(built, "kernels/reduce-worse/index.html")
    assert "not measured yet: figures are spec" in html(built, "patterns/spec-only/index.html")


def test_claims_table_has_claimed_measured_ratio_verdict_provenance(built):
    page = html(built, "techniques/vector-copy/index.html")
    table = page[page.index('class="kw-claims'):]
    table = table[: table.index("</table>")]
    for text in ("4400 GB/s ±5%", "4410 GB/s ±0.4%", "1.00×", ">reproduced<", "&gt;= 1.2 x", "1.09×", ">better<"):
        assert text in table, text
    # both claims were measured in one run: its provenance once, below the table, not in a column
    after = page[page.index("</table>", page.index('class="kw-claims')):]
    assert "<th>provenance</th>" not in table and "driver 570.86.15" not in table
    assert "Every measured figure above: NVIDIA H200, driver 570.86.15, CUDA 12.8, 2025-06-08, 0123456789" in after
    assert "written" not in page  # the region's old content is replaced by the generated table


def test_charts_are_svg_files_shown_on_the_page(built):
    root = built[0]
    page = html(built, "techniques/vector-copy/index.html")
    images = re.findall(r'<img[^>]+src="([^"]+\.svg)"', page)
    assert len(images) == 2
    assert 'alt="copy_sm90a: gb_per_s of each variant on NVIDIA H200' in page  # the figure the claim measures
    for src in images:
        svg = (root / "site" / "techniques" / "vector-copy" / src).resolve()
        data = svg.read_text()
        assert data.startswith("<svg") and "<title>" in data
        assert "<script" not in data and "@font-face" not in data and "<image" not in data
        assert not re.search(r"""(?:href|src)=["'](?:https?:)?//|url\(["']?(?:https?:)?//""", data)  # nothing fetched


def test_ladder_charts_what_the_claims_measure_one_chart_per_parameter_set():
    def row(variant, m, figures, date="2025-06-08T09:00:00Z"):
        return RecordRow(run_id="r", date=date, gpu="NVIDIA H200", artifact="a", target="sm_90a", variant=variant,
                         params={"m": m}, figures=figures, passed=True)

    rows = [row("fast", 1, {"time_us": 1.0, "gb_per_s": 9.0}), row("base", 1, {"time_us": 2.0, "gb_per_s": 4.0}),
            row("hang", 1, {"wait_timeouts": 1.0}), row("fast", 2, {"time_us": 3.0, "gb_per_s": 8.0}),
            row("old", 1, {"time_us": 9.0}, date="2025-06-01T09:00:00Z")]
    specs = charts.ladder_specs(rows, ["base", "fast", "hang"], "base", ["time_us"])
    assert [(s["params"], s["figure"], s["better"]) for s in specs] == [("m=1", "time_us", "lower"),
                                                                         ("m=2", "time_us", "lower")]
    assert [(b["label"], b["value"], b["baseline"]) for b in specs[0]["bars"]] == [
        ("base (baseline)", 2.0, True), ("fast", 1.0, False)]
    assert specs[0]["left_out"] == 1  # 'hang' has no time
    assert charts.ladder_specs(rows, [], None, [])[0]["figure"] == "gb_per_s"  # throughput before time


def test_chart_is_deterministic():
    spec = {"kind": "ladder", "artifact": "a", "gpu": "NVIDIA H200", "date": "2025-06-01", "figure": "time_us",
            "params": "m=4096", "unit": "us", "better": "lower", "left_out": 0,
            "bars": [{"label": "x", "value": 2.0, "spread": 0.01, "baseline": True},
                     {"label": "y", "value": 1.0, "spread": 0.0, "baseline": False}]}
    first = charts.draw(spec)
    assert first == charts.draw(spec)
    assert b"2025-06-01" in first and first.count(b"<rect") == 3  # background and two bars


def test_artifact_sources_are_listed_collapsed_with_their_build_line(built):
    page = html(built, "techniques/vector-copy/index.html")
    artifacts = page[page.index('class="kw-artifacts"'):]
    assert "KWIKI_FIXTURE_MARKER" not in page  # the page links the sources: they weigh nothing on it
    build = re.sub(r"<[^>]+>", "", artifacts)
    assert "nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a" in build
    assert "artifacts/copy_sm90a/copy.cu -lcuda" in build
    assert 'href="../../indexes/artifacts/copy_sm90a/"' in artifacts
    sources = html(built, "indexes/artifacts/copy_sm90a/index.html")
    sources = sources[sources.index('class="kw-artifacts"'):]
    assert "<details" in sources and "artifacts/copy_sm90a/copy.cu" in sources and "KWIKI_FIXTURE_MARKER" in sources


def test_search_index_is_small_ranks_titles_and_summaries_and_leaves_out_sources_and_tags(built):
    index = json.loads(html(built, "search/search_index.json"))
    assert index["config"]["fields"]["title"]["boost"] > index["config"]["fields"]["summary"]["boost"] > \
        index["config"]["fields"]["text"]["boost"]
    locations = [d["location"] for d in index["docs"]]
    assert not any(loc.startswith(("indexes/tags/", "indexes/artifacts/", "indexes/evidence/")) for loc in locations)
    text = json.dumps(index)
    assert "KWIKI_FIXTURE_MARKER" not in text  # artifact sources are not indexed
    assert "verified on NVIDIA H200" not in text  # nor the header's badges and state line
    (first,) = [d for d in index["docs"] if d["location"] == "techniques/vector-copy/"]
    assert first["summary"].startswith("Copy with 16-byte loads") and first["tags"]
    assert all("tags" not in d for d in index["docs"] if "#" in d["location"])  # tags once per page


# ---------------------------------------------------------------- indexes


def test_evidence_index_sorts_pages_by_what_was_found(built):
    page = html(built, "indexes/evidence/index.html")
    assert "Vector copy" in section(page, "measured")  # issue 40: written before run ids, never verified
    assert "GEMV whose figure drifted" in section(page, "drifted")
    assert "Reduction that was not reproduced" in section(page, "not-reproduced")
    assert "HBM3e bandwidth" in section(page, "not-measured")


def test_architecture_index_lists_pages_per_architecture(built):
    page = html(built, "indexes/architectures/index.html")
    assert "GEMV whose figure drifted" in section(page, "sm-80")
    assert "Vector copy" not in section(page, "sm-80")
    assert "Vector copy" in section(page, "sm-90a")


def test_tag_index_comes_from_material_tags(built):
    page = html(built, "indexes/tags/index.html")
    assert 'id="tag:memory-bound"' in page
    assert "Vector copy with 16-byte loads" in page


def test_home_page_shows_the_state_of_the_wiki(built):
    page = html(built, "index.html")
    assert "3 / 4" in page and "measured claims reproduced" in page
    assert "Last verify run:" in page and "2025-06-08 09:00 UTC" in page and "NVIDIA H200" in page
    assert "A small wiki for the site tests." not in page.split("kw-home")[0].split("<article")[-1]


# ---------------------------------------------------------------- for agents


def test_markdown_copies_keep_front_matter(built):
    root = built[0]
    for src in (root / "wiki").rglob("*.md"):
        rel = src.relative_to(root / "wiki")
        assert (root / "site" / rel).read_bytes() == src.read_bytes()


def test_index_json_lists_pages_tags_architectures_measurements(built):
    data = json.loads(html(built, "index.json"))
    assert data["schema_version"] == 2
    pages = {p["id"]: p for p in data["pages"]}
    assert set(pages) == {"home", "vector-copy", "gemv-drift", "reduce-worse", "spec-only", "hostile-page"}
    copy = pages["vector-copy"]
    assert copy["url"] == "techniques/vector-copy/" and copy["markdown"] == "techniques/vector-copy.md"
    assert copy["state"] == "measured"  # issue 40: written before run ids, never verified
    assert copy["measurements"]["claims"]["vec4-bandwidth"]["value"] == 4410.5
    assert data["tags"]["memory-bound"] == ["gemv-drift", "spec-only", "vector-copy"]
    assert "gemv-drift" in data["architectures"]["sm_80"]
    assert data["last_run"]["gpu"] == "NVIDIA H200"


def test_llms_txt_has_title_summary_and_links_that_exist(built):
    root = built[0]
    text = html(built, "llms.txt")
    assert text.startswith("# KernelWiki\n\n> ")
    assert "\n## Techniques\n" in text
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert "techniques/vector-copy.md" in links
    for link in links:
        target = root / "site" / link
        assert target.is_file() or (target / "index.html").is_file(), link


# ---------------------------------------------------------------- safety


def test_title_summary_and_statement_html_render_as_text(built):
    root = built[0]
    for path in (root / "site").rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        assert "<script>window.__pwned" not in text, path
        assert "<img src=x" not in text, path
        assert '<iframe src="https://example.com"' not in text, path
    page = html(built, "patterns/hostile/index.html")
    assert "&lt;/title&gt;&lt;script&gt;window.__pwned = 1&lt;/script&gt; &lt;b&gt;bold&lt;/b&gt;" in page
    assert "&lt;script&gt;window.__pwned = 6&lt;/script&gt;" in page


def test_no_resource_is_fetched_from_another_host(built):
    assert remote_resources(built[0] / "site") == []


def test_remote_resources_finds_scripts_styles_and_images(tmp_path):
    (tmp_path / "a.html").write_text('<script src="https://cdn.example/x.js"></script><link rel="stylesheet" '
                                     'href="//fonts.example/css"><link rel="canonical" href="https://ok.example/">'
                                     '<a href="https://fine.example/">a link is fine</a><img src="img/local.png">')
    (tmp_path / "b.css").write_text("@import 'https://fonts.example/f.css'; .x { background: url(http://e.example/i) }")
    assert remote_resources(tmp_path) == [
        "a.html: https://cdn.example/x.js", "a.html: //fonts.example/css",
        "b.css: https://fonts.example/f.css", "b.css: http://e.example/i",
    ]


def test_invalid_tags_fail_strict_and_render_as_text_otherwise(tmp_path):
    root = copy_project(FIXTURE, tmp_path)
    bad = root / "wiki" / "patterns" / "bad-tags.md"
    bad.write_text('---\nid: bad-tags\ntitle: Bad tags\ntype: pattern\n'
                   'tags: ["<b>x</b><script>window.__pwned=7</script>"]\n---\nBody.\n')
    with pytest.raises(SiteError) as err:
        build_site(root, root / "site")
    assert any("wiki/patterns/bad-tags.md" in p and "tags" in p for p in err.value.problems)
    build_site(root, root / "site", strict=False)
    page = (root / "site" / "patterns" / "bad-tags" / "index.html").read_text()
    assert "<script>window.__pwned" not in page
    assert "&lt;script&gt;window.__pwned=7&lt;/script&gt;" in page
    assert "This page does not pass kwiki check" in page


def test_broken_link_fails_the_strict_build(tmp_path):
    root = copy_project(FIXTURE, tmp_path)
    page = root / "wiki" / "patterns" / "spec-only.md"
    page.write_text(page.read_text() + "\nSee [nothing](../nowhere.md).\n")
    with pytest.raises(SiteError) as err:
        build_site(root, root / "site")
    assert any("nowhere.md" in p for p in err.value.problems)


def test_remote_image_fails_the_strict_build(tmp_path):
    root = copy_project(FIXTURE, tmp_path)
    page = root / "wiki" / "patterns" / "spec-only.md"
    page.write_text(page.read_text() + "\n![remote](https://example.com/chart.png)\n")
    with pytest.raises(SiteError, match="unsafe constructs") as err:  # the sanitiser removes it and names the page
        build_site(root, root / "site")
    assert err.value.problems == ['wiki/patterns/spec-only.md: <img src="https://example.com/chart.png">: '
                                  "src removed: it would be fetched from another host (example.com)"]


def test_generated_paths_are_reserved(tmp_path):
    root = copy_project(FIXTURE, tmp_path)
    (root / "wiki" / "indexes").mkdir()
    shutil.copy(root / "wiki" / "patterns" / "spec-only.md", root / "wiki" / "indexes" / "x.md")
    with pytest.raises(SiteError, match="generates 'indexes/'"):
        build_site(root, root / "site", strict=False)


def test_rebuild_rewrites_no_unchanged_staged_file(built):
    root = built[0]
    docs = root / ".kwiki" / "site" / "docs"
    mtimes = {p: p.stat().st_mtime_ns for p in docs.rglob("*") if p.is_file()}
    build_site(root, root / "site2")
    assert {p: p.stat().st_mtime_ns for p in docs.rglob("*") if p.is_file()} == mtimes
    assert tree_hash(root / "site2" / "assets" / "kwiki") == tree_hash(root / "site" / "assets" / "kwiki")


# ---------------------------------------------------------------- the command and the repository's wiki


def test_cli_build_reports_ok_and_failure(tmp_path, capsys):
    root = copy_project(FIXTURE, tmp_path)
    assert main(["build", "--root", str(root), "--site-dir", "out"]) == 0
    assert "kwiki build: ok: 6 pages, 4 charts" in capsys.readouterr().out  # copy_sm90a's bars on its owner only
    assert (root / "out" / "index.html").is_file()
    (root / "wiki" / "index.md").write_text("---\nid: home\ntitle: t\ntype: guide\n---\n[x](missing.md)\n")
    assert main(["build", "--root", str(root), "--site-dir", "out"]) == 1
    err = capsys.readouterr().err
    assert "missing.md" in err and "kwiki build: FAILED" in err


def test_repository_wiki_builds_strictly(tmp_path):
    root = copy_project(REPO, tmp_path)
    report = build_site(root, root / "site")
    assert report.pages == len(list((REPO / "wiki").rglob("*.md")))
    assert (root / "site" / "index.html").is_file() and (root / "site" / "llms.txt").is_file()


def test_serve_rebuilds_when_a_page_changes(tmp_path):
    root = copy_project(FIXTURE, tmp_path)
    server = live_server(root, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        # the port is known once the socket is bound, but it accepts only after listen(); the
        # serving thread starts after both
        while not server.serve_thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{server.server_address[1]}/patterns/spec-only/"
        first = urllib.request.urlopen(url, timeout=10).read().decode()
        assert "HBM3e bandwidth from the datasheet" in first and "livereload" in first
        page = root / "wiki" / "patterns" / "spec-only.md"
        page.write_text(page.read_text() + "\nA sentence added while serving.\n")
        while time.monotonic() < deadline:
            if "A sentence added while serving." in urllib.request.urlopen(url, timeout=10).read().decode():
                break
            time.sleep(0.2)
        else:
            pytest.fail("the served page was not rebuilt")
    finally:
        server.shutdown(wait=True)


def test_kwiki_build_names_a_page_over_the_first_view_budget_and_still_builds(tmp_path, capsys, monkeypatch):
    from kwiki.site import weight

    root = copy_project(FIXTURE, tmp_path)
    monkeypatch.setattr(weight.over_budget, "__defaults__", (1000,))  # a budget every page is over
    assert main(["build", "--root", str(root), "--site-dir", str(root / "site")]) == 0
    err = capsys.readouterr().err
    assert "kwiki build: warning: patterns/spec-only/index.html: a first view of " in err
    assert "over the site's 1,000" in err
