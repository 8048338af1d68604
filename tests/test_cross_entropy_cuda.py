"""cross_entropy_bf16_sm90a's CUDA rung (ce_cluster.cu: a cluster a row, the row read once) without a GPU.

The manifest puts it above the Triton gradient rungs, and the page's claims name it at GRID entries; it runs at the
ce_grad entries whose columns are a multiple of 8, an off-tile one included, and the sanitizer's entry caps its
clusters so that each walks many rows. Through a fake library the module hands kwiki_ce_cluster the operands, the
ignore index, the cap and torch's stream, and the in-place twin copies the logits first and passes the copy as
both source and gradient; operands the kernel is not built for are refused by name before the library is called.
Compiled with nvcc as kwiki builds the library, its SASS expectations hold on its kernel and fail on the Triton
rung's (compiled offline), and the launcher refuses bad arguments before any CUDA call. The kernel runs only on an
H200 (kwiki verify), where the harness checks the loss and the gradient against the fp64 reference."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from typing import Any

import pytest
from cuda_artifact import build_library, claimed_at_one_entry, fake_libraries, launcher_result, sass_kernels

from kwiki.wiki.manifest import Manifest, load_manifest

REPO = Path(__file__).resolve().parent.parent
ART = REPO / "artifacts" / "cross_entropy_bf16_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "kernels" / "cross-entropy.md"
CUDA = ["cuda_grad_cluster", "cuda_grad_cluster_inplace"]
# kwiki_ce_cluster(x, t, loss, grad, rows, cols, ignore, max_clusters, stream), as ce_cluster.cu declares it
ARGTYPES: list[Any] = [*[ctypes.c_void_p] * 4, *[ctypes.c_int] * 4, ctypes.c_void_p]
sys.path.insert(0, str(REPO / "artifacts" / "common"))
import kwiki_harness  # noqa: E402


def manifest() -> Manifest:
    return load_manifest(ART, REPO)


@pytest.fixture(scope="module")
def module() -> Any:
    return kwiki_harness.load_module(str(ART / "cross_entropy.py"))


def test_the_cuda_rung_climbs_above_the_triton_gradient_rungs_and_names_its_kernel() -> None:
    m = manifest()
    by_name = {v.name: v for v in m.variants}
    assert by_name["cuda_grad_cluster"].rung == max(v.rung for v in m.variants if v.name.startswith("triton_grad")
                                                    and v.rung is not None) + 1
    assert by_name["cuda_grad_cluster_inplace"].rung is None  # a twin, as triton_grad_inplace is
    assert m.python is not None and m.python.cuda == ["ce_cluster.cu"]
    for name in CUDA:
        assert by_name[name].kernels == ["*ce_cluster_kernel*"]
    sass = by_name["cuda_grad_cluster"].sass
    assert sass is not None and {"LDG.128", "STS.128", "STL", "LDL"} <= set(sass.forbid)


def test_it_runs_where_the_columns_are_vectors_an_off_tile_entry_included(module: Any) -> None:
    for name in CUDA:
        entries = [p for p in module.GRID if module.applies(name, p)]
        assert entries and all(p["op"] == "ce_grad" and p["cols"] % 8 == 0 for p in entries), name
        assert {p["cols"] for p in entries} >= {128256, 32000}
        off = [p for p in entries if p["rows"] % 2 and (p["cols"] // 8) % 2 and p.get("ignore_every")]
        assert off, name  # an odd row count, slices of unequal length, ignored targets
    assert not module.applies("cuda_grad_cluster", {"op": "ce_grad", "rows": 1001, "cols": 5003})
    sanitize = [p for p in manifest().sanitize.params if p.get("clusters")]
    assert sanitize and all(p["rows"] >= 8 * p["clusters"] and p["cols"] % 8 == 0 for p in sanitize)
    assert all(module.applies("cuda_grad_cluster", p) for p in sanitize)


def test_the_page_claims_select_the_cuda_rung_at_grid_entries(module: Any) -> None:
    assert claimed_at_one_entry(PAGE, module.GRID, module.applies, CUDA) == set(CUDA)


def test_the_cap_on_clusters_is_an_input_the_params_check(module: Any) -> None:
    torch = pytest.importorskip("torch")
    p = {"op": "ce_grad", "rows": 6, "cols": 16, "ignore_every": 3, "clusters": 2, "dtype": "bfloat16_grad"}
    inputs = module.make_inputs(p, 0, "cpu")
    assert inputs["clusters"] == 2 and set(inputs) == {"x", "t", "clusters"}
    assert "clusters" not in module.make_inputs({**p, "clusters": 0}, 0, "cpu")
    for bad in (-1, 70000, 1.5, True):
        with pytest.raises(ValueError, match="clusters must be 0"):
            module.make_inputs({**p, "clusters": bad}, 0, "cpu")
    assert torch.equal(module.reference(p, inputs)["grad"], module.reference(p, {"x": inputs["x"],
                                                                                 "t": inputs["t"]})["grad"])


def test_each_call_hands_the_library_its_operands_and_the_twin_works_in_place(module: Any,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    libs = fake_libraries(monkeypatch, torch, "kwiki_ce_cluster", stream=7)
    p = {"op": "ce_grad", "rows": 5, "cols": 24, "ignore_every": 2, "dtype": "bfloat16_grad"}
    inputs = module.make_inputs(p, 1, "cpu")
    out = module.make_outputs(p, inputs)
    module.load("cuda_grad_cluster")(inputs, out)
    (lib,) = libs
    assert lib.argtypes == ARGTYPES
    x, t = inputs["x"], inputs["t"]
    assert lib.calls[-1] == (x.data_ptr(), t.data_ptr(), out["loss"].data_ptr(), out["grad"].data_ptr(), 5, 24,
                             module.IGNORE_INDEX, 0, 7)
    module.load("cuda_grad_cluster_inplace")({**inputs, "clusters": 3}, out)
    src, _, _, grad, *_, cap, _ = libs[-1].calls[-1]
    assert src == grad == out["grad"].data_ptr() and cap == 3
    assert torch.equal(out["grad"], x)  # the fake kernel wrote nothing: what is there is the copy it read


def test_operands_the_kernel_is_not_built_for_are_refused_by_name(module: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    libs = fake_libraries(monkeypatch, torch, "kwiki_ce_cluster", stream=7)
    call = module.load("cuda_grad_cluster")
    x = torch.zeros(4, 20, dtype=torch.bfloat16)  # 20 columns: not whole 16-byte vectors
    t = torch.zeros(4, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"cross_entropy\.py\): cuda_grad_cluster: cols 20 is not a multiple of 8"):
        call({"x": x, "t": t}, {"loss": torch.zeros(4), "grad": torch.empty_like(x)})
    x = torch.zeros(4, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"t is \(4,\) torch.int32"):
        call({"x": x, "t": t.int()}, {"loss": torch.zeros(4), "grad": torch.empty_like(x)})
    with pytest.raises(ValueError, match=r"grad is \(4, 16\) torch.float32"):
        call({"x": x, "t": t}, {"loss": torch.zeros(4), "grad": x.float()})
    with pytest.raises(ValueError, match=r"x is \(64,\) torch.bfloat16, not a contiguous bf16"):
        call({"x": x.reshape(-1), "t": t}, {"loss": torch.zeros(4), "grad": torch.empty_like(x)})
    assert libs[-1].calls == []  # refused before the library


# ---------------------------------------------------------------- compiled (nvcc) as kwiki builds the library


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory, ART)


@pytest.mark.nvcc
def test_its_sass_expectations_hold_on_its_kernel(library: Path) -> None:
    from kwiki.verify.sass import check_variant

    by_name = {v.name: v for v in manifest().variants}
    kernels = sass_kernels(library)
    assert check_variant(by_name["cuda_grad_cluster"], "sm_90a", kernels, {})[1] == []


def test_its_sass_expectations_fail_on_the_triton_rung_below(tmp_path: Path) -> None:
    """Offline (no GPU): the Triton gradient kernel reads the row through registers twice and no cluster meets in
    it, so the CUDA rung's expectations (the bulk copies, the cluster barriers) fail on it."""
    from triton_aot import compile_sm90a

    pytest.importorskip("triton")
    from kwiki.verify.sass import check_variant, parse_listing

    kernels_py = kwiki_harness.load_module(str(ART / "kernels.py"))
    fn = kernels_py.ce_grad_kernel
    const = {"IGNORE": -100, "BLOCK": 16384, "REVERSE": True, "HINTS": True}
    sig = {n: "constexpr" if n in const else "*i64" if n == "t_ptr" else "*fp32" if n == "loss_ptr"
           else "*bf16" if n.endswith("_ptr") else "fp32" if n == "scale" else "i32" for n in fn.arg_names}
    compiled = compile_sm90a(fn, sig, const, tmp_path, num_warps=16, num_stages=1)
    ours = {v.name: v for v in manifest().variants}["cuda_grad_cluster"]
    on_triton = ours.model_copy(update={"kernels": ["ce_grad_kernel*"]})
    mismatches = "; ".join(check_variant(on_triton, "sm_90a", parse_listing(compiled.sass), {})[1])
    assert "require 'UBLKCP.S.G >= 2'" in mismatches and "require 'UCGABAR_ARV >= 2'" in mismatches, mismatches


@pytest.mark.nvcc
@pytest.mark.parametrize(("change", "why"), [({"cols": 20}, "not whole vectors"), ({"cols": 0}, "no columns"),
                                             ({"rows": 70000}, "above the grid's y extent"),
                                             ({"cols": 16 * 2048 * 8 + 8}, "longer than 16 slices"),
                                             ({"max_clusters": -1}, "a negative cap"),
                                             ({"x": (1 << 20) + 8}, "x not 16-byte aligned"),
                                             ({"t": (1 << 21) + 4}, "t not 8-byte aligned")])
def test_the_launcher_refuses_what_it_is_not_built_for_before_any_cuda_call(library: Path, change: dict[str, Any],
                                                                             why: str) -> None:
    args = {"x": 1 << 20, "t": 1 << 21, "loss": 1 << 22, "grad": 1 << 23, "rows": 8, "cols": 1024,
            "ignore": -100, "max_clusters": 0, "stream": None} | change
    assert launcher_result(library, "kwiki_ce_cluster", ARGTYPES, args) == -1, why
