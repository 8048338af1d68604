"""Pages that answer at a glance, without MkDocs: the answer box, one ladder per artifact, the roofline's
defects (one roof per dtype, no set-aside variant as best, labels that do not collide or leave the drawing),
the build line of a Python artifact, claims in the order a reader wants them, and the home page's headline."""

from __future__ import annotations

import re
from pathlib import Path

from kwiki.results.ladders import Ladder, Rung, ShapeGroup
from kwiki.results.standing import standing
from kwiki.results.store import RecordRow
from kwiki.site import charts
from kwiki.site.answer import answer_box, figure_text, headline_claim, unhelpful
from kwiki.site.render import build_text, claims_table
from kwiki.wiki.manifest import load_manifest
from kwiki.wiki.model import Conditions, Decision, PageMeta
from kwiki.wiki.owners import claimed_params, matches, owners
from kwiki.wiki.verdict import Verdict

REPO = Path(__file__).resolve().parent.parent


def _rung(variant: str, rung: int | None, rate: float, role: str | None = None) -> Rung:
    return Rung(variant=variant, rung=rung, role=role, status="measured", time_us=100.0 / rate, rate=rate,
                rate_unit="TFLOP/s", vs_baseline=rate / 800.0, sm_mhz=(1755.0, 1980.0))


def _ladder() -> Ladder:
    def group(m: int, scale: float) -> ShapeGroup:
        rows = [_rung("cublas", 0, 800.0 * scale, "baseline"), _rung("tiled", 1, 700.0 * scale),
                _rung("zeros", None, 990.0 * scale), _rung("persistent", 2, 820.0 * scale),
                _rung("persistent_ws", 3, 810.0 * scale)]
        return ShapeGroup(params={"M": m, "N": m, "K": m, "dtype": "bf16"}, label=f"{m}x{m}x{m}, bf16", rows=rows)

    return Ladder(artifact="gemm", title="GEMM", gpu="NVIDIA H200", date="2026-12-02T00:00:00Z", target="sm_90a",
                  baseline="cublas", groups=[group(2048, 0.9), group(4096, 1.0), group(8192, 1.02)])


def _meta(**extra: object) -> PageMeta:
    data = {"id": "kernel-gemm", "title": "GEMM", "type": "kernel", "artifacts": {"gemm": "artifacts/gemm"},
            "claims": [
                {"id": "tflops-4096", "statement": "persistent reaches 800", "metric": "throughput", "unit": "TFLOP/s",
                 "at_least": 800, "measure": {"artifact": "gemm", "of": {
                     "variant": "persistent", "params": {"M": 4096}, "figure": "tflop_per_s"}}},
                {"id": "vs-cublas-8192", "statement": "persistent matches cuBLAS", "metric": "ratio", "unit": "x",
                 "at_least": 1.0, "measure": {"artifact": "gemm",
                                              "of": {"variant": "persistent", "params": {"M": 8192},
                                                     "figure": "tflop_per_s"},
                                              "per": {"variant": "cublas", "params": {"M": 8192},
                                                      "figure": "tflop_per_s"}}},
                {"id": "cited", "statement": "a blog says 900", "metric": "throughput", "unit": "TFLOP/s",
                 "value": 900, "evidence": "source-reported", "source": "blog"}],
            "measurements": {"evidence_level": "measured", "date": "2026-12-02", "claims": {
                "tflops-4096": {"verdict": "reproduced", "value": 820.0, "unit": "TFLOP/s"},
                "vs-cublas-8192": {"verdict": "reproduced", "value": 1.025, "unit": "x"}}}}
    return PageMeta.model_validate({**data, **extra})


# ---------------------------------------------------------------- the answer box


def test_answer_box_gives_the_best_variant_at_each_claimed_shape_with_its_speed_against_the_baseline():
    meta = _meta(set_aside={"zeros": "all-zero inputs"})
    box = answer_box(meta, standing(meta), [(_ladder(), claimed_params(meta, "artifacts/gemm"))])
    assert box.startswith('<div class="kw-answer"') and "<a " not in box
    shapes = re.findall(r'<span class="kw-shape">([^<]*)</span>: best <code>([^<]*)</code>', box)
    assert shapes == [("4096x4096x4096, bf16", "persistent"), ("8192x8192x8192, bf16", "persistent")]  # claimed only
    assert "820 TFLOP/s" in box and "1.02×</strong> <code>cublas</code>" in box and "SM 1755–1980 MHz" in box
    assert "NVIDIA H200, 2026-12-02, sm_90a, burst regime" in box
    assert "Did not help: rung 3 <code>persistent_ws</code> 0.988× of rung 2." in box  # once, not per shape
    assert "Never counted as best: zeros (all-zero inputs)" in box


