"""fp8_promotion_sm90a: how often an fp8 GEMM must promote the tensor cores' partial sums into fp32 registers, in
CUDA (page technique-fp8-quantization): one kernel promoting every 32, 64, 128, 256 or 512 elements of K, or never,
each record carrying the maximum and the RMS relative error of its sampled outputs against fp64.

Without a GPU: the manifest sweeps the interval with p128 (DeepSeek-V3's, fp8_gemm_sm90a's rung 5) as the baseline,
at K = 16384 (the page's claims) and K = 4096, and off the tiles; the sanitizer's shape ends K inside a k-block, so
every interval is cut short; the page's claims name its variants, shapes and error figures. Compiled with nvcc, the
binary lists the manifest's variants and shapes and refuses shapes and sample counts it cannot take before any CUDA
call. The kernels run only on an H200 (kwiki verify), checked against sampled fp64 outputs, NaN-poisoned first."""

from __future__ import annotations

from pathlib import Path

import pytest
from cuda_artifact import build, lists_its_manifest, run_without_gpu

from kwiki.wiki.manifest import Manifest, load_manifest
from kwiki.wiki.pages import load_page

REPO = Path(__file__).resolve().parent.parent
ARTIFACT = REPO / "artifacts" / "fp8_promotion_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "techniques" / "fp8-quantization.md"


def manifest() -> Manifest:
    return load_manifest(ARTIFACT, REPO)


def shapes(m: Manifest) -> list[tuple[int, int, int]]:
    return [tuple(int(x) for x in v.split("x")) for v in m.shapes[0].values]


def test_the_sweep_runs_from_every_wgmma_to_never_around_deepseeks_interval():
    m = manifest()
    assert [v.name for v in m.variants] == ["p32", "p64", "p128", "p256", "p512", "never"]
    assert m.baseline == "p128" and [v.name for v in m.variants if v.rung is not None] == ["p128"]
    s = shapes(m)
    assert (4096, 4096, 16384) in s and (4096, 4096, 4096) in s
    assert any(mm % 128 and n % 128 and k % 512 for mm, n, k in s)  # off the tiles, and off the longest interval
    small = [tuple(int(x) for x in a.removeprefix("--shapes=").split("x")) for a in m.sanitize.args
             if a.startswith("--shapes=")]
    assert small and all(mm % 128 and n % 128 and k % 128 == 16 for mm, n, k in small)


def test_the_page_claims_the_error_of_its_variants_at_its_shapes():
    page = load_page(PAGE, REPO)
    key = next(k for k, v in page.meta.artifacts.items() if v == "artifacts/fp8_promotion_sm90a")
    names, s = {v.name for v in manifest().variants}, set(shapes(manifest()))
    mine = [c for c in page.meta.claims if c.measure is not None and c.measure.artifact == key]
    assert {c.id for c in mine} >= {"never-vs-p128-rms-error-16384", "never-vs-p128-max-error-16384"}
    figures = set()
    for c in mine:
        for sel in (c.measure.of, c.measure.per):
            assert sel.variant in names and (sel.params["M"], sel.params["N"], sel.params["K"]) in s, c.id
            figures.add(sel.figure)
    assert figures == {"rms_rel_err", "max_rel_err"}


# ---------------------------------------------------------------- compiled (nvcc), run without a GPU


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory, ARTIFACT, "fp8_promotion.cu")


def test_the_binary_lists_the_manifests_variants_and_shapes_before_any_cuda_call(binary):
    lists_its_manifest(binary, manifest())


@pytest.mark.parametrize("args, words", [
    (["--shapes=128x100x128"], "usage error: --shapes"),     # N not a multiple of 16
    (["--shapes=128x128x100"], "usage error: --shapes"),     # K not a multiple of 16 (TMA's strides)
    (["--shapes=128x128"], "usage error: --shapes"),
    (["--shapes=128x128x128", "--check-samples=8"], "usage error: --check-samples"),
    (["--shapes=128x128x128", "--check-samples=many"], "usage error: --check-samples"),
])
def test_what_it_cannot_take_is_refused_before_any_cuda_call(binary, args, words):
    res = run_without_gpu(binary, *args)
    assert res.returncode == 2 and res.stdout == "" and words in res.stderr, res.stderr
