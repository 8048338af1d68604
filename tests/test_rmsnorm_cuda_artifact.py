"""rmsnorm_cuda_sm90a (issue 31): the CUDA RMSNorm rungs beside the Triton ones of page kernel-rmsnorm.

Without a GPU: the manifest loads with its ladder, its shapes hold one off every tile, and the page's claims name
its variants at its shapes; compiled with nvcc, the binary lists the manifest's variants and shapes, refuses a row
it cannot hold (naming the shape) before any CUDA call, and each rung's SASS expectation fails on the rung below it,
so it proves the mechanism the rung adds. The kernels themselves run only on an H200 (kwiki verify)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cuda_artifact import build, run_without_gpu, rung_checks, sass_kernels

from kwiki.wiki.manifest import Manifest, load_manifest
from kwiki.wiki.pages import load_page

REPO = Path(__file__).resolve().parent.parent
ARTIFACT = REPO / "artifacts" / "rmsnorm_cuda_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "kernels" / "rmsnorm.md"


def manifest() -> Manifest:
    return load_manifest(ARTIFACT, REPO)


def test_the_ladder_climbs_from_two_passes_to_the_fused_fp8_op_under_the_copy_roof():
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants] == [
        ("block_twopass", 1), ("block_regs", 2), ("warp_rows", 3), ("add_rmsnorm", 4), ("add_rmsnorm_fp8", 5),
        ("copy", None)]
    assert (m.baseline, m.ceiling) == ("block_twopass", "copy")
    # one shape off every tile: rows no multiple of warp_rows's 8, hidden no multiple of a block's 256 x 8
    shapes = [tuple(map(int, v.split("x"))) for v in m.shapes[0].values]
    assert any(rows % 8 and hidden % (256 * 8) for rows, hidden in shapes)
    # warp_rows runs at one shape of the ladder at least (hidden <= 2048), and sanitize runs it too
    assert any(hidden <= 2048 for _, hidden in shapes)
    small = [a.removeprefix("--shapes=") for a in m.sanitize.args if a.startswith("--shapes=")]
    assert small and any(int(s.split("x")[1]) <= 2048 for s in small[0].split(","))


def test_the_page_names_the_artifact_and_its_claims_select_its_variants_at_its_shapes():
    page = load_page(PAGE, REPO)
    assert page.meta.artifacts["cuda"] == "artifacts/rmsnorm_cuda_sm90a"
    names = {v.name for v in manifest().variants}
    values = {tuple(map(int, v.split("x"))) for v in manifest().shapes[0].values}
    mine = [c for c in page.meta.claims if c.measure is not None and c.measure.artifact == "cuda"]
    assert len(mine) >= 3
    for c in mine:
        for sel in (c.measure.of, c.measure.per):
            if sel is None or (sel.artifact or "cuda") != "cuda":
                continue
            assert sel.variant in names
            assert (sel.params["rows"], sel.params["hidden"]) in values
    assert "CUDA rungs beside the Triton ones" not in PAGE.read_text()


# ---------------------------------------------------------------- compiled (nvcc), run without a GPU


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The artifact's source built with the manifest's flags for sm_90a."""
    return build(tmp_path_factory, ARTIFACT, "rmsnorm.cu")


run = run_without_gpu


@pytest.mark.nvcc
def test_the_binary_lists_the_manifests_variants_and_shapes_before_any_cuda_call(binary):
    m = manifest()
    res = run(binary, "--list-variants")
    assert res.returncode == 0 and res.stdout.split() == [v.name for v in m.variants], res.stderr
    res = run(binary, m.shapes[0].arg(), "--list-shapes=shapes")
    assert res.returncode == 0 and res.stdout.split() == m.shapes[0].values, res.stderr
    res = run(binary, "--shapes=3x32768", "--list-shapes=shapes")  # the longest row a block holds in registers
    assert res.returncode == 0 and res.stdout.split() == ["3x32768"], res.stderr


@pytest.mark.nvcc
@pytest.mark.parametrize("shapes, bad, why", [
    ("8192x8192,1001x5001", "1001x5001", "hidden 5001 is not a multiple of 8"),   # rows are 16-byte vectors
    ("8x32776", "8x32776", "hidden 32776 is above 32768"),                          # past the registers of a block
])
def test_a_row_the_kernels_cannot_hold_is_refused_by_name_before_any_cuda_call(binary, shapes, bad, why):
    res = run(binary, f"--shapes={shapes}")
    assert res.returncode == 2 and res.stdout == ""
    assert f"rmsnorm: --shapes: {bad}: {why}" in res.stderr
    assert "usage error: --shapes wants" in res.stderr



@pytest.mark.nvcc
@pytest.mark.parametrize("rung, below, words", [
    ("block_regs", "block_twopass", "require 'LDG.E.128 >= 2'"),           # 16-byte loads
    ("warp_rows", "block_regs", "forbid 'BAR.SYNC'"),                      # no block barrier
    ("add_rmsnorm_fp8", "add_rmsnorm", "require 'F2FP.SATFINITE.E4M3.F32 >= 4'"),  # the e4m3 conversion
])
def test_each_rungs_sass_expectation_holds_on_it_and_fails_on_the_rung_below(binary, rung, below, words):
    own, mismatches = rung_checks(manifest().variants, sass_kernels(binary), rung, below)
    assert own == []
    assert any(words in m for m in mismatches), mismatches


@pytest.mark.nvcc
def test_the_register_rungs_neither_spill_nor_read_their_row_twice_from_local_memory(binary):
    from kwiki.verify.sass import check_variant

    kernels = sass_kernels(binary)
    for v in manifest().variants:
        if v.sass is not None:
            assert "STL" in v.sass.forbid and "LDL" in v.sass.forbid, v.name
            assert check_variant(v, "sm_90a", kernels, {})[1] == [], v.name