def test_a_set_aside_variant_is_never_best_and_without_it_it_would_be():
    meta = _meta()
    box = answer_box(meta, standing(meta), [(_ladder(), claimed_params(meta, "artifacts/gemm"))])
    assert "best <code>zeros</code>" in box  # the defense below is what keeps it out
    aside = _meta(set_aside={"zeros": "all-zero inputs"})
    assert "best <code>zeros</code>" not in answer_box(aside, standing(aside), [(_ladder(), [])])


def test_the_baseline_is_no_rung_that_did_not_help():
    (group,) = [g for g in _ladder().groups if g.params["M"] == 4096]
    assert [(r.variant, b.variant) for r, b in unhelpful(group)] == [("persistent_ws", "persistent")]


def test_a_second_library_row_at_rung_0_is_no_bar_for_our_rungs_either():
    """A ladder with two libraries (cuBLASLt's best as the baseline, cublasGemmEx's default beside it, both rung 0):
    our first rung being slower than the second library is what 'vs baseline' says, not a rung that did not help."""
    (group,) = [g for g in _ladder().groups if g.params["M"] == 4096]
    fast = max(r.rate or 0.0 for r in group.rows) * 1.5
    library = Rung(variant="cublas_default", rung=0, status="measured", time_us=1.0, rate=fast,
                   rate_unit=group.rows[0].rate_unit)
    group = group.model_copy(update={"rows": [*group.rows, library]})
    assert [(r.variant, b.variant) for r, b in unhelpful(group)] == [("persistent_ws", "persistent")]


def test_headline_claim_from_front_matter_with_its_direction():
    meta = _meta(headline="vs-cublas-8192")
    claim, mc = headline_claim(meta, standing(meta))
    assert claim.id == "vs-cublas-8192" and figure_text(claim, mc) == "1.02× cublas"
    plain = _meta()
    claim, mc = headline_claim(plain, standing(plain))
    assert claim.id == "tflops-4096" and figure_text(claim, mc) == "820.0 TFLOP/s"  # the standing's first
    fraction = _meta(headline="vs-cublas-8192")
    fraction.claims[1].unit = "fraction"
    assert figure_text(fraction.claims[1], fraction.measurements.claims["vs-cublas-8192"]) == "102% of cublas"


def test_a_ratio_of_times_names_the_variant_its_kernel_is_faster_than():
    """cuBLAS's time over ours is our speed relative to cuBLAS's: the figure names cuBLAS ('1.28× cublas'), as a
    ratio of rates names its `per`; it named our own variant ('1.28× persistent', the GEMV's headline)."""
    times = _meta(headline="vs-cublas-8192")
    claim = times.claims[1]
    claim.measure.of, claim.measure.per = claim.measure.per, claim.measure.of
    claim.measure.of.figure = claim.measure.per.figure = "time_us"
    mc = times.measurements.claims["vs-cublas-8192"]
    assert claim.measure.of.variant == "cublas" and figure_text(claim, mc) == "1.02× cublas"
    claim.decision = Decision(family="gemm", use="persistent", over="cuBLAS's default algorithm")
    assert figure_text(claim, mc) == "1.02× cuBLAS's default algorithm"  # a decision's words come first
    gap = _meta()
    gap.claims[1].unit = "fraction"
    small = gap.measurements.claims["vs-cublas-8192"].model_copy(update={"value": 0.00059})
    assert figure_text(gap.claims[1], small) == "0.059% of cublas"  # not '0%'


def test_a_page_without_a_ladder_answers_with_its_headline_claim():
    meta = _meta(headline="vs-cublas-8192")
    box = answer_box(meta, standing(meta), [])
    assert '<strong class="kw-fig">1.02× cublas</strong>' in box and "persistent matches cuBLAS" in box
    assert "kw-v-pass" in box
    empty = _meta(measurements=None)
    assert answer_box(empty, standing(empty), []) == ""  # nothing measured: no box


