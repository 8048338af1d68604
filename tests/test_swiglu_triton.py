"""swiglu_bf16_sm90a (c = silu(a) * b in bf16, and a copy of a as the roof) on a CPU.

Without Triton's interpreter, these tests check the module's contract. The harness finds no problem in it and the
manifest lists the module's variants. Every GRID and sanitize entry passes make_inputs' check, and the GRID has a
SwiGLU entry whose element count the kernel's 2048-element block does not divide. Bad params are refused with a
ValueError before any tensor is made. applies() runs each variant where the module says: the copy on the copy only,
the SwiGLU variants on every SwiGLU entry and torch.compile at the claimed shape only. The Liger baseline says how to
install Liger-Kernel where it is absent, and the eager baselines agree with the fp64 reference.

Under the interpreter (a process started with TRITON_INTERPRET=1; skipped elsewhere), the Triton variant runs
through the module's own load() on CPU tensors at shapes off the block, with gates far into silu's two tails in
its last, partial block. Its output is poisoned first (every byte 0xFF, NaN in bf16, as the harness does) and
followed by a guard of as many poisoned elements that must stay so, and its inputs must be left as they were. The
result is compared with the module's fp64 reference within one bf16 ulp at every magnitude, because Triton's
interpreter rounds fp32 to bf16 toward zero where the GPU rounds to nearest. A kernel run with a and b swapped, one
that stops an element short and one whose mask reaches an element too far are shown to fail these checks.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from triton_interpreter import artifact_module

ROOT = Path(__file__).resolve().parents[1]
ART = ROOT / "artifacts" / "swiglu_bf16_sm90a"
sys.path.insert(0, str(ROOT / "artifacts" / "common"))
import kwiki_harness  # noqa: E402  (the harness's own contract check and comparison)

TRITON = ["triton_flat"]  # the module's Triton variants: each one runs below
# One bf16 ulp, relative (8 significant bits): the GPU's round to nearest is within half of it, the interpreter's
# truncation within one. No absolute slack: silu(a) * b is products and a quotient only, so its fp32 error is a few
# fp32 ulps relative at any magnitude, far inside the 2^-14 relative that one bf16 ulp leaves above a truncation.
BF16_ULP = 2.0 ** -7
GATES = [-80.0, -20.0, -5.0, -0.0, 0.0, 5.0, 20.0, 80.0]  # silu's tails: sigmoid(-80) ~ 2e-35, sigmoid(80) = 1
interpreted = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                 reason="needs TRITON_INTERPRET=1 from the start (never set here: it would hold for "
                                        "the whole process)")


def _module(monkeypatch: pytest.MonkeyPatch | None = None) -> ModuleType:
    return artifact_module(ART, "swiglu_bf16_sm90a.py", "swiglu_under_test", monkeypatch)


def _params(op: str, rows: int, cols: int) -> dict[str, Any]:
    return {"op": op, "rows": rows, "cols": cols, "dtype": "bfloat16"}


def _close(got: Any, want: Any, rtol: float = BF16_ULP, atol: float = 0.0) -> tuple[bool, str]:
    """The harness's comparison: every element finite and |got - want| <= atol + rtol * |want|."""
    ok, detail, _, _ = kwiki_harness.compare(got, want, atol, rtol, "c")
    return ok, detail


# ---------------------------------------------------------------- the module's contract, without the interpreter


def test_the_harness_finds_no_contract_problem_and_the_manifest_lists_the_variants() -> None:
    mod = _module()
    assert kwiki_harness.contract_problems(mod) == []
    manifest = yaml.safe_load((ART / "artifact.yaml").read_text(encoding="utf-8"))
    assert [v["name"] for v in manifest["variants"]] == mod.VARIANTS
    assert [v for v in mod.VARIANTS if v.startswith("triton")] == TRITON


