"""fp8_quant_sm90a (issues 31 and 35): bf16 quantized to e4m3 per tensor, per token, per 1 x 128 group and per 128 x 128
block, the artifact behind technique-fp8-quantization.

Without a GPU: the manifest's ladder and shapes (one off every group and block, and DeepSeek-V3's hidden size), the
page's claims at its shapes and variants; compiled with nvcc, the binary lists the manifest's variants and shapes and
refuses a row it cannot hold before any CUDA call, and each rung's SASS expectation fails on the rung below it. The
shared header's host arithmetic (what the artifact's host check recomputes codes with) rounds as torch's e4m3 cast does,
saturates at 448 where a plain cast would not, and keeps an all-zero group's scale finite. The kernels run only on an
H200 (kwiki verify), checked bit for bit against the GPU reference."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cuda_artifact import build, host_program, run_without_gpu, rung_checks, sass_kernels

from kwiki.wiki.manifest import Manifest, load_manifest
from kwiki.wiki.pages import load_page

REPO = Path(__file__).resolve().parent.parent
ARTIFACT = REPO / "artifacts" / "fp8_quant_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "techniques" / "fp8-quantization.md"
FIGURES = {"q_rel_rms", "q_row_rel_rms", "q_flushed"}  # the error extras the binary's records carry


def manifest() -> Manifest:
    return load_manifest(ARTIFACT, REPO)


def test_the_ladder_goes_from_one_scale_to_finer_groups_under_the_copy_roof():
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants] == [
        ("per_tensor", 1), ("per_token", 2), ("per_group", 3), ("per_block", 4), ("copy", None)]
    assert (m.baseline, m.ceiling) == ("per_tensor", "copy")
    assert m.fresh_inputs is True
    shapes = [tuple(map(int, v.split("x"))) for v in m.shapes[0].values]
    assert (8192, 7168) in shapes  # the claims' shape
    assert any(rows % 128 and hidden % 128 for rows, hidden in shapes)  # a partial group and a partial block
    assert all(hidden % 8 == 0 and hidden <= 32768 for _, hidden in shapes)
    small = [a.removeprefix("--shapes=") for a in m.sanitize.args if a.startswith("--shapes=")]
    assert small and all(int(r) % 128 and int(h) % 128 for r, h in (s.split("x") for s in small[0].split(",")))
    per_tensor = next(v for v in m.variants if v.name == "per_tensor")
    assert len(per_tensor.kernels) == 2  # the amax pass and the coding pass, both seen by the identity gate


def test_the_page_owns_the_artifact_and_its_claims_select_its_variants_figures_and_shapes():
    page = load_page(PAGE, REPO)
    assert page.meta.artifacts["quant"] == "artifacts/fp8_quant_sm90a"
    assert "quant" in page.meta.owns and page.meta.headline == "group-copy-roof-8192x7168"
    names = {v.name for v in manifest().variants}
    values = {tuple(map(int, v.split("x"))) for v in manifest().shapes[0].values}
    mine = [c for c in page.meta.claims if c.measure is not None and c.measure.artifact == "quant"]
    assert len(mine) >= 8
    figures = set()
    for c in mine:
        for sel in (c.measure.of, c.measure.per):
            if sel is None:
                continue
            assert sel.variant in names
            assert (sel.params["rows"], sel.params["hidden"]) in values
            figures.add(sel.figure)
            if sel.figure in FIGURES:
                assert sel.variant != "copy"  # the copy's record carries no error figures
    assert {"q_rel_rms", "q_flushed", "gb_per_s", "time_us"} <= figures
    assert "Not here yet: a measured error table" not in PAGE.read_text()


# ---------------------------------------------------------------- compiled (nvcc), run without a GPU


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory, ARTIFACT, "fp8_quant.cu")


@pytest.mark.nvcc
def test_the_binary_lists_the_manifests_variants_and_shapes_before_any_cuda_call(binary):
    m = manifest()
    res = run_without_gpu(binary, "--list-variants")
    assert res.returncode == 0 and res.stdout.split() == [v.name for v in m.variants], res.stderr
    res = run_without_gpu(binary, m.shapes[0].arg(), "--list-shapes=shapes")
    assert res.returncode == 0 and res.stdout.split() == m.shapes[0].values, res.stderr


@pytest.mark.nvcc
@pytest.mark.parametrize("shapes, bad, why", [
    ("8192x7168,1001x5001", "1001x5001", "hidden 5001 is not a multiple of 8"),
    ("8x32776", "8x32776", "hidden 32776 is above 32768"),
])
def test_a_row_the_kernels_cannot_hold_is_refused_by_name_before_any_cuda_call(binary, shapes, bad, why):
    res = run_without_gpu(binary, f"--shapes={shapes}")
    assert res.returncode == 2 and res.stdout == ""
    assert f"fp8_quant: --shapes: {bad}: {why}" in res.stderr


@pytest.mark.nvcc
@pytest.mark.parametrize("rung, below, words", [
    ("per_token", "per_tensor", "require 'F2FP.SATFINITE.E4M3.F32 >= 4'"),  # the amax kernel codes nothing
    ("per_group", "per_token", "forbid 'BAR.SYNC'"),                          # a group's amax without a barrier
    ("per_block", "per_group", "require 'BAR.SYNC'"),                         # a block's amax across the CTA
])
def test_each_rungs_sass_expectation_holds_on_it_and_fails_on_the_rung_below(binary, rung, below, words):
    own, mismatches = rung_checks(manifest().variants, sass_kernels(binary), rung, below)
    assert own == []
    assert any(words in m for m in mismatches), mismatches


@pytest.mark.nvcc
def test_no_kernel_spills(binary):
    from kwiki.verify.sass import check_variant

    kernels = sass_kernels(binary)
    for v in manifest().variants:
        if v.sass is not None:
            assert {"STL", "LDL"} <= set(v.sass.forbid), v.name
            assert check_variant(v, "sm_90a", kernels, {})[1] == [], v.name


# ---------------------------------------------------------------- the shared header's host arithmetic

_HOST = r"""
#include "kwiki_fp8.cuh"
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {  // argv: inv, then values; prints each code, then scale_of(0) and scale_of(896)
    const float inv = std::strtof(argv[1], nullptr);
    for (int i = 2; i < argc; ++i) std::printf("%d\n", int(kwiki::fp8::e4m3(std::strtof(argv[i], nullptr), inv)));
    std::printf("%.9g\n%.9g\n", double(kwiki::fp8::scale_of(0.0f)), double(kwiki::fp8::scale_of(896.0f)));
    for (int c = 0; c < 256; ++c)  // the decode of every code, NaN printed as nan
        std::printf("%.9g\n", double(kwiki::fp8::e4m3_value(uint8_t(c))));
    return 0;
}
"""


@pytest.fixture(scope="module")
def fp8_host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return host_program(tmp_path_factory, "fp8_host", _HOST)


@pytest.mark.nvcc
def test_the_host_code_rounds_as_torchs_e4m3_cast_saturates_and_keeps_zero_groups_finite(fp8_host):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(7)
    values = torch.cat([torch.randn(400, generator=g) * 2.0 ** torch.randint(-12, 10, (400,), generator=g),
                        torch.tensor([0.0, -0.0, 448.0, -448.0, 464.0, 1e4, -1e4, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11,
                                      2.0 ** -11, 0.3125, 0.34375])])  # ties, subnormals, past 448
    inv = 0.75
    out = subprocess.run([str(fp8_host), repr(inv), *[repr(float(v)) for v in values]], capture_output=True,
                         text=True, check=True, timeout=60).stdout.split()
    codes = [int(c) for c in out[:len(values)]]
    # torch's cast does not saturate: clamp first
    scaled = (values.float() * torch.tensor(inv, dtype=torch.float32)).clamp(-448.0, 448.0)
    want = scaled.to(torch.float8_e4m3fn).view(torch.uint8).tolist()
    assert codes == want
    assert codes[len(values) - 13 + 5] == 0x7E and codes[len(values) - 13 + 6] == 0xFE  # +-1e4 * 0.75 saturate to +-448
    zero_scale, scale = float(out[len(values)]), float(out[len(values) + 1])
    assert 0.0 < zero_scale < 1e-13 and scale == 2.0  # max(amax, 1e-12) / 448: finite for an all-zero group
    decoded = [float(v) for v in out[len(values) + 2:]]
    table = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float().tolist()
    assert len(decoded) == 256
    assert all((a != a and b != b) or a == b for a, b in zip(decoded, table, strict=True))  # NaN at 0x7F and 0xFF
