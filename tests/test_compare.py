"""A page's `compare`: variants of one artifact side by side over one size (M of a decode GEMM, say), the other
sizes held. `kwiki check` locates a comparison that names what does not exist; the site draws one line per variant
from the median of the series' runs and says in words which variant is fastest where."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.results.comparisons import MIN_SIZES, compare_spec, leader_text
from kwiki.results.ladders import Ladder, Rung, ShapeGroup
from kwiki.site.curves import draw_compare

# ---------------------------------------------------------------- kwiki check


@pytest.fixture
def project(fixture_copy) -> Path:
    root = fixture_copy("verify/project", "project")
    manifest = root / "artifacts" / "host_ok" / "artifact.yaml"
    manifest.write_text(manifest.read_text() + "shapes:\n  - {option: sizes, dims: [n, k], values: ['512x64', "
                                               "'1024x64', '2048x64', '4099x64', '1024x128']}\n")
    return root


def _compare(project: Path, entry: str) -> None:
    page = project / "wiki" / "fixture.md"
    text = page.read_text().replace("claims:\n", f"compare:\n  - {entry}\nclaims:\n", 1)
    page.write_text(text.replace("params: {n: 1024}", "params: {n: 1024, k: 64}"))


def test_a_comparison_of_declared_variants_over_a_dim_passes(project, capsys):
    _compare(project, "{artifact: ok, over: n, at: {k: 64}, variants: [fast, baseline]}")
    assert main(["check", "--root", str(project)]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("entry, located", [
    ("{artifact: ok, over: n, variants: [fast, slowest]}",
     "wiki/fixture.md:13: compare[0].variants[1]: variant 'slowest' is not in artifacts/host_ok/artifact.yaml"),
    ("{artifact: ok, over: m, variants: [fast, slow]}",
     "wiki/fixture.md:13: compare[0].over: 'm' is not a dim of artifacts/host_ok/artifact.yaml's shapes"),
    ("{artifact: ok, over: n, at: {k: 65}, variants: [fast, slow]}",
     "wiki/fixture.md:13: compare[0].at: at {'k': 65} matches no shape of artifacts/host_ok/artifact.yaml"),
    ("{artifact: nope, over: n, variants: [fast, slow]}",
     "compare[0].artifact: compare names artifact 'nope', which is not a key of 'artifacts'"),
    ("{artifact: ok, over: n, at: {n: 1024}, variants: [fast, slow]}", "'n' is both the parameter drawn over"),
    ("{artifact: ok, over: n, variants: [fast]}", "compare[0].variants"),
    ("{artifact: ok, over: k, variants: [fast, slow]}",
     "wiki/fixture.md:13: compare[0].at: k=64 is two shapes of artifacts/host_ok/artifact.yaml ({'n': 512, 'k': 64} "
     "and {'n': 1024, 'k': 64}): hold the other dims in `at`"),
    ("{artifact: ok, over: n, at: {k: 128}, variants: [fast, slow]}",
     "wiki/fixture.md:13: compare[0].over: 1 size of n in artifacts/host_ok/artifact.yaml holds {'k': 128}: a "
     "comparison draws from 4 or more"),
])
def test_a_comparison_that_names_what_is_not_there_is_located(project, capsys, entry, located):
    _compare(project, entry)
    assert main(["check", "--root", str(project)]) == 1
    out = capsys.readouterr().out
    assert located in out and "Traceback" not in out


# ---------------------------------------------------------------- the spec and the chart


FMA = {1: 0.9, 4: 0.7, 8: 0.5, 16: 0.3, 32: 0.1, 64: 0.05}  # the CUDA-core kernel's share of the roof over M


def _run(n: int, fma_factor: float, missing: int | None = None) -> Ladder:
    """A decode GEMM ladder over M (1 to 64) at N = K = 8192, plus a shape at another N the comparison leaves out:
    `fma` loses a share of the roof as M grows (times `fma_factor` in this run), `mma` holds, `lib` a little above
    it; `lib` not measured at M = `missing`."""
    groups = []
    for m in (64, 1, 4, 8, 16, 32):  # out of order: the chart sorts by M
        for n_dim in (8192, 4096):
            fma = FMA[m]
            lib = 1 / 0.85  # the baseline's time; every row does the same work: its speed against lib is a time ratio
            rows = [Rung(variant="fma", status="measured", rate=fma * fma_factor, rate_unit="TB/s",
                         of_speed_of_light=fma * fma_factor, time_us=1 / (fma * fma_factor),
                         vs_baseline=lib * fma * fma_factor),
                    Rung(variant="mma", rung=1, status="measured", rate=0.8, rate_unit="TB/s", of_speed_of_light=0.8,
                         time_us=1 / 0.8, vs_baseline=lib * 0.8),
                    Rung(variant="lib", rung=0, role="baseline",
                         status="check-failed" if m == missing else "measured",
                         rate=0.85, rate_unit="TB/s", of_speed_of_light=0.85, time_us=lib, vs_baseline=1.0),
                    # a quarter of the bytes: a lower share of the roof, and the shortest time
                    Rung(variant="int4", status="measured", rate=0.5, rate_unit="TB/s", of_speed_of_light=0.5,
                         time_us=0.25 / 0.5, vs_baseline=lib / 0.5)]
            groups.append(ShapeGroup(params={"M": m, "N": n_dim, "K": 8192, "dtype": "bf16"}, label=f"{m}", rows=rows))
    return Ladder(artifact="decode", title="decode", gpu="NVIDIA H200", date=f"2026-12-0{n}T00:00:00Z",
                  run_id=f"r{n}", baseline="lib", groups=groups)


def test_the_comparison_draws_each_variant_over_m_from_the_median_of_the_runs_and_says_who_leads_where():
    runs = [_run(1, 0.9), _run(2, 1.0, missing=8), _run(3, 1.1)]
    spec = compare_spec(runs, "decode", "M", {"N": 8192, "K": 8192}, ["fma", "mma", "lib"])
    assert spec is not None and spec["runs"] == 3 and spec["roof"] == "the speed of light"
    assert [p["label"] for p in spec["points"]] == ["M=1", "M=4", "M=8", "M=16", "M=32", "M=64"]  # sorted by M
    first = spec["points"][0]["values"]["fma"]
    assert round(first["share"], 6) == 0.9 and first["runs"] == 3  # the median run's, not the last run's 0.99
    assert (round(first["low"], 6), round(first["high"], 6)) == (0.81, 0.99)
    assert spec["points"][2]["values"]["lib"]["runs"] == 2  # the run whose check failed at M = 8 counts in none
    assert spec["leaders"] == ["fma", "lib", "lib", "lib", "lib", "lib"]
    assert leader_text(spec) == "fma at M=1; lib from M=4 to M=64"
    fewer_bytes = compare_spec(runs, "decode", "M", {"N": 8192, "K": 8192}, ["lib", "int4"])
    assert fewer_bytes is not None and set(fewer_bytes["leaders"]) == {"int4"}  # by time, not by share of the roof
    # and drawn against the fewest bytes: the faster line is the higher one (its own share would put lib above)
    first = fewer_bytes["points"][0]["values"]
    assert fewer_bytes["rescaled"] and fewer_bytes["roof"] == "the speed of light of the fewest bytes a variant moves"
    assert round(first["int4"]["share"], 6) == 0.5 and round(first["lib"]["share"], 6) == round(0.25 * 0.85, 6)
    svg = draw_compare(spec)
    assert svg == draw_compare(spec) and svg.count(b"<polyline") == 3 and svg.count(b"<circle") == 18
    assert "M=1: fma 90.0% of the speed of light (median of 3 runs, 81.0–99.0%)".encode() in svg
    assert min(int(s) for s in re.findall(rb'font-size="(\d+)"', svg)) * 330 / 400 >= 11  # a phone's column


def test_a_comparison_with_too_few_sizes_or_a_variant_never_measured_draws_nothing_of_it():
    runs = [_run(1, 1.0)]
    assert compare_spec(runs, "decode", "M", {"N": 1}, ["fma", "mma"]) is None  # no shape holds N = 1
    kept = [g for g in runs[0].groups if g.params["M"] in (1, 4, 8, 16, 32, 64)[:MIN_SIZES - 1]]
    assert compare_spec([runs[0].model_copy(update={"groups": kept})], "decode", "M", {"N": 8192},
                        ["fma", "mma"]) is None
    assert compare_spec(runs, "decode", "M", {}, ["fma", "mma"]) is None  # two shapes at each M: never one point
    spec = compare_spec(runs, "decode", "M", {"N": 8192}, ["fma", "mma", "gone"])
    assert spec is not None and all("gone" not in p["values"] for p in spec["points"])
    assert draw_compare(spec).count(b"<polyline") == 3  # its line has no point; the other two are drawn


def test_the_page_that_names_a_comparison_draws_it_whoever_owns_the_ladder(tmp_path):
    from kwiki.site.listings import SitePage
    from kwiki.site.pages import Context, PageLadder, _curves
    from kwiki.wiki.model import PageMeta
    from kwiki.wiki.owners import Owner

    meta = PageMeta.model_validate({
        "id": "kernel-decode", "title": "Decode", "type": "kernel", "artifacts": {"mma": "artifacts/decode"},
        "compare": [{"artifact": "mma", "over": "M", "at": {"N": 8192, "K": 8192}, "variants": ["fma", "mma"]}]})
    sp = SitePage(page=None, rel="kernels/decode.md", meta=meta, standing=None)
    runs = [_run(1, 0.9), _run(2, 1.0), _run(3, 1.1)]
    other = Owner(rel="kernels/other.md", title="Other", page_id="other")
    ladders = [PageLadder("artifacts/decode", runs[-1], [], other, runs)]
    ctx = Context(root=tmp_path, records={})
    text = _curves(ctx, sp, ladders)
    assert "Across sizes" in text and "*Fastest at each M on NVIDIA H200 (medians of 3 runs): fma at M=1; " \
                                      "mma from M=4 to M=64.*" in text
    (path,) = ctx.files
    assert "compare-0-decode-nvidia-h200" in path and ctx.files[path].count(b"<polyline") == 2
    meta.compare.clear()
    assert _curves(Context(root=tmp_path, records={}), sp, ladders) == ""  # the chart is the page's comparison


def test_a_curve_whose_baseline_moves_more_bytes_draws_it_against_the_rungs_bytes():
    """An int4 rung at half its roof is twice as fast as a bf16 library at 90% of its own (four times the bytes): the
    curve must draw the rung above the library, both against the time of the int4 bytes at the roof."""
    from kwiki.site.curves import curve_specs, draw_curve

    def ladder(vs: float) -> Ladder:
        groups = []
        for n in (1024, 2048, 4096, 8192):
            rows = [Rung(variant="lib", rung=0, role="baseline", status="measured", time_us=4 / 0.9, rate=0.9,
                         rate_unit="TB/s", of_speed_of_light=0.9, vs_baseline=1.0),
                    Rung(variant="int4", rung=1, status="measured", time_us=1 / 0.5, rate=0.5, rate_unit="TB/s",
                         of_speed_of_light=0.5, vs_baseline=vs)]
            groups.append(ShapeGroup(params={"M": 16, "N": n, "K": 4096, "dtype": "w4a16"}, label=str(n), rows=rows))
        return Ladder(artifact="w4", title="w4", gpu="NVIDIA H200", date="2026-12-04T00:00:00Z", baseline="lib",
                      groups=groups)

    (spec,) = curve_specs(ladder(vs=(4 / 0.9) / 2))  # the same work (the same FLOPs): the speed is a time ratio
    point = spec["points"][0]
    assert spec["rescaled"] and round(point["best"], 6) == 0.5 and round(point["base"], 6) == round(0.9 / 4, 6)
    assert b"over their own time" in draw_curve(spec)  # the legend says how the baseline is drawn
    # a read beside a copy (other work: the ladder's speed is a ratio of bandwidths): each keeps its own share
    (other,) = curve_specs(ladder(vs=0.5 / 0.9))
    assert not other["rescaled"] and round(other["points"][0]["base"], 6) == 0.9


# ---------------------------------------------------------------- agents: get_ladder / kwiki show --ladder


def test_an_agent_reading_the_decode_pages_ladders_gets_its_comparison_the_fastest_at_each_m_by_time():
    """The decode GEMM page compares the CUDA-core kernel, the tensor-core kernel and cuBLAS(Lt) over M: an agent
    asking for the page's ladders is told which is fastest at each M, each variant's median time beside it, in the
    document the schema describes; a question about one shape gets that shape's rows only."""
    from kwiki.agents.outputs import LadderOutput
    from kwiki.agents.show import page_ladders

    repo = Path(__file__).resolve().parent.parent
    doc = page_ladders(repo, "kernel-gemm-decode")
    LadderOutput.model_validate(doc)
    (comp,) = doc["comparisons"]
    assert comp["over"] == "M" and comp["artifact"] == "decode_mma_sm90a" and comp["runs"] >= 1
    assert [p["at"] for p in comp["points"]] == [f"M={m}" for m in (1, 4, 8, 16, 32, 64)]
    for point in comp["points"]:
        assert set(point["time_us"]) <= {"fma_rows", "mma_tuned", "cublaslt_best", "cublas"}
        assert point["fastest"] == min(point["time_us"], key=point["time_us"].get)
    assert comp["fastest"].split(" ")[0] == comp["points"][0]["fastest"]
    assert "comparisons" not in page_ladders(repo, "kernel-gemm-decode", "16x8192x8192")
