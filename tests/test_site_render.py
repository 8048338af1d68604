"""The site's renderers, fast and without MkDocs: ladder tables, the state line, sources, charts, search index, CSS."""

from __future__ import annotations

import re

import pytest

from kwiki.results.ladders import Ladder, Mechanism, Profiled, Rung, ShapeGroup
from kwiki.results.standing import standing
from kwiki.results.store import ClaimRow, RecordRow
from kwiki.site import charts, searchindex
from kwiki.site.ladder_html import COLUMNS, PLAIN_COLUMNS, kernel_name, ladder_html, ladders_block
from kwiki.site.render import STYLESHEET, claims_table, sources_section, state_line, stylesheet
from kwiki.site.sanitize import clean, mark_own
from kwiki.wiki.model import PageMeta, Provenance

KEY = "0123456789abcdef0123456789abcdef"


def _ladder() -> Ladder:
    rows = [Rung(variant="cublas", rung=0, role="baseline", status="measured", time_us=10.0, rate=3.0,
                 rate_unit="TB/s", vs_baseline=1.0, of_speed_of_light=0.8),
            Rung(variant="tuned<x>", rung=1, adds="rows <b>per</b> block", status="measured", time_us=8.0,
                 rate=3.75, rate_unit="TB/s", vs_baseline=1.25, of_speed_of_light=1.0, registers=64,
                 sm_mhz=(1740.0, 1755.0)),
            Rung(variant="bad", status="check-failed")]
    group = ShapeGroup(params={"M": 8192, "K": 8192, "dtype": "bf16"}, label="8192x8192, bf16", rows=rows)
    return Ladder(artifact="gemv", title="GEMV", path="artifacts/gemv", gpu="NVIDIA H200", date="2026-11-30T00:00:00",
                  baseline="cublas", groups=[group])


def test_ladder_is_a_table_per_shape_with_decision_columns_first_in_a_keyboard_region():
    html = ladder_html(_ladder())
    assert COLUMNS[:3] == ("variant", "vs baseline", "of speed of light")
    assert "<caption>8192x8192, bf16</caption>" in html  # the params, once, as the table's sub-header
    assert re.search(r'<div class="kw-scroll" tabindex="0" role="region" aria-label="gemv ladder at 8192x8192, bf16" '
                     r'data-search-exclude>', html)
    head = re.findall(r"<th>([^<]*)</th>", html)
    assert head == list(PLAIN_COLUMNS) and "mechanism" in COLUMNS  # no SASS check, no profile: no column
    best = re.search(r'<tr class="kw-best">(.*?)</tr>', html).group(1)
    assert "tuned&lt;x&gt;" in best and "<td>1.25×</td><td>100%</td>" in best  # escaped; vs baseline, then SoL
    assert "rows &lt;b&gt;per&lt;/b&gt; block" in html and "<b>" not in html
    assert "1740–1755" in html and "<td>check failed</td>" in html


def test_ladder_block_survives_the_sanitiser_with_its_region_attributes():
    cleaned, problems = clean(mark_own(ladders_block([_ladder()]), KEY), KEY)
    assert problems == []
    assert 'tabindex="0"' in cleaned and 'role="region"' in cleaned and 'aria-label="gemv ladder' in cleaned
    assert "data-search-exclude" in cleaned and 'class="kw-ladder kw-wide"' in cleaned


def _kernel(name: str, registers: int, matched: dict[str, int], spills: tuple[int, int] | None = (0, 0)) -> dict:
    stores, loads = spills if spills is not None else (None, None)
    return {"name": name, "registers": registers, "spill_stores": stores, "spill_loads": loads, "local_bytes": 0,
            "matched": matched}


