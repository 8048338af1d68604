"""attention_timeline_sm90a (issue 33): the FlashAttention-3-style CUDA rungs with an untimed trace pass.

Without a GPU: the manifest loads, declares the trace at one of its shapes and names the attention page's CUDA rungs;
the source names every phase as kwiki.results.timelines.Phase does, in the order of the header's enum; compiled
with nvcc, the artifact's own trace writer (fed the stamps a schedule leaves, by tests/fixtures/attention_timeline_host)
prints a line Timeline accepts and refuses a trace whose counts or phases are wrong; the binary lists the manifest's
variants and shapes; the timed kernels (this binary's and fa3.cu's exported ones) carry no stamp where the traced
ones do. The kernels themselves run only on an H200 (kwiki verify, and the trace pass)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import get_args

import pytest
import yaml
from sass_text import sass_of

from kwiki.results.timelines import Phase, Timeline
from kwiki.wiki.manifest import load_manifest

REPO = Path(__file__).resolve().parent.parent
ARTIFACT = REPO / "artifacts" / "attention_timeline_sm90a"
SOURCE = ARTIFACT / "attention_timeline.cu"
HEADER = REPO / "artifacts" / "common" / "fa3_attention.cuh"
FA3 = REPO / "artifacts" / "attention_fwd_bf16_sm90a"
HOST_TEST = REPO / "tests" / "fixtures" / "attention_timeline_host" / "trace_host_test.cu"
MODES = ["cuda_fa3_ws", "cuda_fa3_pingpong", "cuda_fa3_overlap"]


def test_the_manifest_declares_the_attention_rungs_and_a_trace_pass_at_one_of_its_shapes():
    m = load_manifest(ARTIFACT, REPO)
    assert [v.name for v in m.variants] == MODES
    attention = {v.name for v in load_manifest(FA3, REPO).variants}
    assert set(MODES) <= attention  # the timelines are drawn under the attention page's rungs of these names
    assert m.trace is not None and "--trace-out={out}" in m.trace.args
    shapes = [a.removeprefix("--shape=") for a in m.trace.args if a.startswith("--shape=")]
    assert shapes == ["4x16x4096"] and shapes[0] in m.shapes[0].values
    assert any(int(v.split("x")[2]) % 128 for v in m.shapes[0].values)  # one seq off the 128 tile
    sanitize = yaml.safe_load((ARTIFACT / "artifact.yaml").read_text())["sanitize"]["args"]
    assert any(a.startswith("--shapes=") and int(a.split("x")[-1]) % 128 for a in sanitize)
    page = (REPO / "wiki" / "nvidia" / "kernels" / "attention-fwd.md").read_text()
    assert "timeline: artifacts/attention_timeline_sm90a" in page.split("\n---", 2)[0]


def test_the_source_names_every_phase_as_the_timeline_does_in_the_order_of_the_headers_enum():
    names = re.search(r"kPhaseNames\[\] = \{([^}]*)\}", SOURCE.read_text())
    enum = re.search(r"enum TracePhase : int \{([^}]*)\}", HEADER.read_text())
    assert names and enum
    written = re.findall(r'"([^"]+)"', names.group(1))
    assert sorted(written) == sorted(get_args(Phase))  # a phase renamed in kwiki/results/timelines.py fails here
    kebab = [re.sub(r"(?<!^)([A-Z])", r"-\1", e.strip().removeprefix("k")).lower() for e in enum.group(1).split(",")]
    assert kebab == written
    modes = re.search(r"kModeVariants\[\] = \{([^}]*)\}", SOURCE.read_text())
    assert modes and re.findall(r'"([^"]+)"', modes.group(1)) == MODES  # fa3::Mode's order: WS, PINGPONG, OVERLAP


def test_the_site_draws_the_softmax_phase_in_its_legend_where_a_timeline_has_it():
    from kwiki.site.timeline import PHASE_COLORS, Span, draw_timeline, timeline_spec

    assert list(PHASE_COLORS) == list(get_args(Phase))  # a colour for every phase, in its order
    spans = [Span(block=0, warpgroup=1, phase=p, start_ns=1000 + 100 * i, end_ns=1100 + 100 * i, tile=0)
             for i, p in enumerate(["consumer-wait", "wgmma", "softmax", "epilogue"])]
    attention = Timeline(artifact="attention_timeline_sm90a", variant="cuda_fa3_ws", spans=spans)
    gemm = attention.model_copy(update={"spans": [s for s in spans if s.phase != "softmax"]})
    swatch = f'fill="{PHASE_COLORS["softmax"]}"/>'.encode()  # a legend swatch (a span's rect holds a tooltip)
    svg = draw_timeline(timeline_spec(attention))
    assert swatch in svg and b">softmax<" in svg and b"CTA 0 WG 1: softmax, tile 0" in svg
    svg = draw_timeline(timeline_spec(gemm))
    assert swatch not in svg and b">softmax<" not in svg  # a GEMM's legend has no softmax (its charts unchanged)


# ---------------------------------------------------------------- compiled (nvcc), run without a GPU


def nvcc_build(out: Path, source: Path, *extra: str) -> Path:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    flags = yaml.safe_load((ARTIFACT / "artifact.yaml").read_text())["build"]["flags"]
    subprocess.run([nvcc, *flags, "-gencode=arch=compute_90a,code=sm_90a", f"-I{REPO / 'artifacts' / 'common'}",
                    f"-I{ARTIFACT}", *extra, "-o", str(out), str(source)], check=True, capture_output=True, timeout=900)
    return out


@pytest.fixture(scope="module")
def host_test(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture (the artifact's source, its main renamed) built with the manifest's flags for sm_90a."""
    return nvcc_build(tmp_path_factory.mktemp("attention_timeline") / "trace_host_test", HOST_TEST)


