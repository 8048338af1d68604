"""row_reduce_sm90a: reductions across one block, two kernels, atomics and a thread-block cluster, on an RMSNorm-style
row op against a copy of the same bytes (page technique-cluster-reduction).

Without a GPU: the manifest climbs from one block per row to a cluster, with the copy as the roof; its shapes hold
rows that fit one SM, rows of 128k-256k that do not, a single long row and rows off every tile (an odd row count,
columns no slice divides); the page's claims name its variants at its shapes. Compiled with nvcc, the binary lists
the manifest's variants and shapes, refuses shapes it is not built for before any CUDA call, and each rung's SASS
expectation holds on its kernel and fails on another rung's (the cluster's barriers, the atomics' reductions). The
reductions run only on an H200 (kwiki verify), checked against an fp64 reference with a canary past the output."""

from __future__ import annotations

from pathlib import Path

import pytest
from cuda_artifact import build, lists_its_manifest, run_without_gpu, rung_checks, sass_kernels

from kwiki.wiki.manifest import Manifest, load_manifest
from kwiki.wiki.pages import load_page

REPO = Path(__file__).resolve().parent.parent
ARTIFACT = REPO / "artifacts" / "row_reduce_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "techniques" / "cluster-reduction.md"


def manifest() -> Manifest:
    return load_manifest(ARTIFACT, REPO)


def shapes(m: Manifest) -> list[tuple[int, int]]:
    return [(int(r), int(c)) for r, c in (v.split("x") for v in m.shapes[0].values)]


def test_the_ladder_climbs_from_one_block_to_a_pipelined_cluster_under_the_copy_roof():
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants] == [
        ("block", 1), ("two_kernel", 2), ("atomics", 3), ("cluster", 4), ("cluster_ring", 5), ("copy", None)]
    assert m.baseline == "block" and m.ceiling == "copy"


def test_the_shapes_hold_rows_on_one_sm_rows_past_it_a_single_row_and_rows_off_every_tile():
    m = manifest()
    assert m.shapes[0].option == "shapes" and m.shapes[0].dims == ["rows", "cols"]
    s = shapes(m)
    assert any(c <= 8192 for _, c in s)                          # a row one block holds
    assert {c for _, c in s} >= {131072, 262144}                 # the rows a cluster is for
    assert any(r == 1 for r, _ in s)                             # one row: the launch and fixed cost
    assert any(r % 2 and c % 1024 for r, c in s)                  # an odd row count, columns no slice divides
    small = [a.removeprefix("--shapes=") for a in m.sanitize.args if a.startswith("--shapes=")]
    assert small and all(int(r) * int(c) <= 2**20 for r, c in (v.split("x") for v in small[0].split(",")))


def test_the_page_names_the_artifact_and_its_claims_select_its_variants_at_its_shapes():
    page = load_page(PAGE, REPO)
    key = next(k for k, v in page.meta.artifacts.items() if v == "artifacts/row_reduce_sm90a")
    names, s = {v.name for v in manifest().variants}, set(shapes(manifest()))
    mine = [c for c in page.meta.claims if c.measure is not None and c.measure.artifact == key]
    assert len(mine) >= 4 and page.meta.headline in {c.id for c in mine}
    for c in mine:
        for sel in (c.measure.of, c.measure.per):
            if sel is not None:
                assert sel.variant in names and (sel.params["rows"], sel.params["cols"]) in s, c.id


# ---------------------------------------------------------------- compiled (nvcc), run without a GPU


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory, ARTIFACT, "row_reduce.cu")


@pytest.mark.nvcc
def test_the_binary_lists_the_manifests_variants_and_shapes_before_any_cuda_call(binary):
    lists_its_manifest(binary, manifest())


@pytest.mark.nvcc
@pytest.mark.parametrize("value", ["16x4100", "4x524296", "65536x1024", "0x4096", "16x", "16x4096x2", ""])
def test_a_shape_it_is_not_built_for_is_refused_before_any_cuda_call(binary, value):
    res = run_without_gpu(binary, f"--shapes={value}")  # columns not a multiple of 8, too long, too many rows, ...
    assert res.returncode == 2 and res.stdout == ""
    assert "usage error: --shapes" in res.stderr


@pytest.mark.nvcc
@pytest.mark.parametrize("value", ["-1", "65536", "two"])
def test_a_ring_cap_it_cannot_take_is_refused_before_any_cuda_call(binary, value):
    res = run_without_gpu(binary, "--shapes=16x4096", f"--ring-clusters={value}")
    assert res.returncode == 2 and res.stdout == ""
    assert "usage error: --ring-clusters" in res.stderr


def test_the_sanitizer_walks_the_ring_many_rows_a_cluster():
    """cluster_ring's grid capped at 2 clusters in the sanitizer's arguments, and a sanitize shape with many more rows
    than that, whose columns need clusters of 2 CTAs with unequal slices: every buffer of the ring is loaded many
    times under memcheck, where the timed shapes' rows come one or a few a cluster."""
    args = manifest().sanitize.args
    assert "--ring-clusters=2" in args
    small = [tuple(int(x) for x in v.split("x")) for a in args if a.startswith("--shapes=")
             for v in a.removeprefix("--shapes=").split(",")]
    assert any(r >= 8 * 2 and (c // 8) > 2048 and (c // 8) % 2 for r, c in small)


@pytest.mark.nvcc
@pytest.mark.parametrize("variant, other, words", [
    ("cluster", "atomics", "require 'UCGABAR_ARV >= 2'"),   # the cluster's barriers, absent from the atomics kernel
    ("cluster", "block", "require 'LD.E'"),                 # ld.shared::cluster: a generic load of a peer's partial
    ("atomics", "cluster", "require 'REDG.E.ADD.F32'"),     # the partial sums' reduction in global memory
    ("atomics", "two_kernel", "require 'NANOSLEEP'"),       # the spin on the row's counter
    ("block", "atomics", "forbid 'REDG'"),                  # and the plain rungs have none of it
    ("two_kernel", "cluster", "forbid 'UCGABAR_ARV'"),
    ("cluster_ring", "cluster", "require 'UBLKCP.S.G >= 2'"),  # the slices come in by bulk copies, not loads
    ("cluster_ring", "cluster", "forbid 'LDG.128'"),            # where the one-row cluster kernel loads them
    ("cluster_ring", "cluster", "require 'SYNCS.PHASECHK.TRANS64.TRYWAIT'"),  # and waits on their mbarrier
])
def test_each_sass_expectation_holds_on_its_variant_and_fails_on_the_other_kernel(binary, variant, other, words):
    own, on_other = rung_checks(manifest().variants, sass_kernels(binary), variant, other)
    assert own == [] and any(words in m for m in on_other), on_other