def _mechanism_ladder() -> Ladder:
    """A ladder whose variants carry SASS evidence (matched, spilling, mismatched, unchecked) and one profiled row."""
    mechanisms = {
        "vec4": Mechanism.model_validate({"status": "passed", "forbid": ["LDG.E.64"], "kernels": [
            _kernel("void (anonymous namespace)::vec4_kernel<float4>(float const*, float*, int)", 32,
                    {"LDG.E.128 >= 2": 8, "LDG.E.64": 0})]}),
        "tiles": Mechanism.model_validate({"status": "passed", "kernels": [
            _kernel("void tile_kernel<64>(float*)", 40, {"LDG.E.128": 2}, (16, 8)),
            _kernel("void tile_kernel<128>(float*)", 64, {"LDG.E.128": 6}, (0, 0))]}),
        "bad<v>": Mechanism.model_validate({"status": "failed", "kernels": [
            _kernel("bad_kernel<script>", 30, {"LDG.E.128": 0}, None)],
            "mismatches": ["kernel 'bad_kernel': require 'LDG.E.128': expected >= 1, found 0 <LDG.E.32 x4>"]}),
        "blind": Mechanism.model_validate({"status": "not-checked", "note": "no disassembler (cuobjdump)"}),
    }
    rows = [Rung(variant="copy", rung=0, role="baseline", status="measured", time_us=10.0, rate=3.0, rate_unit="TB/s",
                 vs_baseline=1.0, profiled=Profiled(level="dram", bytes=1.07e9, bytes_ratio=0.98, run_id="r7")),
            Rung(variant="vec4", rung=1, adds="16-byte loads", status="measured", time_us=8.0, rate=3.75,
                 rate_unit="TB/s", vs_baseline=1.25, registers=32,
                 profiled=Profiled(level="l2", bytes=2.5e6, bytes_ratio=1.0, flops_ratio=0.5)),
            Rung(variant="tiles", status="measured", time_us=9.0, rate=3.3, rate_unit="TB/s", vs_baseline=1.1),
            Rung(variant="bad<v>", status="refused", time_us=1.0, gates=[{"name": "mechanism", "reason": "x"}]),
            Rung(variant="blind", status="measured", time_us=9.5, rate=3.1, rate_unit="TB/s", vs_baseline=1.05)]
    group = ShapeGroup(params={"n": 1 << 28}, label="256 Mi elements", rows=rows)
    return Ladder(artifact="copy", title="Copy", baseline="copy", groups=[group, group.model_copy()],
                  mechanisms=mechanisms)


def _row_cells(html: str, variant: str) -> list[str]:
    """The cells after the variant of the first row of `variant`."""
    row = re.search(rf"<code>{re.escape(variant)}</code>.*?</th>(.*?)</tr>", html).group(1)
    return re.findall(r"<td>(.*?)</td>", row)


def test_each_row_says_its_mechanism_next_to_its_time_and_the_variants_list_gives_the_evidence():
    html = ladder_html(_mechanism_ladder())
    assert re.findall(r"<th>([^<]*)</th>", html)[:len(COLUMNS)] == list(COLUMNS)
    assert '<table class="kw-ladder-table kw-mech-table">' in html
    mech = COLUMNS.index("mechanism") - 1
    vec4 = _row_cells(html, "vec4")
    assert vec4[mech - 1] == "8.000" and vec4[mech] == "matched, no spills; ×1.00 of 2.50 MB L2, FLOPs ×0.50"
    assert _row_cells(html, "copy")[mech] == "×0.98 of 1.07 GB DRAM†"  # a profile of an earlier run, no SASS check
    assert html.count("declared bytes (FLOPs) over what Nsight Compute counted; † profiled in run r7 (same code)") == 1
    assert _row_cells(html, "tiles")[mech] == "matched, spills"
    assert _row_cells(html, "bad&lt;v&gt;")[mech] == "<strong>mismatch</strong>"
    assert _row_cells(html, "blind")[mech] == "not checked"
    # the evidence, once per variant (the ladder has two tables), in the variants list
    variants = re.search(r'<ul class="kw-ladder-variants">(.*?)</ul>', html).group(1)
    assert html.count("SASS matched") == 2 and html.count('class="kw-mech"') == 4
    assert ("<code>vec4</code>: 16-byte loads<span class=\"kw-mech\">SASS matched: <code>vec4_kernel</code>: "
            "32 registers, no spills; <code>LDG.E.128</code> ×8 (≥ 2), no <code>LDG.E.64</code></span>") in variants
    assert ("<code>tile_kernel</code> ×2: 40–64 registers, spills 16 B stored, 8 B loaded; "
            "<code>LDG.E.128</code> ×2–6") in variants  # one template's instantiations, as ranges
    assert ("<strong>SASS mismatch</strong>: <code>bad_kernel</code>: 30 registers; <code>LDG.E.128</code> ×0"
            in variants)
    assert "found 0 &lt;LDG.E.32 x4&gt;" in variants and "<script>" not in html and "<LDG" not in html
    assert "SASS not checked: no disassembler (cuobjdump)" in variants
    assert "copy</code> <span class=\"kw-role\">baseline</span>" not in variants  # nothing to say of the baseline