def test_every_grid_entry_passes_the_check_and_one_is_off_the_block() -> None:
    """make_inputs holds the check: each entry is made cut to one row, then to one column (the claimed shape whole
    would be 117 M elements), so its op, rows and cols all pass through it."""
    pytest.importorskip("torch")
    mod = _module()
    manifest = yaml.safe_load((ART / "artifact.yaml").read_text(encoding="utf-8"))
    for p in [*mod.GRID, *manifest["sanitize"]["params"]]:
        assert p["dtype"] in mod.TOLERANCES, p
        assert set(mod.make_inputs({**p, "rows": 1}, 0, "cpu")) == ({"a"} if p["op"] == "copy" else {"a", "b"})
        mod.make_inputs({**p, "cols": 1}, 0, "cpu")
    off = [p for p in mod.GRID if p["op"] == "swiglu" and p["rows"] * p["cols"] % mod.BLOCK]
    assert off == [_params("swiglu", 1001, 5000)]


@pytest.mark.parametrize("bad", [{"op": "geglu"}, {"rows": 0}, {"cols": 0}, {"rows": -3}])
def test_bad_params_are_refused_before_any_tensor(bad: dict[str, Any]) -> None:
    """Asked for CUDA, which a CPU build of torch cannot give a generator for: the error is still the check's."""
    pytest.importorskip("torch")
    mod = _module()
    for device in ("cpu", "cuda"):
        with pytest.raises(ValueError, match=r"^swiglu: params .*: op is copy or swiglu, rows and cols positive$"):
            mod.make_inputs({**_params("swiglu", 3, 1000), **bad}, 0, device)


def test_each_variant_runs_where_the_module_says() -> None:
    """The copy on the copy only; eager, Liger and the Triton kernel on every SwiGLU entry; torch.compile at the
    claimed shape only (its compile costs 10-40 s)."""
    mod = _module()
    runs = {v: [p for p in mod.GRID if mod.applies(v, p)] for v in mod.VARIANTS}
    copies = [p for p in mod.GRID if p["op"] == "copy"]
    swiglus = [p for p in mod.GRID if p["op"] == "swiglu"]
    assert copies and len(copies) + len(swiglus) == len(mod.GRID)
    assert runs["torch_copy"] == copies
    assert runs["torch_eager"] == runs["liger"] == runs["triton_flat"] == swiglus
    assert runs["torch_compile"] == [_params("swiglu", 8192, 14336)]


