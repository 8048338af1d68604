"""The bf16 row-softmax artifact (softmax_bf16_sm90a) on the CPU, in two parts.

Without Triton's interpreter: the module passes the harness's contract check, every GRID entry holds the same 64 Mi
elements but the off-tile one (a row no Triton block or chunk divides), each variant applies where its limits say
and nowhere else, bad params are refused before any tensor is made, the bytes work() declares are those of the
tensors, the reference sums to one in float64, and the torch baselines pass the harness's comparison.

Under Triton's CPU interpreter (only in a process started with TRITON_INTERPRET=1, which is never set here): each
Triton variant the artifact.yaml lists runs through the module's own load() on CPU tensors at small shapes no
block divides, its output poisoned with NaN first, and passes the harness's comparison with the float64 reference
under the module's tolerance and within a bf16 ulp of it relatively (the copy bit for bit, as the module's bf16
tolerance would let a copy one ulp off pass). The checks can fail: a split whose merge drops the online-softmax
rescale, a copy told one element fewer, and a softmax output nudged at one element are all refused.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from triton_interpreter import artifact_module

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
ART = ROOT / "artifacts" / "softmax_bf16_sm90a"
sys.path.insert(0, str(ROOT / "artifacts" / "common"))
import kwiki_harness  # noqa: E402  (the harness's own contract check and comparison)

TRITON = ["triton_copy", "triton_row", "triton_split"]  # the variants whose kernels are this artifact's Triton
# (rows, cols): 5000 and 9000 leave a partial chunk of 4096 (two and three chunks, the latter's CHUNKS block of 4
# half masked), 37 a row shorter than a chunk, 40000 ten chunks (past triton_row's 32768), 1 a row of one element
SHAPES = [(3, 5000), (2, 37), (2, 9000), (2, 40000), (3, 1)]
interpreted = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                 reason="needs TRITON_INTERPRET=1 from the start (never set here: it would hold for "
                                        "the whole process)")


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return artifact_module(ART, "softmax.py", "softmax_triton_under_test")


def _params(op: str, rows: int, cols: int) -> dict[str, Any]:
    return {"op": op, "rows": rows, "cols": cols, "dtype": "bfloat16"}


def _sanitize() -> list[dict[str, Any]]:
    """The params `kwiki verify --sanitize` runs the variants at (artifact.yaml)."""
    return list(yaml.safe_load((ART / "artifact.yaml").read_text(encoding="utf-8"))["sanitize"]["params"])


def _passes(mod: ModuleType, got: Any, ref: Any) -> tuple[bool, str]:
    """The harness's comparison of output y under the module's bf16 tolerance (atol 1e-6, rtol 2^-7)."""
    atol, rtol, _ = mod.TOLERANCES["bfloat16"]
    ok, detail, _, _ = kwiki_harness.compare(got, ref, atol, rtol, "y")
    return ok, detail


# ---------------------------------------------------------------------------------------------
# The module's contract, without the interpreter
# ---------------------------------------------------------------------------------------------

def test_the_module_passes_the_harness_contract_and_lists_the_yaml_variants(mod: ModuleType) -> None:
    assert kwiki_harness.contract_problems(mod) == []
    manifest = yaml.safe_load((ART / "artifact.yaml").read_text(encoding="utf-8"))
    assert [v["name"] for v in manifest["variants"]] == mod.VARIANTS
    assert [n for n in mod.VARIANTS if n.startswith("triton_")] == TRITON  # each is run below, in the interpreter


def test_the_grid_holds_one_tensor_size_and_one_row_off_every_tile(mod: ModuleType) -> None:
    for p in mod.GRID:
        assert p["op"] in ("copy", "softmax") and p["rows"] > 0 and p["cols"] > 0  # make_inputs' own rule
        assert p["dtype"] in mod.TOLERANCES
    full = [p for p in mod.GRID if p["rows"] * p["cols"] == mod.ELEMENTS]
    assert {p["cols"] for p in full if p["op"] == "softmax"} == set(mod.LENGTHS)
    assert [p["op"] for p in full].count("copy") == 1
    off = [p for p in mod.GRID if p not in full]
    assert off == [_params("softmax", **mod.OFF_TILE)]
    cols = off[0]["cols"]
    assert cols % mod.CHUNK and cols & (cols - 1)  # a partial chunk, and triton_row's power-of-two block masked
    for p in _sanitize():
        assert p["cols"] % mod.CHUNK and (p["rows"] * p["cols"]) % 4096  # the copy's 4096 blocks: a partial one


def test_each_variant_applies_within_its_limits(mod: ModuleType) -> None:
    for name in mod.VARIANTS:
        assert any(mod.applies(name, p) for p in mod.GRID), name  # every variant is measured somewhere
        for p in [*mod.GRID, *_sanitize()]:
            if p["op"] == "copy" or name.endswith("_copy"):  # the roof's variants run the copy, and only they
                assert mod.applies(name, p) == (p["op"] == "copy" and name.endswith("_copy")), (name, p)
    off = _params("softmax", **mod.OFF_TILE)
    assert [n for n in mod.VARIANTS if mod.applies(n, off)] == ["torch_eager", "liger", "triton_row", "triton_split",
                                                                "cuda_cluster"]
    assert mod.applies("cuda_cluster", _params("softmax", 2, mod.CLUSTER_MIN))  # rung 3: from 16384 elements up
    assert not mod.applies("cuda_cluster", _params("softmax", 2, mod.CLUSTER_MIN // 2))
    assert not mod.applies("cuda_cluster", _params("softmax", 2, mod.CLUSTER_MIN + 4))  # whole 16-byte vectors
    assert mod.applies("triton_row", _params("softmax", 2, mod.ROW_MAX))
    assert not mod.applies("triton_row", _params("softmax", 2, mod.ROW_MAX + 1))
    assert mod.applies("liger", _params("softmax", 2, mod.LIGER_MAX))
    assert not mod.applies("liger", _params("softmax", 2, mod.LIGER_MAX + 1))
    compiled = [p["cols"] for p in mod.GRID if mod.applies("torch_compile", p)]
    assert sorted(compiled) == sorted(mod.COMPILED)  # the claimed lengths only, a compile of 10-40 s each
    assert not mod.applies("torch_compile", _params("softmax", 3, 4096))
    assert mod.applies("triton_split", _params("softmax", 1, 1 << 20))  # any length


@pytest.mark.parametrize("bad", [{"op": "gelu"}, {"rows": 0}, {"cols": -5}])
def test_bad_params_are_refused_before_any_tensor(mod: ModuleType, bad: dict[str, Any],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def made(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a tensor was made before the params were checked")

    for factory in ("randn", "empty", "Generator"):
        monkeypatch.setattr(torch, factory, made)
    with pytest.raises(ValueError, match=r"softmax: params .*op must be copy or softmax, rows and cols positive"):
        mod.make_inputs({**_params("softmax", 2, 10), **bad}, 0, "cpu")


@pytest.mark.parametrize("op", ["copy", "softmax"])
def test_work_counts_the_bytes_of_one_read_and_one_write(mod: ModuleType, op: str) -> None:
    p = _params(op, 3, 37)
    inputs = mod.make_inputs(p, 0, "cpu")
    outputs = mod.make_outputs(p, inputs)
    x, y = inputs["x"], outputs["y"]
    assert x.dtype == y.dtype == torch.bfloat16 and x.shape == y.shape == (3, 37)
    assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert mod.work(p) == {"bytes": float(x.numel() * x.element_size() + y.numel() * y.element_size()),
                           "bytes_level": "dram"}
    full = {mod.work(q)["bytes"] for q in mod.GRID if q["rows"] * q["cols"] == mod.ELEMENTS}
    assert full == {float(2 * 2 * mod.ELEMENTS)}  # 128 MiB in and 128 MiB out at every claimed shape


def test_the_reference_is_a_float64_softmax_and_a_copy(mod: ModuleType) -> None:
    p = _params("softmax", 4, 300)
    inputs = mod.make_inputs(p, 1, "cpu")
    assert torch.equal(inputs["x"], mod.make_inputs(p, 1, "cpu")["x"])  # the seed decides the inputs
    assert not torch.equal(inputs["x"], mod.make_inputs(p, 2, "cpu")["x"])
    ref = mod.reference(p, inputs)["y"]
    assert ref.dtype == torch.float64 and float((ref.sum(-1) - 1).abs().max()) < 1e-12
    copy = mod.reference(_params("copy", 4, 300), inputs)["y"]
    assert torch.equal(copy, inputs["x"]) and copy.data_ptr() != inputs["x"].data_ptr()


@pytest.mark.parametrize("name", ["torch_eager", "torch_copy"])
def test_the_torch_baselines_pass_the_harness_on_the_cpu(mod: ModuleType, name: str) -> None:
    p = _params("copy" if name == "torch_copy" else "softmax", 3, 5000)
    inputs = mod.make_inputs(p, 4, "cpu")
    outputs = {k: t.fill_(float("nan")) for k, t in mod.make_outputs(p, inputs).items()}
    got = mod.load(name)(inputs, outputs) or outputs
    ok, detail = _passes(mod, got["y"], mod.reference(p, inputs)["y"])
    assert ok, detail


# ---------------------------------------------------------------------------------------------
# The Triton variants, under the interpreter
# ---------------------------------------------------------------------------------------------

def _interpreted_kernels(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The artifact's kernels.py registered as `kernels` for this test (load()'s `import kernels` finds it)."""
    pytest.importorskip("triton")
    return artifact_module(ART, "kernels.py", "kernels", monkeypatch)