def test_headline_must_name_a_claim_of_the_page():
    import pydantic
    import pytest

    with pytest.raises(pydantic.ValidationError, match="headline 'nope' is not a claim of this page"):
        _meta(headline="nope")
    with pytest.raises(pydantic.ValidationError, match="owns 'other', which is not a key of 'artifacts'"):
        _meta(owns=["other"])


# ---------------------------------------------------------------- one ladder per artifact


def test_a_shared_artifact_has_one_owner_declared_or_the_page_measuring_it_most():
    many = _meta()
    few = _meta(id="technique-few", claims=_meta().claims[:1], measurements=None)
    declared = _meta(id="technique-declared", claims=[], measurements=None, owns=["gemm"])
    assert owners([(few, "few.md"), (many, "many.md")])["artifacts/gemm"].rel == "many.md"  # most claims
    assert owners([(few, "few.md"), (many, "many.md"), (declared, "d.md")])["artifacts/gemm"].rel == "d.md"
    alone = _meta(id="alone", artifacts={"gemm": "artifacts/gemm/"})
    assert owners([(alone, "a.md")])["artifacts/gemm"].page_id == "alone"  # a trailing '/' names it too


def test_the_other_pages_keep_the_rows_at_the_shapes_their_claims_select():
    meta = _meta()
    wanted = claimed_params(meta, "artifacts/gemm")
    assert wanted == [{"M": 4096}, {"M": 8192}]
    kept = [g.label for g in _ladder().groups if any(matches(g.params, w) for w in wanted)]
    assert kept == ["4096x4096x4096, bf16", "8192x8192x8192, bf16"]
    assert matches({"M": 4096, "dtype": "bf16"}, {"M": "4096"}) and not matches({"N": 1}, {"M": 1})


# ---------------------------------------------------------------- the roofline's defects


def _rec(artifact: str, variant: str, params: dict, tflops: float, gbs: float) -> RecordRow:
    return RecordRow(run_id="r", date="2026-12-02T00:00:00Z", gpu="NVIDIA H200", artifact=artifact, target="sm_90a",
                     variant=variant, params=params, figures={"tflop_per_s": tflops, "gb_per_s": gbs, "time_us": 1.0},
                     passed=True)


def _gemm_rows() -> list[RecordRow]:
    rows = []
    for m in (2048, 4096, 8192):
        for name, dtype, scale in (("bf16", "bf16", 1.0), ("fp8", "fp8_e4m3", 2.0), ("tf32", "tf32", 0.5)):
            rows.append(_rec("cublas", f"{name}_random", {"M": m, "N": m, "K": m, "dtype": dtype}, 700 * scale,
                             m * 0.4))
            rows.append(_rec("cublas", f"{name}_zeros", {"M": m, "N": m, "K": m, "dtype": dtype}, 800 * scale,
                             m * 0.4))
        rows.append(_rec("triton", "triton", {"m": m, "n": m, "k": m, "dtype": "bfloat16"}, 720.0, m * 0.4))
    return rows


def test_gemm_roofline_has_one_roof_per_dtype_however_it_is_spelled_and_no_set_aside_point():
    aside = {"bf16_zeros", "fp8_zeros", "tf32_zeros"}
    (spec,) = charts.compute_roofline_specs(_gemm_rows(), ["cublas", "triton"], {"NVIDIA H200": 4.8}, aside)
    assert [r["label"] for r in spec["compute_roofs"]] == ["bf16", "fp8", "tf32"]  # "bfloat16" is bf16
    assert {p["variant"] for p in spec["points"]} == {"triton", "fp8_random", "tf32_random"}
    assert [p["label"] for p in spec["points"]][:3] == ["2048x2048x2048 bf16", "4096x4096x4096 bf16",
                                                         "8192x8192x8192 bf16"]  # one shape, either case
    (with_zeros,) = charts.compute_roofline_specs(_gemm_rows(), ["cublas", "triton"], {"NVIDIA H200": 4.8})
    assert "bf16_zeros" in {p["variant"] for p in with_zeros["points"]}  # what set_aside keeps out