def test_liger_kernel_absent_is_refused_saying_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")  # load() imports it first
    for name in ("liger_kernel", "liger_kernel.ops", "liger_kernel.ops.swiglu"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it fails, installed or not
    with pytest.raises(RuntimeError, match=r"Liger-Kernel is not installed here .*; pip install liger-kernel"):
        _module().load("liger")


@pytest.mark.parametrize("op", ["swiglu", "copy"])
def test_the_eager_baselines_match_the_reference_off_the_block(op: str) -> None:
    torch = pytest.importorskip("torch")
    mod = _module()
    params = _params(op, 3, 1000)
    inputs = mod.make_inputs(params, 5, "cpu")
    outputs = mod.make_outputs(params, inputs)
    name = "torch_copy" if op == "copy" else "torch_eager"
    got = mod.load(name)(inputs, outputs) or outputs  # the copy writes its output, eager returns its own
    ref = mod.reference(params, inputs)["c"]
    if op == "copy":
        assert torch.equal(got["c"], ref)
        return
    assert ref.dtype == torch.float64
    atol, rtol, _ = mod.TOLERANCES["bfloat16"]
    ok, detail = _close(got["c"], ref, rtol, atol)
    assert ok, detail


# ---------------------------------------------------------------- the Triton variant, under the interpreter


def _interpreted_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    artifact_module(ART, "kernels.py", "kernels", monkeypatch)  # what the module's `import kernels` finds, this test
    return _module(monkeypatch)


def _poisoned(like: Any) -> tuple[Any, Any]:
    """A tensor shaped like `like`, the first half of a buffer twice its size, every byte 0xFF (NaN in bf16); the
    buffer, whose second half is the guard."""
    import torch

    buf = torch.empty(2 * like.numel(), dtype=like.dtype)
    buf.view(torch.uint8).fill_(0xFF)
    return buf[:like.numel()].view(like.shape), buf


def _guard_untouched(buf: Any) -> bool:
    import torch

    return bool((buf[buf.numel() // 2:].view(torch.uint8) == 0xFF).all())


def _run(mod: ModuleType, params: dict[str, Any], inputs: dict[str, Any]) -> Any:
    """triton_flat's c through the module's load(), written into a poisoned tensor whose guard must stay poisoned;
    the inputs must be left as they were."""
    assert mod.applies("triton_flat", params)
    c, buf = _poisoned(mod.make_outputs(params, inputs)["c"])
    pristine = {k: t.clone() for k, t in inputs.items()}
    mod.load("triton_flat")(dict(inputs), {"c": c})
    assert kwiki_harness.inputs_changed(inputs, pristine) is None
    assert _guard_untouched(buf), "triton_flat wrote past its output"
    return c


@interpreted
@pytest.mark.parametrize(("rows", "cols"), [
    (3, 1000),  # 3000 elements: the second block is partial
    (3, 5000),  # 15000: eight blocks, the last with 664 elements
    (1, 9),  # less than one block
    (2, 2048),  # exactly two blocks
])
def test_the_kernel_matches_fp64(rows: int, cols: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Within a bf16 ulp of the fp64 reference, relative, with the last elements' gates far into silu's tails."""
    import torch

    mod = _interpreted_module(monkeypatch)
    params = _params("swiglu", rows, cols)
    inputs = mod.make_inputs(params, 11, "cpu")
    inputs["a"].view(-1)[-len(GATES):] = torch.tensor(GATES, dtype=torch.bfloat16)
    got = _run(mod, params, inputs)
    ref = mod.reference(params, inputs)["c"]
    assert ref.dtype == torch.float64 and got.dtype == torch.bfloat16
    ok, detail = _close(got, ref)
    assert ok, detail


@interpreted
def test_a_and_b_swapped_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above rejects a kernel that gates the wrong operand: run with a and b swapped, its c passes
    against the reference of the swapped inputs and fails against the right one."""
    mod = _interpreted_module(monkeypatch)
    params = _params("swiglu", 3, 1000)
    inputs = mod.make_inputs(params, 11, "cpu")
    swapped = {"a": inputs["b"], "b": inputs["a"]}
    got = _run(mod, params, swapped)
    assert _close(got, mod.reference(params, swapped)["c"])[0]
    assert not _close(got, mod.reference(params, inputs)["c"])[0]


@interpreted
def test_a_kernel_an_element_short_or_past_the_end_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The poison and guard checks above can fail: the kernel told one element fewer than c holds leaves c's last
    element NaN, which the comparison rejects; told one more (its inputs read from tensors that have it), it writes
    that element into the guard."""
    import torch
    import triton

    mod = _interpreted_module(monkeypatch)
    kernels = sys.modules["kernels"]
    n = 3000
    inputs = mod.make_inputs(_params("swiglu", 1, n + 1), 11, "cpu")
    a, b = inputs["a"], inputs["b"]
    want = mod.reference(_params("swiglu", 1, n), {"a": a[:, :n], "b": b[:, :n]})["c"]
    seen = {}
    for told in (n, n - 1, n + 1):
        c, buf = _poisoned(torch.empty(1, n, dtype=torch.bfloat16))
        kernels.swiglu_kernel[(triton.cdiv(told, mod.BLOCK),)](a, b, c, told, BLOCK=mod.BLOCK)
        seen[told] = _close(c, want), _guard_untouched(buf)
    assert seen[n][0][0] and seen[n][1]
    assert not seen[n - 1][0][0] and re.search(r"1 of 3000 elements not .*index 2999: got nan", seen[n - 1][0][1])
    assert seen[n + 1][0][0] and not seen[n + 1][1]
