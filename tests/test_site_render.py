"""The site's renderers, fast and without MkDocs: ladder tables, the state line, sources, charts, search index, CSS."""

from __future__ import annotations

import re

import pytest

from kwiki.site import charts, searchindex
from kwiki.site.ladder import COLUMNS, ladder_html, ladders_block
from kwiki.site.render import STYLESHEET, sources_section, state_line, stylesheet
from kwiki.site.sanitize import clean, mark_own
from kwiki.verify.history import ClaimRow, RecordRow
from kwiki.verify.ladders import Ladder, Rung, ShapeGroup
from kwiki.verify.standing import standing
from kwiki.wiki.model import PageMeta

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
    assert re.search(r'<div class="kw-scroll" tabindex="0" role="region" aria-label="gemv ladder at 8192x8192, bf16">',
                     html)
    head = re.findall(r"<th>([^<]*)</th>", html)
    assert head == [c.replace("µ", "µ") for c in COLUMNS]
    best = re.search(r'<tr class="kw-best">(.*?)</tr>', html).group(1)
    assert "tuned&lt;x&gt;" in best and "<td>1.25×</td><td>100%</td>" in best  # escaped; vs baseline, then SoL
    assert "rows &lt;b&gt;per&lt;/b&gt; block" in html and "<b>" not in html
    assert "1740–1755" in html and "<td>check failed</td>" in html


def test_ladder_block_survives_the_sanitiser_with_its_region_attributes():
    cleaned, problems = clean(mark_own(ladders_block([_ladder()]), KEY), KEY)
    assert problems == []
    assert 'tabindex="0"' in cleaned and 'role="region"' in cleaned and 'aria-label="gemv ladder' in cleaned
    assert "data-search-exclude" in cleaned and 'class="kw-ladder kw-wide"' in cleaned


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


def test_drift_direction_follows_the_claims_better_side():
    meta = _meta(0.05, {"bw": "reproduced", "time": "reproduced"})
    assert "bw +5.0% vs its series (improved)" in state_line(meta, standing(meta))


def test_sources_section_links_titles_and_names_the_claims_citing_them():
    text = sources_section(_meta(None, {}))
    assert '<span id="source-blog"></span>[A blog &lt;post&gt;](<https://example.com/post>)' in text
    assert "cited by `cited`" in text
    assert "javascript:" not in text and "- <span id=\"source-notes\"></span>Notes" in text  # named, not linked


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


def test_history_values_are_given_as_a_table_too():
    claims, rows = _history_rows()
    table = charts.history_table(charts.history_spec(claims, rows))
    assert table[0] == ["run", "commit", "bw", "time"]
    assert table[1][:2] == ["2026-11-01 00:00", "1abcdef"] and len(table) == 4


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