def _run(mod: ModuleType, name: str, p: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """(inputs, output y) of variant `name` through the module's load(), y poisoned with NaN first; the inputs are
    checked unchanged. Row 0 gets a maximum in its last (partial) chunk: the split's merge must rescale."""
    inputs = mod.make_inputs(p, 11, "cpu")
    if p["op"] == "softmax":
        inputs["x"][0, -1] = 6.0
    pristine = {k: t.clone() for k, t in inputs.items()}
    outputs = {k: t.fill_(float("nan")) for k, t in mod.make_outputs(p, inputs).items()}
    assert mod.applies(name, p)
    got = mod.load(name)(inputs, outputs) or outputs
    assert kwiki_harness.inputs_changed(inputs, pristine) is None
    return inputs, got["y"]


@interpreted
@pytest.mark.parametrize("rows,cols", SHAPES)
@pytest.mark.parametrize("name", ["triton_row", "triton_split"])
def test_the_softmax_kernels_match_float64(mod: ModuleType, name: str, rows: int, cols: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's tolerance, rtol 2^-7: one rounding of fp32 to bf16, which the GPU makes to nearest (half a bf16
    ulp, 2^-8 relative at most) and Triton's interpreter by truncation (under one ulp, below 2^-7 relative);
    the fp32 exp and sums add about 1e-6 relative, and atol 1e-6 covers the smallest probabilities."""
    _interpreted_kernels(monkeypatch)
    p = _params("softmax", rows, cols)
    if not mod.applies(name, p):
        assert name == "triton_row" and cols > mod.ROW_MAX
        pytest.skip(f"{name} does not apply at {cols} columns")
    inputs, y = _run(mod, name, p)
    ref = mod.reference(p, inputs)["y"]
    assert y.dtype == torch.bfloat16 and bool(torch.isfinite(y).all())
    ok, detail = _passes(mod, y, ref)
    assert ok, detail
    err = (y.double() - ref).abs()
    assert bool((err < 2.0 ** -7 * ref).all()), float((err / ref).max())  # also relatively, without the atol
    nudged = y.clone()
    top = int(y[-1].argmax())
    nudged[-1, top] = y[-1, top] * (1 + 2.0 ** -5)  # four bf16 ulps off at the last row's largest
    assert not _passes(mod, nudged, ref)[0]


@interpreted
@pytest.mark.parametrize("rows,cols", [(3, 5000), (1, 7), (2, 4096)])  # 15000 and 7 elements, 8192 two full blocks
def test_the_copy_kernel_copies_every_bit(mod: ModuleType, rows: int, cols: int,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Bit for bit, not at the module's bf16 tolerance, which would let a copy one ulp off pass."""
    _interpreted_kernels(monkeypatch)
    p = _params("copy", rows, cols)
    inputs, y = _run(mod, "triton_copy", p)
    assert _copied(y, mod.reference(p, inputs)["y"])


def _copied(y: Any, ref: Any) -> bool:
    return bool(torch.equal(y.view(torch.int16), ref.view(torch.int16)))  # NaN-poisoned bits never equal


class _DropsTheLastElement:
    """A kernel launched with one element fewer than the module passes: what a wrong tail mask would do."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel

    def __getitem__(self, grid: Any) -> Any:
        launch = self.kernel[grid]
        return lambda x, y, n, **meta: launch(x, y, n - 1, **meta)


@interpreted
def test_a_copy_that_drops_the_last_element_fails(mod: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy's check can fail: triton_copy through the module's load(), its kernel told one element fewer."""
    kernels = _interpreted_kernels(monkeypatch)
    monkeypatch.setattr(kernels, "copy_kernel", _DropsTheLastElement(kernels.copy_kernel))
    p = _params("copy", 3, 5000)
    inputs, y = _run(mod, "triton_copy", p)
    assert not _copied(y, mod.reference(p, inputs)["y"])
    assert bool(torch.isnan(y[-1, -1])) and _copied(y.view(-1)[:-1], inputs["x"].view(-1)[:-1])


@interpreted
def test_a_split_without_the_rescale_fails(mod: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above can fail: triton_split launched through the module's load() with its apply kernel
    replaced by one that sums the chunks' denominators without exp(m_k - m) is refused; the real one passes."""
    kernels = _interpreted_kernels(monkeypatch)
    import triton
    import triton.language as tl

    @triton.jit
    def apply_without_rescale(x_ptr, y_ptr, m_ptr, d_ptr, n, chunks,  # type: ignore[no-untyped-def]
                              CHUNK: tl.constexpr, CHUNKS: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        row, k = pid // chunks, pid % chunks
        j = tl.arange(0, CHUNKS)
        ms = tl.load(m_ptr + row * chunks + j, mask=j < chunks, other=-float("inf"))
        ds = tl.load(d_ptr + row * chunks + j, mask=j < chunks, other=0.0)
        m = tl.max(ms, 0)
        d = tl.sum(ds, 0)  # the rescale by exp(m_k - m) left out
        c = k * CHUNK + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row * n + c, mask=c < n, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * n + c, (tl.exp(x - m) / d).to(y_ptr.dtype.element_ty), mask=c < n)

    p = _params("softmax", 3, 9000)
    inputs, y = _run(mod, "triton_split", p)
    ref = mod.reference(p, inputs)["y"]
    assert _passes(mod, y, ref)[0]
    monkeypatch.setattr(kernels, "softmax_apply_kernel", apply_without_rescale)
    inputs, wrong = _run(mod, "triton_split", p)
    assert bool(torch.isfinite(wrong).all())
    ok, detail = _passes(mod, wrong, ref)
    assert not ok and "not within" in detail, detail