def test_a_mechanism_cell_is_empty_without_a_check_and_kernel_names_read_short():
    ladder = _mechanism_ladder()
    ladder.mechanisms = {}
    for g in ladder.groups:
        g.rows = [r.model_copy(update={"profiled": None}) for r in g.rows]
    html = ladder_html(ladder)
    assert "<th>mechanism</th>" not in html and "kw-mech" not in html and "SASS" not in html
    assert kernel_name("void (anonymous namespace)::k<4, 2>(float const*, int)") == "k"
    assert kernel_name("void kwiki::ceiling_detail::read_tile<16>(uint4 const*)") == "kwiki::ceiling_detail::read_tile"
    assert kernel_name("gemv_kernel") == "gemv_kernel"


def test_mechanism_markup_survives_the_sanitiser_and_each_table_is_kept_out_of_the_search_index():
    block = ladders_block([_mechanism_ladder()])
    cleaned, problems = clean(mark_own(block, KEY), KEY)
    assert problems == []
    assert cleaned.count('class="kw-mech"') == 4 and "<strong>mismatch</strong>" in cleaned
    assert 'class="kw-ladder-table kw-mech-table"' in cleaned
    # Material's search parser ends an exclusion at the first nested </div>: each table excludes itself
    search = pytest.importorskip("material.plugins.search.plugin")
    parser = search.Parser()
    parser.feed(f"<h1 id='t'>T</h1><p>prose</p>{cleaned}<p>after</p>")
    parser.close()
    text = "".join("".join(section.text) for section in parser.data)
    assert "prose" in text and "after" in text
    assert "matched" not in text and "vec4" not in text and "256 Mi elements" not in text


def test_chart_marks_keep_lazy_loading():
    marked = mark_own("![a](x.svg){ .kw-chart loading=lazy }", KEY)
    assert marked == f"![a](x.svg){{ .kw-chart .kw-own-{KEY} loading=lazy }}"


# ---------------------------------------------------------------- the state line and sources


def _meta(drift: float | None, verdicts: dict[str, str]) -> PageMeta:
    claims = [
        {"id": "bw", "statement": "reads 4 TB/s", "metric": "bandwidth", "unit": "TB/s", "at_least": 4.0,
         "measure": {"artifact": "a", "of": {"variant": "v", "figure": "tb_per_s"}}},
        {"id": "time", "statement": "takes 10 us", "metric": "time", "unit": "us", "value": 10, "tolerance": 0.1,
         "measure": {"artifact": "a", "of": {"variant": "v"}}},
        {"id": "cited", "statement": "B200 reaches 7 TB/s", "metric": "bandwidth", "unit": "TB/s", "value": 7,
         "tolerance": 0.1, "evidence": "source-reported", "source": "blog", "conditions": {"gpu": "B200"}},
    ]
    measured = {cid: {"verdict": v, "value": 4.2, "runs": 3, **({"drift": drift} if cid == "bw" else {})}
                for cid, v in verdicts.items()}
    return PageMeta.model_validate({
        "id": "p", "title": "P", "type": "technique", "tags": ["x"], "evidence_level": "source-reported",
        "artifacts": {"a": "artifacts/a"}, "claims": claims,
        "sources": [{"id": "blog", "title": "A blog <post>", "url": "https://example.com/post"},
                    {"id": "notes", "title": "Notes", "url": "javascript:alert(1)"}],
        "measurements": {"evidence_level": "verified", "verified_on": "NVIDIA H200", "date": "2026-11-30T00:00:00Z",
                         "claims": measured}})


def test_state_line_says_what_was_reproduced_what_was_not_what_is_cited_and_drift_with_direction():
    meta = _meta(-0.084, {"bw": "reproduced", "time": "worse"})
    line = state_line(meta, standing(meta))
    assert "1 of 2 claims reproduced, 1 not" in line
    assert "1 cited figure not testable here" in line
    assert "bw -8.4% vs its series (regressed)" in line  # a bandwidth that fell: the wrong way


def test_the_state_line_counts_the_claims_that_neither_passed_nor_failed():
    """An ambiguous claim is why a page whose other claims pass is only measured: the line says so, as it says an
    error and a claim no run has measured yet (an agent reads the same line as `state_reason`)."""
    assert standing(_meta(None, {"bw": "reproduced", "time": "ambiguous"})).summary().endswith(
        ": 1 of 2 claims reproduced, 1 ambiguous")
    line = standing(_meta(None, {"bw": "not-run", "time": "error"})).summary()
    assert line.endswith(": 0 of 1 claims reproduced, 1 not measured (error), 1 not run")