def _texts(svg: bytes) -> list[tuple[float, float, int, str, str]]:
    return [(float(x), float(y), int(size), anchor, text) for x, y, size, anchor, text in re.findall(
        rb'<text (?:transform="[^"]*" )?x="([\d.-]+)" y="([\d.-]+)" font-size="(\d+)" text-anchor="(\w+)"[^>]*>'
        rb"([^<]*)</text>", svg)]


def _box(x: float, y: float, size: int, anchor: str, text: str) -> tuple[float, float, float, float]:
    w = len(text) * size * charts.CHAR * (charts.BOLD_CHAR / charts.CHAR if size == charts.TITLE else 1)
    x0 = x - w if anchor == "end" else x - w / 2 if anchor == "middle" else x
    return x0, y - size + 2, x0 + w, y + 3


def test_gemm_roofline_labels_stay_inside_the_drawing_and_point_numbers_do_not_collide():
    aside = {"bf16_zeros", "fp8_zeros", "tf32_zeros"}
    (spec,) = charts.compute_roofline_specs(_gemm_rows(), ["cublas", "triton"], {"NVIDIA H200": 4.8}, aside)
    svg = charts.draw(spec)
    width = float(re.search(rb'viewBox="0 0 ([\d.]+)', svg).group(1))
    texts = [(x, y, s, a.decode(), t.decode()) for x, y, s, a, t in _texts(svg)]
    for x, y, size, anchor, text in texts:
        if text == "TFLOP/s" and x == 12:
            continue  # the y axis's name, turned a quarter
        x0, _, x1, _ = _box(x, y, size, anchor, text)
        assert x0 >= 0 and x1 <= width, (text, x0, x1)  # nothing clipped at either side
    numbers = [_box(*t) for t in texts if t[4].isdigit() and t[3] == "start"]  # ticks are anchored end or middle
    assert len(numbers) == len(spec["points"])
    for i, a in enumerate(numbers):
        for b in numbers[i + 1:]:
            assert not charts._overlaps(a, b), (a, b)


def test_axis_ticks_are_short():
    assert [charts.tick_text(v) for v in (100, 1000, 10_000, 100_000, 1e6)] == ["100", "1k", "10k", "100k", "1M"]


# ---------------------------------------------------------------- artifacts and claims


def test_a_python_artifact_shows_no_nvcc_build_line():
    m = load_manifest(REPO / "artifacts" / "triton_gemm_bf16_sm90a", REPO)
    text = build_text(m, "artifacts/triton_gemm_bf16_sm90a")
    assert "nvcc" not in text and "No build" in text and "gemm.py" in text
    cuda = load_manifest(REPO / "artifacts" / "gemv_bf16_sm90a", REPO)
    assert "nvcc" in build_text(cuda, "artifacts/gemv_bf16_sm90a")


def test_claims_no_run_measures_do_not_open_the_claims_table():
    table = claims_table(_meta())
    rows = [line for line in table.split("\n") if line.startswith("| ") and "`" in line]
    assert [re.search(r"`([a-z0-9-]+)`", r).group(1) for r in rows] == ["tflops-4096", "vs-cublas-8192", "cited"]
    first = _meta()
    first.claims.insert(0, first.claims.pop())  # the cited claim first in the front matter
    rows = [line for line in claims_table(first).split("\n") if line.startswith("| ") and "`" in line]
    assert "`cited`" in rows[-1]


def test_history_chart_run_labels_do_not_collide_and_stay_inside():
    from kwiki.results.store import ClaimRow
    from kwiki.wiki.model import Claim

    claim = Claim.model_validate({"id": "c", "statement": "s", "metric": "ratio", "unit": "x", "at_least": 1.0})
    rows = [ClaimRow(run_id=f"r{i}", date=f"2026-11-{i + 1:02d}T00:00:00Z", gpu="NVIDIA H200", artifact="a",
                     page="p", claim="c", value=1.0 + i / 100, verdict="reproduced",
                     commit=None) for i in range(22)]  # runs of no commit: labelled by their date, 10 characters
    svg = charts.draw(charts.history_spec([claim], rows))
    labels = [(x, y, s, a.decode(), t.decode()) for x, y, s, a, t in _texts(svg) if a == b"middle" and y > 200
              and (t[:4] == b"2026" or t.isdigit())]
    assert len(labels) > 3
    boxes = [_box(*t) for t in labels]
    assert all(b[0] >= 0 and b[2] <= 400 for b in boxes)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not charts._overlaps(a, b), (a, b)


