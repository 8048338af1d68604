"""cublaslt_fp8_block_sm90a (issue 35): cuBLASLt's own VEC128 / BLK128x128 fp8 block scaling, called directly, beside
its per-tensor fp8 GEMM, on page kernel-fp8-gemm. Without a GPU: the manifest holds a shape off the 128 blocks and
the page's claims select its variants at its shapes; compiled with nvcc, the binary lists the manifest's variants and
refuses, before any CUDA call, a shape whose K ends in a partial scale group or whose M or N the library's 16-byte
alignment does not take. Whether cuBLASLt runs the modes on sm_90, and how fast, only the H200 says (kwiki verify)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cuda_artifact import build, lists_its_manifest, run_without_gpu

from kwiki.wiki.manifest import Manifest, load_manifest
from kwiki.wiki.pages import load_page

REPO = Path(__file__).resolve().parent.parent
ARTIFACT = REPO / "artifacts" / "cublaslt_fp8_block_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "kernels" / "fp8-gemm.md"
SOURCE = ARTIFACT / "cublaslt_fp8_block.cu"


def manifest() -> Manifest:
    return load_manifest(ARTIFACT, REPO)


def shapes() -> list[tuple[int, int, int]]:
    return [tuple(map(int, v.split("x"))) for v in manifest().shapes[0].values]  # type: ignore[misc]


def test_the_ladder_is_the_per_tensor_baseline_and_the_block_scaled_call_with_a_shape_off_the_blocks():
    m = manifest()
    assert [v.name for v in m.variants] == ["lt_tensor", "lt_block"] and m.baseline == "lt_tensor"
    # whole 128-groups of K everywhere (the modes take no partial group), M and N off the 128 blocks somewhere
    assert all(k % 128 == 0 and mm % 16 == 0 and n % 16 == 0 for mm, n, k in shapes())
    assert any(mm % 128 and n % 128 for mm, n, _ in shapes())
    small = [a.removeprefix("--shapes=") for a in m.sanitize.args if a.startswith("--shapes=")]
    assert small and all(int(d) % 128 for d in small[0].split("x")[:2])  # memcheck's shape: off the blocks too


def test_the_page_names_the_artifact_and_its_claims_select_its_variants_at_its_shapes():
    page = load_page(PAGE, REPO)
    assert page.meta.artifacts["lt"] == "artifacts/cublaslt_fp8_block_sm90a"
    names, values = {v.name for v in manifest().variants}, set(shapes())
    mine = [c for c in page.meta.claims if c.measure is not None and c.measure.artifact == "lt"]
    assert {c.id for c in mine} >= {"lt-block-runs-off-tile", "lt-block-vs-tensor-8192"}
    for c in mine:
        for sel in (c.measure.of, c.measure.per):
            if sel is None:
                continue
            assert sel.variant in names
            assert (sel.params["M"], sel.params["N"], sel.params["K"]) in values


def test_the_mode_values_are_the_public_headers():
    # cublasLt.h (CUDA 12.9 and 13): A_SCALE_MODE 31, B_SCALE_MODE 32, VEC128_32F 4, BLK128x128_32F 5; a wrong value
    # asks cuBLASLt for another mode (VEC16_UE4M3 is 1, OUTER_VEC_32F 3), which the check would then fail on the GPU
    text = SOURCE.read_text()
    declared = dict(re.findall(r"constexpr int(?:32_t)? (k\w+) = (\d+);", text))
    assert {k: declared[k] for k in ("kDescAScaleMode", "kDescBScaleMode", "kScaleVec128", "kScaleBlk128")} == {
        "kDescAScaleMode": "31", "kDescBScaleMode": "32", "kScaleVec128": "4", "kScaleBlk128": "5"}


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory, ARTIFACT, SOURCE.name)


@pytest.mark.nvcc
def test_the_binary_lists_the_manifests_variants_and_shapes_before_any_cuda_call(binary):
    lists_its_manifest(binary, manifest())


@pytest.mark.nvcc
@pytest.mark.parametrize("shape", ["4096x4096x4000", "4000x4040x4096", "4004x4048x4096"])
def test_a_shape_the_modes_do_not_take_is_refused_before_any_cuda_call(binary, shape):
    res = run_without_gpu(binary, f"--shapes=4096x4096x4096,{shape}")
    assert res.returncode == 2 and res.stdout == ""
    assert "usage error: --shapes wants MxNxK,... with M and N multiples of 16, K of 128" in res.stderr
