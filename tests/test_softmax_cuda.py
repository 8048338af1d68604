"""softmax_bf16_sm90a's CUDA rung (softmax_cluster.cu: a cluster a row, the row read once) without a GPU.

It climbs above the Triton rungs, runs from 16384 elements a row up and at the off-tile shape, and the page's claims
name it at GRID entries; the sanitizer's entry caps its clusters so that each walks many rows. Through a fake
library the module hands kwiki_softmax_cluster its operands, the cap and torch's stream, and refuses by name what
the kernel is not built for, before the library is called. Compiled with nvcc as kwiki builds the library, its SASS
expectations hold on its kernel and the launcher refuses bad arguments before any CUDA call. The kernel runs only on
an H200 (kwiki verify), where the harness checks it against the fp64 reference."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from typing import Any

import pytest
from cuda_artifact import build_library, claimed_at_one_entry, fake_libraries, launcher_result, sass_kernels

from kwiki.wiki.manifest import load_manifest

REPO = Path(__file__).resolve().parent.parent
ART = REPO / "artifacts" / "softmax_bf16_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "kernels" / "softmax.md"
# kwiki_softmax_cluster(x, y, rows, cols, max_clusters, stream), as softmax_cluster.cu declares it
ARGTYPES: list[Any] = [ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int] * 3, ctypes.c_void_p]
sys.path.insert(0, str(REPO / "artifacts" / "common"))
import kwiki_harness  # noqa: E402


@pytest.fixture(scope="module")
def module() -> Any:
    return kwiki_harness.load_module(str(ART / "softmax.py"))


def test_the_cuda_rung_climbs_above_the_triton_ones_where_a_row_needs_a_cluster(module: Any) -> None:
    m = load_manifest(ART, REPO)
    by_name = {v.name: v for v in m.variants}
    assert by_name["cuda_cluster"].rung == 3 and by_name["cuda_cluster"].kernels == ["*softmax_cluster_kernel*"]
    assert m.python is not None and m.python.cuda == ["softmax_cluster.cu"]
    cols = {p["cols"] for p in module.GRID if module.applies("cuda_cluster", p)}
    assert cols == {n for n in module.LENGTHS if n >= module.CLUSTER_MIN} | {module.OFF_TILE["cols"]}
    capped = [p for p in m.sanitize.params if p.get("clusters")]
    assert capped and all(p["rows"] >= 8 * p["clusters"] and module.applies("cuda_cluster", p) for p in capped)
    assert claimed_at_one_entry(PAGE, module.GRID, module.applies, ["cuda_cluster"]) == {"cuda_cluster"}


def test_a_call_hands_the_library_its_operands_and_bad_ones_are_refused_by_name(
        module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    libs = fake_libraries(monkeypatch, torch, "kwiki_softmax_cluster", stream=5)
    p = {"op": "softmax", "rows": 6, "cols": 32, "clusters": 2, "dtype": "bfloat16"}
    inputs = module.make_inputs(p, 0, "cpu")
    assert inputs["clusters"] == 2
    out = module.make_outputs(p, inputs)
    call = module.load("cuda_cluster")
    call(inputs, out)
    (lib,) = libs
    assert lib.argtypes == ARGTYPES
    assert lib.calls == [(inputs["x"].data_ptr(), out["y"].data_ptr(), 6, 32, 2, 5)]
    x = torch.zeros(4, 20, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"softmax\.py\): cuda_cluster: cols 20 is not a multiple of 8"):
        call({"x": x}, {"y": torch.empty_like(x)})
    x = torch.zeros(4, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"y is \(4, 16\) torch.float32"):
        call({"x": x}, {"y": x.float()})
    assert len(lib.calls) == 1  # refused before the library
    with pytest.raises(ValueError, match="clusters must be 0"):
        module.make_inputs({**p, "clusters": -2}, 0, "cpu")


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory, ART)


@pytest.mark.nvcc
def test_its_sass_expectations_hold_on_its_kernel(library: Path) -> None:
    from kwiki.verify.sass import check_variant

    ours = {v.name: v for v in load_manifest(ART, REPO).variants}["cuda_cluster"]
    assert check_variant(ours, "sm_90a", sass_kernels(library), {})[1] == []


@pytest.mark.nvcc
@pytest.mark.parametrize(("change", "why"), [({"cols": 20}, "not whole vectors"), ({"rows": 0}, "no rows"),
                                             ({"cols": 16 * 2048 * 8 + 8}, "longer than 16 slices"),
                                             ({"max_clusters": -1}, "a negative cap"),
                                             ({"y": (1 << 21) + 8}, "y not 16-byte aligned")])
def test_the_launcher_refuses_what_it_is_not_built_for_before_any_cuda_call(library: Path, change: dict[str, Any],
                                                                             why: str) -> None:
    args = {"x": 1 << 20, "y": 1 << 21, "rows": 8, "cols": 32768, "max_clusters": 0, "stream": None} | change
    assert launcher_result(library, "kwiki_softmax_cluster", ARGTYPES, args) == -1, why