# ---------------------------------------------------------------- decision tables


def _decided(varies: list[str], verdict: str | None = "reproduced", **conditions: str) -> PageMeta:
    meta = _meta(headline="vs-cublas-8192")
    meta.claims[1].decision = Decision(family="gemm", use="persistent", over="cuBLAS", varies=varies)
    meta.claims[1].conditions = Conditions(**conditions)
    if verdict is None:
        meta.measurements = None
    else:
        meta.measurements.claims["vs-cublas-8192"].verdict = Verdict(verdict)
    return meta


def test_a_decision_row_traces_to_its_claim_and_page():
    from kwiki.site.decisions import decisions_page, rows
    from kwiki.site.listings import SitePage

    meta = _decided(["kernel"], shape="8192x8192x8192", dtype="bf16")
    pages = [SitePage(None, "kernels/gemm.md", meta, None)]
    tables, left = rows(pages)
    (row,) = tables["gemm"]
    assert (row.page_id, row.claim, row.figure, row.verdict) == ("kernel-gemm", "vs-cublas-8192", "1.02× cuBLAS",
                                                                 "reproduced")
    assert (row.shape, row.dtype, row.size, row.use) == ("8192x8192x8192", "bf16", "any", "persistent")
    assert left == []
    page = decisions_page(pages)
    assert "| 8192x8192x8192 | bf16 | any | persistent | 1.02× cuBLAS (reproduced) | [GEMM](../kernels/gemm.md) " \
           "`vs-cublas-8192` |" in page


def test_a_row_whose_claim_confounds_two_factors_is_left_out_and_said_so():
    from kwiki.site.decisions import decisions_page, rows
    from kwiki.site.listings import SitePage

    pages = [SitePage(None, "kernels/gemm.md", _decided(["kernel", "dtype"]), None)]
    tables, left = rows(pages)
    assert tables == {} and [x.why for x in left] == ["its comparison changes kernel, dtype at once (confounded)"]
    assert "confounded" in decisions_page(pages)
    for meta, why in ((_decided(["kernel"], verdict=None), "not measured"),
                      (_decided(["kernel"], verdict="worse"), "it did not hold (worse)")):
        tables, left = rows([SitePage(None, "kernels/gemm.md", meta, None)])
        assert tables == {} and [x.why for x in left] == [why]


# ---------------------------------------------------------------- code that teaches


def test_each_rung_shows_its_marked_code_and_what_it_adds_over_the_rung_below(tmp_path):
    import shutil

    from kwiki.site.excerpts import excerpts

    shutil.copytree(REPO / "artifacts" / "vector_loads_sm90a", tmp_path / "artifacts" / "vector_loads_sm90a")
    shutil.copytree(REPO / "artifacts" / "common", tmp_path / "artifacts" / "common")
    rel = "artifacts/vector_loads_sm90a"
    m = load_manifest(tmp_path / rel, tmp_path)
    text = excerpts(tmp_path, rel, m).replace("\\_", "_")
    blocks = re.findall(r'\?\?\? example "rung (\d+) (\w+)', text)
    assert blocks == sorted(blocks, key=lambda b: int(b[0])) and ("4", "read_v16_x4") in blocks
    v16x4 = text[text.index('"rung 4 read_v16_x4'):]
    adds = next(v.adds for v in m.variants if v.name == "read_v16_x4")
    assert adds in v16x4.split("\n")[0] and "Over rung 3 `read_v16_x1`" in v16x4
    assert "vector_loads.cu, lines " in v16x4
    source = tmp_path / rel / "vector_loads.cu"
    lines = source.read_text().split("\n")
    kept = [ln for ln in lines if ln.strip() not in ("// kwiki:rung read_v16_x4", "// /kwiki:rung read_v16_x4")]
    source.write_text("\n".join(kept))  # the region removed: its excerpt goes with it, never a stale copy
    again = excerpts(tmp_path, rel, load_manifest(tmp_path / rel, tmp_path)).replace("\\_", "_")
    assert '"rung 4 read_v16_x4' not in again and '"rung 3 read_v16_x1' in again


