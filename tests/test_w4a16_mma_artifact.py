"""w4a16_mma_sm90a (issue 37, item 3): the CUDA W4A16 ladder of page kernel-gemm-weight-only.

Without a GPU: the manifest loads with its ladder and a shape off every tile, the page's claims name its variants
at its shapes, and, compiled with nvcc, the binary lists the manifest's variants and shapes, refuses a shape its
kernels cannot hold (naming it) before any CUDA call, and each rung's SASS expectation holds on it and fails on the
rung below, so it proves the mechanism the rung adds; no configuration spills. The kernels themselves run only on
an H200 (kwiki verify), where each is checked against an fp64 reference before it is timed."""

from __future__ import annotations

from pathlib import Path

import pytest
from cuda_artifact import build, run_without_gpu, rung_checks, sass_kernels

from kwiki.wiki.manifest import Manifest, load_manifest
from kwiki.wiki.pages import load_page

REPO = Path(__file__).resolve().parent.parent
ARTIFACT = REPO / "artifacts" / "w4a16_mma_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "kernels" / "gemm-weight-only.md"


def manifest() -> Manifest:
    return load_manifest(ARTIFACT, REPO)


def test_the_ladder_and_a_shape_off_every_tile():
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants] == [
        ("w4_warp", 1), ("w4_ring", 2), ("w4_wide", 3), ("w4_smem", 4), ("w4_async", 5), ("w4_lean", 6),
        ("w4_tuned", 7), ("cublas", 0), ("cublaslt_best", 0), ("read_ceiling", None)]
    assert (m.baseline, m.ceiling) == ("cublas", "read_ceiling")
    shapes = [tuple(map(int, v.split("x"))) for v in m.shapes[0].values]
    assert all(1 <= mm <= 16 and k % 128 == 0 for mm, _, k in shapes)
    # M off the 8-row tiles, N off every channel tile, and a number of groups no warp count divides
    assert any(mm % 8 and n % 16 and (k // 128) % 2 for mm, n, k in shapes)
    assert any("13x1003x4224" in a for a in m.sanitize.args)


def test_the_page_names_the_artifact_and_its_claims_select_its_variants_at_its_shapes():
    page = load_page(PAGE, REPO)
    assert page.meta.artifacts["w4cuda"] == "artifacts/w4a16_mma_sm90a"
    names = {v.name for v in manifest().variants}
    values = {tuple(map(int, v.split("x"))) for v in manifest().shapes[0].values}
    mine = [c for c in page.meta.claims if c.measure is not None and c.measure.artifact == "w4cuda"]
    assert len(mine) >= 8 and page.meta.headline in {c.id for c in mine}
    for c in mine:
        for sel in (c.measure.of, c.measure.per):
            if sel is None:
                continue
            assert sel.variant in names
            assert (sel.params["M"], sel.params["N"], sel.params["K"]) in values


# ---------------------------------------------------------------- compiled (nvcc), run without a GPU


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The artifact's source built with the manifest's flags for sm_90a."""
    return build(tmp_path_factory, ARTIFACT, "w4a16_mma.cu", timeout=900)


run = run_without_gpu


@pytest.mark.nvcc
def test_the_binary_lists_the_manifests_variants_and_shapes_before_any_cuda_call(binary):
    m = manifest()
    res = run(binary, "--list-variants")
    assert res.returncode == 0 and res.stdout.split() == [v.name for v in m.variants], res.stderr
    res = run(binary, m.shapes[0].arg(), "--list-shapes=shapes")
    assert res.returncode == 0 and res.stdout.split() == m.shapes[0].values, res.stderr


@pytest.mark.nvcc
@pytest.mark.parametrize("shapes, bad, why", [
    ("16x8192x8192,17x8192x8192", "17x8192x8192", "M must be from 1 to 16"),         # two n8 tiles of x at most
    ("1x4096x4100", "1x4096x4100", "K must be a multiple of 128"),                     # one scale per 128 weights
])
def test_a_shape_the_kernels_cannot_hold_is_refused_by_name_before_any_cuda_call(binary, shapes, bad, why):
    res = run(binary, f"--shapes={shapes}")
    assert res.returncode == 2 and res.stdout == ""
    assert f"--shapes: {bad}: {why}" in res.stderr



@pytest.mark.nvcc
@pytest.mark.parametrize("rung, below, words", [
    ("w4_ring", "w4_warp", "require 'HMMA.16816.F32.BF16 >= 16'"),  # two groups in flight: twice the MMAs a pass
    ("w4_wide", "w4_warp", "require 'HMMA.16816.F32.BF16 >= 16'"),  # two tiles: twice the MMAs a group
    ("w4_smem", "w4_wide", "require 'LDGSTS.E.BYPASS.128'"),        # x staged in shared memory by cp.async
    ("w4_async", "w4_smem", "forbid 'LDG.E.NA.128'"),               # W no longer loaded into registers
    ("w4_lean", "w4_async", "forbid 'LDG.E.U16'"),                  # both scales of a lane in one 32-bit load
])
def test_each_rungs_sass_expectation_holds_on_it_and_fails_on_the_rung_below(binary, rung, below, words):
    own, mismatches = rung_checks(manifest().variants, sass_kernels(binary), rung, below)
    assert own == []
    assert any(words in m for m in mismatches), mismatches


@pytest.mark.nvcc
def test_the_int4_kernels_convert_without_i2f_and_no_configuration_spills(binary):
    """Two weights a shift, a LOP3 and an HADD2.BF16 (no conversion instruction per weight), in every kernel the
    tuned rung may pick; and no configuration keeps anything in local memory."""
    from kwiki.verify.sass import check_variant

    kernels = sass_kernels(binary)
    by_name = {v.name: v for v in manifest().variants}
    for name in ("w4_warp", "w4_ring", "w4_wide", "w4_smem", "w4_async", "w4_lean", "w4_tuned"):
        assert check_variant(by_name[name], "sm_90a", kernels, {})[1] == [], name
    ours = ("w4_kernel", "w4s_kernel", "w4a_kernel", "w4l_kernel")
    mine = [k for k in kernels.values() if any(f"{n}<" in k.name for n in ours)]
    assert len(mine) >= 10
    for k in mine:
        assert not any(op.startswith("I2F") for op in k.opcodes), k.name
        assert not any(op.startswith(("STL", "LDL")) for op in k.opcodes), k.name
        assert sum(n for op, n in k.opcodes.items() if op.startswith("HADD2.BF16")) >= 16, k.name