def test_drift_direction_follows_the_claims_better_side():
    meta = _meta(0.05, {"bw": "reproduced", "time": "reproduced"})
    assert "bw +5.0% vs its series (improved)" in state_line(meta, standing(meta))


def test_sources_section_links_titles_and_names_the_claims_citing_them():
    text = sources_section(_meta(None, {}))
    assert '<span id="source-blog"></span>[A blog &lt;post&gt;](<https://example.com/post>)' in text
    assert "cited by `cited`" in text
    assert "javascript:" not in text and "- <span id=\"source-notes\"></span>Notes" in text  # named, not linked


def test_one_provenance_for_every_measured_claim_is_said_once_below_the_table_two_keep_the_column():
    run = {"gpu": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0", "date": "2026-12-01T00:00:00Z",
           "commit": "4ce71c330aeb"}
    meta = _meta(None, {"bw": "reproduced", "time": "reproduced"})
    for mc in meta.measurements.claims.values():
        mc.provenance = Provenance.model_validate(run)
    html = claims_table(meta)
    table, after = html[:html.index("\n\n", html.index("| claim"))], html[html.index("| claim"):]
    assert "provenance" not in table and "580.159.04" not in table
    assert after.count("580.159.04") == 1 and "Every measured figure above: NVIDIA H200, driver 580.159.04" in after
    meta.measurements.claims["time"].provenance = Provenance.model_validate({**run, "commit": "0123456789ab"})
    mixed = claims_table(meta)
    assert "| provenance |" in mixed and mixed.count("580.159.04") == 2 and "Every measured figure" not in mixed


# ---------------------------------------------------------------- charts


def _font_sizes(svg: bytes) -> list[int]:
    return [int(s) for s in re.findall(rb'font-size="(\d+)"', svg)]


def _history_rows() -> tuple[list, list[ClaimRow]]:
    meta = _meta(None, {})
    rows = [ClaimRow(run_id=f"r{i}", date=f"2026-11-0{i}T00:00:00Z", gpu="NVIDIA H200", artifact="a", page="p",
                     claim=cid, value=4.0 + i / 10, verdict="reproduced", commit=f"{i}abcdef0123")
            for i in (1, 2, 3) for cid in ("bw", "time")]
    return meta.claims, rows


def test_every_chart_is_readable_at_phone_width():
    claims, rows = _history_rows()
    long = "a-very-long-claim-identifier-that-used-to-be-cut-in-the-legend"
    specs = [
        charts.history_spec([claims[0].model_copy(update={"id": long}), *claims[1:]],
                            [r.model_copy(update={"claim": long}) if r.claim == "bw" else r for r in rows]),
        {"kind": "ladder", "artifact": "an_artifact_with_a_long_name_sm90a", "gpu": "NVIDIA H200", "date": "2026-11-30",
         "params": "K=16384, M=16384, dtype=bf16, shape=16384x16384", "figure": "tb_per_s", "unit": "TB/s",
         "better": "higher", "left_out": 0,
         "bars": [{"label": "block_r2_u4 (baseline)", "value": 4.5, "spread": 0.01, "baseline": True}]},
        {"kind": "roofline", "gpu": "NVIDIA H200", "date": "2026-11-30", "roof_gb_per_s": 4500.0,
         "points": [{"label": "gemv 8192x8192", "variant": "tuned", "baseline": False, "tflop_per_s": 4.0,
                     "intensity": 1.0}]},
    ]
    assert specs[0] is not None
    for spec in specs:
        svg = charts.draw(spec)
        width = float(re.search(rb'viewBox="0 0 ([\d.]+)', svg).group(1))
        assert min(_font_sizes(svg)) * 330 / width >= 11, spec["kind"]  # a 390 px phone's column, in an admonition
    history = charts.draw(specs[0])
    assert long.encode() in history  # the legend names the claim in full
    assert b"3abcdef" in history and history.count(b"<circle") == 6 and b"x the claim" in history  # by commit, hover
    ladder = charts.draw(specs[1])
    for word in ("an_artifact_with_a_long_name_sm90a", "shape=16384x16384)"):  # the title wraps, never cut
        assert word.encode() in ladder


def test_history_values_are_given_as_a_table_too_two_columns_wide_however_many_claims():
    claims, rows = _history_rows()
    table = charts.history_table(charts.history_spec(claims, rows))
    assert all(len(row) == 2 for row in table) and [row[0] for row in table[1:]] == ["bw", "time"]
    assert table[1][1].startswith("1.0") and "(1abcdef)" in table[1][1] and table[1][1].index("1abcdef") < \
        table[1][1].index("3abcdef")  # oldest run first, each value with its commit