# ---------------------------------------------------------------- curves across sizes


def _sized_ladder(n: int) -> Ladder:
    groups = []
    for i in range(n):
        rows = n - i  # declared largest first: the curve sorts by size
        base = Rung(variant="torch", rung=0, role="baseline", status="measured", time_us=1 / (0.4 + i / 100), rate=2.0,
                    rate_unit="TB/s", of_speed_of_light=0.4 + i / 100)  # the same bytes: the time says the share
        ours = Rung(variant="fused", rung=1, status="measured", time_us=1 / (0.8 + i / 100), rate=4.0,
                    rate_unit="TB/s", of_speed_of_light=0.8 + i / 100)
        zeros = Rung(variant="zeros", status="measured", time_us=1.0, rate=5.0, rate_unit="TB/s", of_speed_of_light=1.0)
        groups.append(ShapeGroup(params={"rows": rows * 1024, "cols": 4096, "op": "softmax", "dtype": "bf16"},
                                 label=f"{rows * 1024}x4096, bf16, op=softmax", rows=[base, ours, zeros]))
    return Ladder(artifact="softmax", title="softmax", gpu="NVIDIA H200", date="2026-12-02T00:00:00Z",
                  baseline="torch", groups=groups)


def test_a_curve_plots_the_best_rung_and_the_baseline_over_sizes_as_a_share_of_the_roof():
    from kwiki.site.curves import MIN_SIZES, curve_specs, draw_curve

    assert curve_specs(_sized_ladder(MIN_SIZES - 1)) == []  # too few sizes for a curve
    (spec,) = curve_specs(_sized_ladder(8), {"zeros": "all-zero inputs"})
    assert spec["roof"] == "the speed of light" and spec["dtype"] == "bf16"
    labels = [p["label"] for p in spec["points"]]
    assert labels[0] == "1024x4096" and labels[-1] == "8192x4096"  # smallest first; op and dtype said once
    assert {p["best_variant"] for p in spec["points"]} == {"fused"}  # the set-aside variant never best
    assert round(spec["points"][0]["best"], 6) == 0.87 and round(spec["points"][0]["base"], 6) == 0.47
    svg = draw_curve(spec)
    assert svg == draw_curve(spec) and min(_font_sizes(svg)) * 330 / 400 >= 11  # a phone's column
    assert svg.count(b"<circle") == 16 and b"fused 87.0% of the speed of light" in svg


def _font_sizes(svg: bytes) -> list[int]:
    return [int(s) for s in re.findall(rb'font-size="(\d+)"', svg)]


# ---------------------------------------------------------------- measured timelines


def _timeline():
    from kwiki.site.timeline import Span, Timeline

    spans = []
    for block in range(3):
        t = 1_000_000 + block * 50
        for k in range(4):
            spans.append(Span(block=block, warpgroup=0, phase="producer-wait", start_ns=t, end_ns=t + 100))
            spans.append(Span(block=block, warpgroup=0, phase="tma-issue", start_ns=t + 100, end_ns=t + 150))
            spans.append(Span(block=block, warpgroup=1, phase="consumer-wait", start_ns=t + 150, end_ns=t + 300))
            spans.append(Span(block=block, warpgroup=1, phase="wgmma", start_ns=t + 300, end_ns=t + 900, tile=k))
            t += 900
        spans.append(Span(block=block, warpgroup=1, phase="epilogue", start_ns=t, end_ns=t + 400, tile=3))
    return Timeline(artifact="gemm_bf16_sm90a", variant="ws_plain", params={"M": 4096}, gpu="NVIDIA H200",
                    spans=spans)


