"""paged_gather_sm90a: gathering a paged cache with plain loads, cp.async, bulk copies and TMA, against a device copy of
the same bytes (page technique-paged-kv-gather).

Without a GPU: the manifest climbs from plain loads to TMA over the copy roof, with fresh inputs; its shapes hold
every page size from 4 to 64 KiB, each gathering the same 256 MiB from a pool four times larger, and a page count no
split divides; the page's claims name its variants at its shapes. Compiled with nvcc, the binary lists the
manifest's variants and shapes, refuses shapes it is not built for before any CUDA call, and each rung's SASS
expectation holds on its kernel and fails on another rung's. The gathers run only on an H200 (kwiki verify), each
sample re-checked on the device with new pool words and a new table."""

from __future__ import annotations

from pathlib import Path

import pytest
from cuda_artifact import build, lists_its_manifest, run_without_gpu, rung_checks, sass_kernels

from kwiki.wiki.manifest import Manifest, load_manifest
from kwiki.wiki.pages import load_page

REPO = Path(__file__).resolve().parent.parent
ARTIFACT = REPO / "artifacts" / "paged_gather_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "techniques" / "paged-kv-gather.md"


def manifest() -> Manifest:
    return load_manifest(ARTIFACT, REPO)


def shapes(m: Manifest) -> list[tuple[int, int, int]]:
    return [(int(k), int(p), int(q)) for k, p, q in (v.split("x") for v in m.shapes[0].values)]


def test_the_ladder_climbs_from_plain_loads_to_tma_over_the_copy_roof():
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants] == [
        ("copy", 0), ("plain", 1), ("cp_async", 2), ("bulk", 3), ("tma", 4), ("plain_contig", None),
        ("bulk_contig", None)]
    assert m.baseline == "copy" and m.ceiling == "copy" and m.fresh_inputs is True


def test_the_shapes_gather_the_same_bytes_at_every_page_size_from_a_pool_beyond_the_l2():
    m = manifest()
    assert m.shapes[0].option == "pages" and m.shapes[0].dims == ["kib", "pages", "pool"]
    s = shapes(m)
    assert {k for k, _, _ in s} == {4, 8, 16, 32, 64}
    assert all(p <= q and q * k >= 4 * p * k and q * k * 1024 >= 2**30 for k, p, q in s)  # pool 4x, at least 1 GiB
    assert len({k * p for k, p, _ in s if p % 2 == 0}) == 1  # the same bytes gathered at every power-of-two count
    assert any(p % 2 for _, p, _ in s)                        # a page count no split or table chunk divides
    small = [a.removeprefix("--pages=") for a in m.sanitize.args if a.startswith("--pages=")]
    assert small and all(int(p) % 2 for _, p, _ in (v.split("x") for v in small[0].split(",")))


def test_the_page_names_the_artifact_and_its_claims_select_its_variants_at_its_shapes():
    page = load_page(PAGE, REPO)
    key = next(k for k, v in page.meta.artifacts.items() if v == "artifacts/paged_gather_sm90a")
    names = {v.name for v in manifest().variants}
    at = {(k, p) for k, p, _ in shapes(manifest())}
    mine = [c for c in page.meta.claims if c.measure is not None and c.measure.artifact == key]
    assert len(mine) >= 4 and page.meta.headline in {c.id for c in mine}
    for c in mine:
        for sel in (c.measure.of, c.measure.per):
            if sel is not None:
                assert sel.variant in names and (sel.params["kib"], sel.params["pages"]) in at, c.id


# ---------------------------------------------------------------- compiled (nvcc), run without a GPU


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory, ARTIFACT, "paged_gather.cu")


@pytest.mark.nvcc
def test_the_binary_lists_the_manifests_variants_and_shapes_before_any_cuda_call(binary):
    lists_its_manifest(binary, manifest())


@pytest.mark.nvcc
@pytest.mark.parametrize("value", ["3x100x1000", "128x10x100", "6x10x100", "4x101x100", "4x0x100", "4x100",
                                   "4x1x17179869184", ""])
def test_a_shape_it_is_not_built_for_is_refused_before_any_cuda_call(binary, value):
    res = run_without_gpu(binary, f"--pages={value}")  # a page size not a power of two in 4..64, more pages than
    assert res.returncode == 2 and res.stdout == ""     # the pool, none, a pool past 2^31 rows, a malformed value
    assert "usage error: --pages" in res.stderr


@pytest.mark.nvcc
@pytest.mark.parametrize("variant, other, words", [
    ("cp_async", "plain", "require 'LDGSTS.128 >= 4'"),  # cp.async into shared memory, absent from plain loads
    ("bulk", "tma", "require 'UBLKCP.S.G'"),             # one bulk copy a page, where TMA uses tensor maps
    ("tma", "bulk", "require 'UTMALDG.2D'"),
    ("plain", "cp_async", "forbid 'LDGSTS'"),            # and the plain rung has none of the asynchronous copies
    ("bulk", "cp_async", "require 'SYNCS.PHASECHK.TRANS64.TRYWAIT'"),  # the ring's mbarriers
])
def test_each_sass_expectation_holds_on_its_variant_and_fails_on_the_other_kernel(binary, variant, other, words):
    own, on_other = rung_checks(manifest().variants, sass_kernels(binary), variant, other)
    assert own == [] and any(words in m for m in on_other), on_other