@pytest.fixture(scope="module")
def fa3_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fa3.cu as kwiki builds it for the attention artifact: a shared library."""
    return nvcc_build(tmp_path_factory.mktemp("fa3") / "libfa3.so", FA3 / "fa3.cu", "-shared", "-Xcompiler", "-fPIC")


def run(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.nvcc
@pytest.mark.parametrize("mode", range(3))
def test_the_trace_line_is_a_timeline_with_every_lane_of_the_traced_ctas(host_test, mode):
    res = run(host_test, "good", str(mode))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("\n") == 1  # one JSON line a mode
    t = Timeline.model_validate_json(res.stdout)
    assert (t.artifact, t.variant, t.gpu, t.run_id) == ("attention_timeline_sm90a", MODES[mode], None, None)
    assert t.params["shape"] == "1x2x1000" and t.params["spans_dropped"] == 0 and t.params["seq"] == 1000
    assert {(s.block, s.warpgroup) for s in t.spans} == {(b, w) for b in range(4) for w in range(3)}
    assert {s.phase for s in t.spans if s.warpgroup == 0} == {"producer-wait", "tma-issue"}
    assert {s.phase for s in t.spans if s.warpgroup > 0} == {"consumer-wait", "wgmma", "softmax", "epilogue"}
    # 8 key tiles: the producer Q + 4 a tile; a consumer 3 a tile + 3 (the overlap 2 more for each tile after the first)
    assert sum(s.block == 0 and s.warpgroup == 0 for s in t.spans) == 1 + 4 * 8
    assert sum(s.block == 0 and s.warpgroup == 1 for s in t.spans) == 3 * 8 + 3 + (2 * 7 if mode == 2 else 0)
    assert all(s.end_ns - s.start_ns == 10 and 0 <= (s.tile or 0) < 8 for s in t.spans)  # unpacked as packed


@pytest.mark.nvcc
@pytest.mark.parametrize("what, why", [("miscount", "CTA 1 warpgroup 1 stamped 26 spans, its schedule has 27"),
                                       ("badphase", "CTA 0 warpgroup 2 span 3 is malformed")])
def test_a_trace_whose_counts_or_phases_are_wrong_is_refused_and_nothing_is_printed(host_test, what, why):
    res = run(host_test, what, "1")
    assert res.returncode == 1
    assert res.stdout == ""
    assert why in res.stderr


@pytest.mark.nvcc
def test_the_binary_lists_the_manifests_variants_and_shapes_before_any_cuda_call(host_test):
    m = load_manifest(ARTIFACT, REPO)
    res = run(host_test, "--list-variants")
    assert res.returncode == 0 and res.stdout.split() == MODES
    res = run(host_test, m.shapes[0].arg(), "--list-shapes=shapes")
    assert res.returncode == 0 and res.stdout.split() == m.shapes[0].values


@pytest.mark.nvcc
@pytest.mark.parametrize("args, why", [
    (["--trace-out=t.jsonl", "--shape=1x2x40000"], "seq <= 32768"),
    (["--trace-out=t.jsonl", "--shape=4x16x4096,2x4x1000"], "wants one --shape"),
    (["--trace-out=", "--shape=4x16x4096"], "wants a file path"),
])
def test_a_trace_pass_without_one_launchable_shape_or_a_path_is_a_usage_error(host_test, tmp_path, args, why):
    res = subprocess.run([str(host_test), *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 2 and why in res.stderr
    assert not (tmp_path / "t.jsonl").exists()


def stamps(sass: str) -> tuple[int, int]:
    """(%globaltimer reads, 16-byte global stores) of one kernel's SASS: the trace's two marks."""
    return sass.count("SR_GLOBALTIMER"), len(re.findall(r"\bSTG\.\S*128\b", sass))


@pytest.mark.nvcc
def test_the_exported_attention_kernels_carry_no_stamps(fa3_library):
    sass = sass_of(fa3_library)
    names = {f"fa3_{mode}_kernel{d}" for mode in ("ws", "pingpong", "overlap") for d in ("", "_d64")}
    assert {n for n in sass if n.startswith("fa3_")} == names  # head dims 128 and 64
    for name in names:
        assert stamps(sass[name]) == (0, 0), name


@pytest.mark.nvcc
def test_the_timed_kernels_pass_their_sass_expectations_and_the_traced_ones_stamp_and_fail_them(host_test):
    from kwiki.verify.sass import check_variant, disassemble, find_tools

    sass = sass_of(host_test)
    for mode in range(3):
        timed = next(t for n, t in sass.items() if n.startswith(f"_Z16attention_kernelILi{mode}ELb0E"))
        traced = next(t for n, t in sass.items() if n.startswith(f"_Z16attention_kernelILi{mode}ELb1E"))
        assert stamps(timed) == (0, 0)
        reads, stores = stamps(traced)
        assert reads > 0 and stores == (16 if mode == 2 else 14)  # a store per stamp site: 5 producer, 9 or 11 consumer
    tools = find_tools()
    assert tools is not None
    kernels, _ = disassemble(host_test, tools)
    for mode, variant in enumerate(load_manifest(ARTIFACT, REPO).variants):
        assert check_variant(variant, "sm_90a", kernels, {})[1] == [], variant.name
        as_traced = variant.model_copy(update={"kernels": [f"*attention_kernel<{mode}, true>(*"]})
        mismatches = check_variant(as_traced, "sm_90a", kernels, {})[1]
        assert len(mismatches) == 1 and "forbid 'STG.128'" in mismatches[0], mismatches