def test_a_timeline_draws_only_what_its_stamps_say():
    from kwiki.site.timeline import PHASE_COLORS, draw_timeline, timeline_spec

    spec = timeline_spec(_timeline())
    assert [lane["label"] for lane in spec["lanes"]] == ["CTA 0 WG 0", "CTA 0 WG 1", "CTA 1 WG 0", "CTA 1 WG 1"]
    assert spec["blocks_left_out"] == 1 and spec["dropped"] == 0
    first = spec["lanes"][0]["spans"][0]
    assert (first["phase"], first["start"], first["end"]) == ("producer-wait", 0.0, 0.1)  # µs from the first stamp
    svg = draw_timeline(spec)
    seen = {s["phase"] for lane in spec["lanes"] for s in lane["spans"]}
    assert len(seen) == 5 and seen < set(PHASE_COLORS)  # a GEMM's: no softmax
    rects = svg.count(b"<rect") - 1 - len(seen)  # less the card and the legend's swatches, one a phase drawn
    assert rects == sum(len(lane["spans"]) for lane in spec["lanes"]) == 2 * (4 * 4 + 1)
    assert b"CTA 1 WG 1: wgmma, tile 0" in svg and b"1 more CTAs not drawn" in svg
    assert b"M=4096" not in svg  # the params are the caption's: in the title they wrapped to five bold lines
    assert min(_font_sizes(svg)) * 330 / 400 >= 11
    assert timeline_spec(_timeline().model_copy(update={"spans": []})) is None


def test_a_long_timeline_gets_a_close_up_of_its_first_cta_clipped_to_its_window():
    from kwiki.site.timeline import ZOOM_SPANS, Span, Timeline, caption, draw_timeline, timeline_spec

    spans = []
    for block in range(2):
        t = 1_000_000
        for k in range(40):  # 80 spans a consumer lane: its whole run is too dense to read
            spans.append(Span(block=block, warpgroup=0, phase="producer-wait", start_ns=t + 500, end_ns=t + 1200))
            spans.append(Span(block=block, warpgroup=1, phase="consumer-wait", start_ns=t, end_ns=t + 200))
            spans.append(Span(block=block, warpgroup=1, phase="wgmma", start_ns=t + 200, end_ns=t + 900, tile=k))
            t += 900
    spec = timeline_spec(Timeline(artifact="a", variant="v", params={}, gpu="NVIDIA H200", spans=spans))
    zoom = spec["close_up"]
    ref = spec["lanes"][1]["spans"]  # CTA 0 WG 1, its first consumer
    assert (zoom["start"], zoom["end"]) == (ref[40]["start"], ref[40 + ZOOM_SPANS - 1]["end"])
    assert [lane["label"] for lane in zoom["lanes"]] == ["CTA 0 WG 0", "CTA 0 WG 1"]
    inside = [x for lane in zoom["lanes"] for x in lane["spans"]]
    assert inside and all(zoom["start"] <= x["start"] < x["end"] <= zoom["end"] for x in inside)
    assert len(zoom["lanes"][1]["spans"]) == ZOOM_SPANS  # whole spans of the window, none outside it
    producer = zoom["lanes"][0]["spans"]  # tile 19's began before the window (at 17.6 µs): clipped to its start
    assert producer[0]["start"] == zoom["start"] and abs(producer[0]["end"] - 18.3) < 1e-9
    svg = draw_timeline(spec)
    assert b"Close-up of CTA 0" in svg
    assert svg.count(b"<rect") - 1 - 3 == sum(len(lane["spans"]) for lane in spec["lanes"]) + len(inside)
    assert "a close-up of the first CTA" in caption(spec, None)


# ---------------------------------------------------------------- the glossary


def test_the_first_use_of_a_term_in_running_text_links_to_its_definition_once():
    from kwiki.site.glossary import Entry, anchor, link_first_uses
    from kwiki.wiki.model import Term

    terms = [Entry(Term(term="mbarrier phase", aliases=["phase bit"], definition="d"), "glossary.md"),
             Entry(Term(term="warpgroup", aliases=["warpgroups"], definition="d"), "glossary.md")]
    lines = ["# The warpgroup heading", "", "```cuda", "// one warpgroup per role", "```",
             "Use `warpgroup` in code and [a warpgroup link](x.md), then two warpgroups wait on the mbarrier phase.",
             "A later warpgroup and mbarrier phase stay plain.", "| a warpgroup in a table |",
             "    an indented warpgroup (code)", "generated warpgroup"]
    out = link_first_uses(lines, terms, "techniques/ws.md", frozenset({9}))
    assert out[:5] == lines[:5] and out[7:] == lines[7:]  # heading, fence, table, indented code, generated region
    assert out[5] == ("Use `warpgroup` in code and [a warpgroup link](x.md), then two "
                      "[warpgroups](../glossary.md#term-warpgroup) wait on the "
                      "[mbarrier phase](../glossary.md#term-mbarrier-phase).")
    assert out[6] == lines[6]  # each term once per page
    assert link_first_uses(lines, terms, "glossary.md") == lines  # the glossary does not link to itself
    assert anchor("Thread block cluster") == "term-thread-block-cluster"