def test_the_history_table_keeps_the_last_runs_so_a_page_does_not_grow_with_its_runs():
    points = [(f"2026-12-{d:02d}", f"{d:07x}", 1.0 + d / 100) for d in range(1, 21)]
    spec = {"series": [{"label": "c", "points": points}]}
    row = charts.history_table(spec)[1][1]
    assert row.startswith(f"{20 - charts.TABLE_RUNS} earlier in the chart, then ")
    assert row.count("(") == charts.TABLE_RUNS and f"({20:07x})" in row and f"({20 - charts.TABLE_RUNS:07x})" not in row


def test_gemm_roofline_puts_gemm_points_under_a_compute_roof():
    def rec(variant, dtype, tflops, gbs):
        return RecordRow(run_id="r", date="2026-11-30T00:00:00Z", gpu="NVIDIA H200", artifact="gemm", target="sm_90a",
                         variant=variant, params={"M": 4096, "N": 4096, "K": 4096, "dtype": dtype},
                         figures={"tflop_per_s": tflops, "gb_per_s": gbs, "time_us": 1.0}, passed=True)

    rows = [rec("random", "bf16", 700.0, 1000.0), rec("zeros", "bf16", 780.0, 1100.0),
            rec("random", "fp8", 1300.0, 900.0),
            rec("x", "bf16", 1.0, 1.0).model_copy(update={"artifact": "other"})]
    (spec,) = charts.compute_roofline_specs(rows, ["gemm"], {"NVIDIA H200": 4.8})
    assert spec["roof_gb_per_s"] == 4800.0
    assert [(r["tflop_per_s"]) for r in spec["compute_roofs"]] == [780.0, 1300.0]
    assert [(p["variant"], p["tflop_per_s"]) for p in spec["points"]] == [("zeros", 780.0), ("random", 1300.0)]
    assert all(p["intensity"] > 100 for p in spec["points"])  # GEMM sits far right of a GEMV's 1 FLOP/byte
    assert charts.compute_roofline_specs(rows, ["gemm"], {}) == []  # no known memory roof: no chart


# ---------------------------------------------------------------- search index and stylesheet


def test_search_index_keeps_first_sentences_summary_terms_and_tags_once():
    data = {"config": {"lang": ["en"], "fields": {}}, "docs": [
        {"location": "p/", "title": "P", "text": "<p>Intro. More text.</p>", "tags": ["a"]},
        {"location": "p/#s", "title": "S", "text": "<p>Use <code>cp.async.bulk</code> here. " + "x " * 300 + "</p>",
         "tags": ["a"]}]}
    out = searchindex.slim(data, {"p/": "The summary."})
    first, section = out["docs"]
    assert first["summary"] == first["text"] == "The summary." and first["terms"] == "cp.async.bulk"
    assert first["tags"] == ["a"] and "tags" not in section
    assert len(section["text"]) <= searchindex.SENTENCE and section["title"] == "S"
    assert searchindex.first_sentence("One. Two.", 60) == "One."
    assert searchindex.first_sentence("x " * 80, 20).endswith("…")
    assert out["config"]["fields"]["summary"]["boost"] > out["config"]["fields"]["text"]["boost"]


def test_search_index_leaves_out_the_sections_kwiki_writes_on_every_page():
    # the first view of the GEMM page was 180 bytes over its 400 KB once its ladders grew: the same three
    # generated titles on every page were ~4 KB of the index and no hit a reader wants
    data = {"config": {"lang": ["en"], "fields": {}}, "docs": [
        {"location": "p/", "title": "P", "text": "Intro."},
        *({"location": f"p/#{t.lower()}", "title": t, "text": "x"} for t in sorted(searchindex.GENERATED)),
        {"location": "p/#how", "title": "How to check", "text": "y"}]}
    assert [d["title"] for d in searchindex.slim(data, {})["docs"]] == ["P", "How to check"]


