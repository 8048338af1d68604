"""ws_timeline_sm90a (issue 30, item 6): a warp-specialized GEMM whose untimed trace pass writes a Timeline line.

Without a GPU: the manifest loads; the source names every phase as kwiki.results.timelines.Phase does; and,
compiled with nvcc, the artifact's own trace writer (fed the stamps a schedule leaves, by
tests/fixtures/ws_timeline_host) prints a line Timeline accepts, refuses a trace whose counts or times are wrong,
and counts the spans past a lane's capacity; the binary lists the manifest's variants and shapes; and the timed
kernel reads no %globaltimer where the traced one does. The kernels themselves run only on an H200 (kwiki verify,
and the trace pass)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import get_args

import pytest
import yaml
from sass_text import sass_of

from kwiki.core.errors import ManifestError
from kwiki.results.timelines import Phase, Timeline
from kwiki.wiki.manifest import Manifest, load_manifest

REPO = Path(__file__).resolve().parent.parent
ARTIFACT = REPO / "artifacts" / "ws_timeline_sm90a"
SOURCE = ARTIFACT / "ws_timeline.cu"
HOST_TEST = REPO / "tests" / "fixtures" / "ws_timeline_host" / "trace_host_test.cu"


def manifest() -> Manifest:
    """The artifact's manifest. Until the `trace` field reaches kwiki's Manifest (the trace pass's own branch), the
    loader must refuse that one key and nothing else: the rest is validated without it."""
    if "trace" in Manifest.model_fields:
        return load_manifest(ARTIFACT, REPO)
    with pytest.raises(ManifestError) as err:
        load_manifest(ARTIFACT, REPO)
    assert err.value.field == "trace", err.value.message
    data = yaml.safe_load((ARTIFACT / "artifact.yaml").read_text())
    del data["trace"]
    return Manifest.model_validate(data)


def constant(name: str) -> int:
    """An integer constexpr of the artifact's source (`constexpr int ... NAME = 8192`)."""
    m = re.search(rf"\b{name} = (\d+)\b", SOURCE.read_text())
    assert m, name
    return int(m.group(1))


def test_the_manifest_declares_the_timed_variant_and_a_trace_pass_at_one_of_its_shapes():
    m = manifest()
    assert [v.name for v in m.variants] == ["ws_persistent"]
    assert m.build.sources == ["ws_timeline.cu"]
    args = yaml.safe_load((ARTIFACT / "artifact.yaml").read_text())["trace"]["args"]
    assert "--trace-out={out}" in args
    shapes = [a.removeprefix("--shape=") for a in args if a.startswith("--shape=")]
    assert len(shapes) == 1 and shapes[0] in m.shapes[0].values
    # one shape off the tile in M, N and K (128 x 256 x 64)
    assert any(M % 128 and N % 256 and K % 64 for M, N, K in (map(int, v.split("x")) for v in m.shapes[0].values))


def test_the_source_names_every_phase_as_the_timeline_does_in_the_order_of_its_enum():
    text = SOURCE.read_text()
    names = re.search(r"kPhaseNames\[\] = \{([^}]*)\}", text)
    enum = re.search(r"enum Phase : int \{([^}]*)\}", text)
    assert names and enum
    written = re.findall(r'"([^"]+)"', names.group(1))
    # a phase renamed in kwiki/results/timelines.py fails here; softmax is the attention kernels' (a GEMM has none)
    assert sorted(written) == sorted(set(get_args(Phase)) - {"softmax"})
    # kPhaseNames[phase] is how a stamp's enum value becomes its name: kTmaIssue must sit where "tma-issue" does
    kebab = [re.sub(r"(?<!^)([A-Z])", r"-\1", e.strip().removeprefix("k")).lower() for e in enum.group(1).split(",")]
    assert kebab == written


# ---------------------------------------------------------------- compiled (nvcc), run without a GPU


@pytest.fixture(scope="module")
def host_test(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/fixtures/ws_timeline_host/trace_host_test.cu (the artifact's source, its main renamed) built with the
    manifest's flags for sm_90a."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path_factory.mktemp("ws_timeline") / "trace_host_test"
    flags = yaml.safe_load((ARTIFACT / "artifact.yaml").read_text())["build"]["flags"]
    subprocess.run([nvcc, *flags, "-gencode=arch=compute_90a,code=sm_90a", f"-I{REPO / 'artifacts' / 'common'}",
                    f"-I{ARTIFACT}", "-o", str(out), str(HOST_TEST)], check=True, capture_output=True, timeout=600)
    return out


def run(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.nvcc
def test_the_trace_line_is_a_timeline_with_every_lane_of_the_first_two_ctas(host_test):
    res = run(host_test, "good")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("\n") == 1  # one JSON line
    t = Timeline.model_validate_json(res.stdout)
    assert (t.artifact, t.variant, t.gpu, t.run_id) == ("ws_timeline_sm90a", "ws_persistent", None, None)
    assert t.params["shape"] == "1000x1000x1016" and t.params["spans_dropped"] == 0
    lanes = {(s.block, s.warpgroup) for s in t.spans}
    assert lanes == {(b, w) for b in range(2) for w in range(3)}
    assert {s.phase for s in t.spans if s.warpgroup == 0} == {"producer-wait", "tma-issue"}
    assert {s.phase for s in t.spans if s.warpgroup > 0} == {"consumer-wait", "wgmma", "epilogue"}
    # CTA 0 of a grid of 3 walks 11 of the 32 tiles, 16 k-blocks each: 2 spans a k-block, + drain and epilogue
    assert sum(s.block == 0 and s.warpgroup == 0 for s in t.spans) == 11 * 16 * 2
    assert sum(s.block == 0 and s.warpgroup == 1 for s in t.spans) == 11 * (16 * 2 + 2)


@pytest.mark.nvcc
@pytest.mark.parametrize("mode, why", [("miscount", "CTA 1 warpgroup 1 stamped 373 spans, its schedule has 374"),
                                       ("backwards", "CTA 0 warpgroup 2 span 3 is malformed")])
def test_a_trace_whose_counts_or_times_are_wrong_is_refused_and_nothing_is_printed(host_test, mode, why):
    res = run(host_test, mode)
    assert res.returncode == 1
    assert res.stdout == ""
    assert why in res.stderr


@pytest.mark.nvcc
def test_a_lane_past_its_capacity_keeps_its_first_spans_and_counts_the_rest(host_test):
    res = run(host_test, "overflow")  # one CTA walks all 512 tiles of 4096^3, 64 k-blocks each
    assert res.returncode == 0, res.stderr
    t = Timeline.model_validate_json(res.stdout)
    cap = constant("kLaneCapacity")
    per_lane = {w: sum(s.warpgroup == w for s in t.spans) for w in range(3)}
    assert per_lane == {0: cap, 1: cap, 2: cap}
    stamped = 512 * 64 * 2 + 2 * 512 * (64 * 2 + 2)
    assert t.params["spans_dropped"] == stamped - 3 * cap
    assert {s.block for s in t.spans} == {0}


@pytest.mark.nvcc
def test_the_binary_lists_the_manifests_variants_and_shapes_before_any_cuda_call(host_test):
    m = manifest()
    res = run(host_test, "--list-variants")
    assert res.returncode == 0 and res.stdout.split() == [v.name for v in m.variants]
    res = run(host_test, m.shapes[0].arg(), "--list-shapes=shapes")
    assert res.returncode == 0 and res.stdout.split() == m.shapes[0].values


@pytest.mark.nvcc
@pytest.mark.parametrize("args, why", [
    (["--trace-out=t.jsonl", "--shape=4096x4096x4095"], "K a multiple of 8"),
    (["--trace-out=t.jsonl", "--shape=4096x4096x4096,8192x8192x8192"], "wants one --shape"),
    (["--trace-out=", "--shape=4096x4096x4096"], "wants a file path"),
    (["--trace-out", "--shape=4096x4096x4096"], "wants a file path"),  # a flag alone reads as "1"
])
def test_a_trace_pass_without_one_launchable_shape_or_a_path_is_a_usage_error(host_test, tmp_path, args, why):
    res = subprocess.run([str(host_test), *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 2 and why in res.stderr
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.nvcc
def test_the_timed_kernel_reads_no_globaltimer_and_passes_its_sass_expectations_where_the_traced_one_fails(host_test):
    from kwiki.verify.sass import check_variant, disassemble, find_tools

    sass = sass_of(host_test)
    timed = next(t for n, t in sass.items() if n.startswith("_Z7ws_gemmILb0E"))
    traced = next(t for n, t in sass.items() if n.startswith("_Z7ws_gemmILb1E"))
    assert "SR_GLOBALTIMER" not in timed
    assert "SR_GLOBALTIMER" in traced
    tools = find_tools()
    assert tools is not None
    kernels, _ = disassemble(host_test, tools)
    variant = manifest().variants[0]
    assert check_variant(variant, "sm_90a", kernels, {})[1] == []
    as_traced = variant.model_copy(update={"kernels": ["*ws_gemm<true>(*"]})
    mismatches = check_variant(as_traced, "sm_90a", kernels, {})[1]
    assert len(mismatches) == 1 and "ws_gemm<true>" in mismatches[0] and "forbid 'STG.64'" in mismatches[0]