def test_every_glossary_term_links_to_a_page_that_exists():
    from kwiki.wiki.catalog import load_wiki

    wiki = load_wiki(REPO)
    ids = {p.id for p in wiki.pages}
    terms = [t for p in wiki.pages if p.meta is not None for t in p.meta.glossary]
    assert len(terms) >= 10 and all(t.measured_on in ids for t in terms)


def test_a_kernel_below_its_own_goal_reads_amber_never_red():
    """The words are kwiki.results.states' (issue 27); the colours are the site's: amber for below goal, as
    claim and as page state, red only for what failed."""
    from kwiki.site.render import STYLESHEET

    amber = re.search(r"([^}]*)\{ background: #f9a825; color: #000; \}", STYLESHEET).group(1)
    assert ".kw-v-warn" in amber and ".kw-state-below-goal" in amber
    red = re.search(r"([^}]*)\{ background: #c62828; \}", STYLESHEET).group(1)
    assert "below" not in red and "warn" not in red


def test_written_back_ladder_of_an_artifact_another_page_owns_keeps_the_claimed_shapes_and_links():
    from kwiki.results.record import Record
    from kwiki.verify.tables import ladder_table
    from kwiki.verify.types import PlannedArtifact, RunOutcome
    from kwiki.wiki.manifest import Manifest

    m = Manifest.model_validate({"name": "gemm", "title": "GEMM", "targets": ["sm_90a"], "build": {"sources": ["g.cu"]},
                                 "variants": [{"name": "cublas"}, {"name": "ws"}], "baseline": "cublas"})
    planned = PlannedArtifact("artifacts/gemm", Path("."), m, run_target="sm_90a")
    timing = {"median_us": 10.0, "q1_us": 10.0, "q3_us": 10.0, "min_us": 10.0, "samples": 5}
    recs = [Record.model_validate({"kwiki_record": 1, "variant": v, "params": {"M": size}, "check": {"passed": True},
                                   "timing": timing}) for v in ("cublas", "ws") for size in (2048, 4096, 8192)]
    outcome = [RunOutcome("gemm", "sm_90a", ["cublas", "ws"], "ok", records=recs)]
    whole = ladder_table(planned, outcome)
    part = ladder_table(planned, outcome, only=[{"M": 4096}], owner=("Warp specialization", "../ws.md"))
    assert whole.count("| M=") == 6 and part.count("| M=") == 2 and "| M=4096 |" in part
    assert "the full ladder: [Warp specialization](../ws.md)" in part


def test_a_rung_that_did_not_help_is_measured_against_the_fastest_rung_below_it():
    rows = [_rung("persistent", 4, 820.0), _rung("group8", 6, 800.0), _rung("hilbert", 7, 810.0)]
    group = ShapeGroup(params={"M": 4096}, label="4096", rows=rows)
    assert [(r.variant, b.variant) for r, b in unhelpful(group)] == [("group8", "persistent"),
                                                                      ("hilbert", "persistent")]


def test_the_owner_page_lists_each_rung_with_a_link_to_its_code_on_the_artifact_page():
    from kwiki.site.excerpts import excerpts, rung_anchor, rung_index

    rel = "artifacts/vector_loads_sm90a"
    m = load_manifest(REPO / rel, REPO)
    index = rung_index(REPO, rel, m, "../indexes/artifacts/vector_loads_sm90a.md")
    assert f"rung 4 [read\\_v16\\_x4](../indexes/artifacts/vector_loads_sm90a.md#{rung_anchor('read_v16_x4')})" in index
    assert f'<span id="{rung_anchor("read_v16_x4")}"></span>' in excerpts(REPO, rel, m)  # the link's target