def _contrast(a: str, b: str) -> float:
    def lum(h: str) -> float:
        rgb = [int(h[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("rule", re.findall(r"^(\.kw-(?:ev|state|v)-[^{]*)\{([^}]*)\}", STYLESHEET, re.MULTILINE))
def test_every_badge_meets_wcag_aa_contrast(rule):
    selector, body = rule
    background = re.search(r"background: (#[0-9a-f]{6})", body).group(1)
    own = re.search(r"(?<!-)color: (#[0-9a-f]{3,6})", body)
    color = {"#fff": "#ffffff", "#000": "#000000"}.get(own.group(1), own.group(1)) if own else "#ffffff"  # .kw-badge
    assert _contrast(color, background) >= 4.5, selector


def test_served_stylesheet_is_minified_but_complete():
    served = stylesheet()
    assert "/*" not in served and len(served) < len(STYLESHEET)
    assert served.count("{") == STYLESHEET.count("{") - STYLESHEET.count("/*") * 0
    assert 'content: "of speed of light"' in served or 'content:"of speed of light"' in served


def test_the_search_index_is_deferred_to_first_use_or_the_build_says_why(tmp_path):
    """Material's start-up expression becomes its file:// path (the index loads when search opens) and its worker
    a stand-in that starts it on the first message; a bundle without either, or without a bundle, is reported
    rather than shipping the index or the worker in every first view."""
    bundle = tmp_path / "assets" / "javascripts" / "bundle.abc.min.js"
    bundle.parent.mkdir(parents=True)
    worker = "function Mn(e,t=new Worker(e)){let r=Wa(t),o=Da(t);return r}"
    eager = ('function Ei(e,t){let r=Mn(e);return L($(location.protocol!=="file:"),Je("search")).pipe(Re(o=>o))}'
             + worker)
    bundle.write_text(eager)
    assert searchindex.defer_index(tmp_path) is None
    patched = bundle.read_text()
    assert patched.startswith(eager.replace('location.protocol!=="file:"', "!1").removesuffix(worker))
    assert "new Worker(e))" not in patched and patched.count("new Worker(e)") == 1
    assert "function Mn(e,t=((kwW,kwL=[])=>({addEventListener(" in patched
    assert searchindex.defer_index(tmp_path) is None  # a second pass leaves it as it is
    assert bundle.read_text() == patched
    bundle.write_text("function Ei(e,t){return L($(!0),Je('search'))}" + worker)
    assert "search start-up not found as expected" in (searchindex.defer_index(tmp_path) or "")
    bundle.write_text(eager.replace("t=new Worker(e)", "t=new SharedWorker(e)"))
    assert "search worker not found as expected" in (searchindex.defer_index(tmp_path) or "")
    bundle.unlink()
    assert "expected Material's one bundle" in (searchindex.defer_index(tmp_path) or "")


def test_a_rung_with_the_same_sass_evidence_as_one_above_points_to_it():
    """Rungs that run one kernel with different arguments (tile orders, group sizes) have word-for-word the same
    SASS evidence: the variants list gives it once and the later rung names the rung that has it."""
    ladder = _mechanism_ladder()
    ladder.mechanisms["vec4_again"] = ladder.mechanisms["vec4"].model_copy()
    rows = [*ladder.groups[0].rows, Rung(variant="vec4_again", rung=2, adds="vec4 in another order",
                                          status="measured", time_us=8.1, rate=3.7, rate_unit="TB/s")]
    ladder.groups = [ladder.groups[0].model_copy(update={"rows": rows})]
    variants = re.search(r'<ul class="kw-ladder-variants">(.*?)</ul>', ladder_html(ladder)).group(1)
    assert variants.count("<code>vec4_kernel</code>: 32 registers") == 1
    assert ("<code>vec4_again</code>: vec4 in another order<span class=\"kw-mech\">SASS as <code>vec4</code>'s"
            "</span>") in variants


def test_a_page_over_the_first_view_budget_is_named_with_its_weight(tmp_path):
    """kwiki.site.weight: a page's HTML and the site's stylesheets and scripts it names (from its folder or the site's
    root), not its images or another host's files; `kwiki build` says which pages are over."""
    from kwiki.site.weight import first_view, over_budget

    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "main.css").write_bytes(b"x" * 1000)
    (tmp_path / "assets" / "app.js").write_bytes(b"y" * 500)
    (tmp_path / "assets" / "chart.svg").write_bytes(b"z" * 100_000)
    page = tmp_path / "kernels" / "gemm" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text('<link rel="stylesheet" href="../../assets/main.css"><script src="/assets/app.js"></script>'
                    '<img src="../../assets/chart.svg"><script src="https://cdn.example.com/x.js"></script>')
    assert first_view(tmp_path, page) == page.stat().st_size + 1500
    assert over_budget(tmp_path, budget=page.stat().st_size + 1500) == []
    (line,) = over_budget(tmp_path, budget=1000)
    assert line.startswith("kernels/gemm/index.html: a first view of ") and "over the site's 1,000" in line
