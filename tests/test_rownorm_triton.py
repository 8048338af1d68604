"""rownorm_bf16_sm90a (RMSNorm, LayerNorm, the fused residual add + RMSNorm + fp8 quantization, and a copy) on a CPU.

Without Triton's interpreter, these tests check the module's contract. The harness finds no problem in it and the
manifest lists the module's variants. Every GRID and sanitize entry passes the module's own check, and each norm op
has a GRID entry whose hidden size is not a power of two, so the kernels' block has masked lanes. Bad params are
refused with a ValueError before any tensor is made.
applies() runs each variant where the module says: the copies on the copy only, triton_rows on RMSNorm only and
torch.compile at the claimed shape only. The Liger baseline says how to install Liger-Kernel where it is absent, and
the eager baselines, which load() picks by the names of the inputs, agree with the fp64 reference. A norm that lets
the padded lanes of its block in is rejected by the comparison the kernels are held to.

Under the interpreter (a process started with TRITON_INTERPRET=1; skipped elsewhere), every Triton variant runs
through the module's own load() on CPU tensors at shapes off every tile. Its outputs are poisoned first (every byte
0xFF, as the harness does: NaN in bf16, fp32 and e4m3), each followed by a guard of as many poisoned elements that
must stay so, and its inputs must be left as they were. Results are compared with the module's fp64 reference
within one bf16 ulp, because Triton's interpreter rounds fp32 to bf16 toward zero where the GPU rounds to nearest.
The fused op is compared as tests/test_norm_fused_triton.py does it (its y and q from the kernel's own r, the
interpreter's lost fp8 carries left out and counted). A kernel run with a wrong weight, and a mask that reaches one
row too far, are shown to fail these checks.
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
ART = ROOT / "artifacts" / "rownorm_bf16_sm90a"
sys.path.insert(0, str(ROOT / "artifacts" / "common"))
import kwiki_harness  # noqa: E402  (the harness's own contract check and comparison)

TRITON = ["triton_copy", "triton_row", "triton_rows"]  # the module's Triton variants: each one runs below
# One bf16 ulp, relative (8 significant bits): the GPU's round to nearest is within half of it, the interpreter's
# truncation within one. FP32 is the absolute slack for the fp32 math before that rounding (sums of 5000 squares,
# a LayerNorm's fp32 mean subtracted from rows whose mean is up to 3), where an output is close to zero.
BF16_ULP, FP32 = 2.0 ** -7, 1e-6
interpreted = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                 reason="needs TRITON_INTERPRET=1 from the start (never set here: it would hold for "
                                        "the whole process)")


def _module(monkeypatch: pytest.MonkeyPatch | None = None) -> ModuleType:
    return artifact_module(ART, "rownorm.py", "rownorm_under_test", monkeypatch)


def _params(op: str, rows: int, hidden: int) -> dict[str, Any]:
    dtype = "float8_e4m3fn" if op == "add_rmsnorm_fp8" else "bfloat16"
    return {"op": op, "rows": rows, "hidden": hidden, "dtype": dtype}


def _block(hidden: int) -> int:
    """The kernels' BLOCK: triton.next_power_of_2(hidden), the whole row in one power-of-two block."""
    return 1 << (hidden - 1).bit_length()


def _close(got: Any, want: Any, rtol: float = BF16_ULP, atol: float = FP32, name: str = "y") -> tuple[bool, str]:
    """The harness's comparison: every element finite and |got - want| <= atol + rtol * |want|."""
    ok, detail, _, _ = kwiki_harness.compare(got, want, atol, rtol, name)
    return ok, detail


# ---------------------------------------------------------------- the module's contract, without the interpreter


def test_the_harness_finds_no_contract_problem_and_the_manifest_lists_the_variants() -> None:
    mod = _module()
    assert kwiki_harness.contract_problems(mod) == []
    manifest = yaml.safe_load((ART / "artifact.yaml").read_text(encoding="utf-8"))
    assert [v["name"] for v in manifest["variants"]] == mod.VARIANTS
    assert [v for v in mod.VARIANTS if v.startswith("triton")] == TRITON


def test_every_grid_entry_passes_the_check_and_each_norm_has_one_off_tile() -> None:
    """The sanitize entries too; off tile: a hidden size below its power-of-two block (the masked lanes), an odd
    row count; the sanitize list also has a row count that the 4 rows a program of triton_rows do not divide."""
    mod = _module()
    manifest = yaml.safe_load((ART / "artifact.yaml").read_text(encoding="utf-8"))
    entries = [*mod.GRID, *manifest["sanitize"]["params"]]
    for p in entries:
        mod._check(p)
        assert p["dtype"] == _params(p["op"], 1, 1)["dtype"] and p["dtype"] in mod.TOLERANCES, p
    for op in mod.NORMS:
        off = [p for p in mod.GRID if p["op"] == op and _block(p["hidden"]) != p["hidden"] and p["rows"] % 2]
        assert off == [_params(op, 1001, 5000)], op
    rows_per_program = [(p["rows"], 4096 // _block(p["hidden"])) for p in entries if p["op"] == "rmsnorm"]
    assert any(per > 1 and rows % per for rows, per in rows_per_program)


@pytest.mark.parametrize(("bad", "says"), [
    ({"op": "softmax"}, "rownorm: op 'softmax' is not one of"),
    ({"hidden": 0}, "rownorm: hidden=0, rows=3: a row must hold 1..32768 elements"),
    ({"hidden": 32769}, "rownorm: hidden=32769, rows=3: a row must hold 1..32768 elements"),
    ({"rows": 0}, "rownorm: hidden=1000, rows=0: a row must hold"),
])
def test_bad_params_are_refused_before_any_tensor(bad: dict[str, Any], says: str) -> None:
    """Asked for CUDA, which a CPU build of torch cannot give a generator for: the error is still the check's."""
    pytest.importorskip("torch")
    mod = _module()
    for device in ("cpu", "cuda"):
        with pytest.raises(ValueError, match=f"^{re.escape(says)}"):
            mod.make_inputs({**_params("rmsnorm", 3, 1000), **bad}, 0, device)
    mod._check(_params("rmsnorm", 1, mod.MAX_HIDDEN))  # the limits themselves are accepted
    mod._check(_params("layernorm", 1, 1))


def test_each_variant_runs_where_the_module_says() -> None:
    """Every variant on every norm op (the module's docstring), but: the copies on the copy only, triton_rows on
    RMSNorm only, torch.compile at the claimed shape only (its compile costs 10-40 s)."""
    mod = _module()
    runs = {v: [p for p in mod.GRID if mod.applies(v, p)] for v in mod.VARIANTS}
    copies = [p for p in mod.GRID if p["op"] == "copy"]
    norms = [p for p in mod.GRID if p["op"] != "copy"]
    assert copies and runs["torch_copy"] == runs["triton_copy"] == copies
    assert runs["torch_eager"] == runs["liger"] == runs["triton_row"] == norms
    assert {p["op"] for p in norms} == set(mod.NORMS)
    assert runs["triton_rows"] == [p for p in norms if p["op"] == "rmsnorm"]
    assert [(p["op"], p["rows"], p["hidden"]) for p in runs["torch_compile"]] == [(op, 8192, 8192) for op in mod.NORMS]


def test_liger_kernel_absent_is_refused_saying_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("liger_kernel", "liger_kernel.ops", "liger_kernel.ops.fused_add_rms_norm",
                 "liger_kernel.ops.layer_norm", "liger_kernel.ops.rms_norm"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it fails, installed or not
    with pytest.raises(RuntimeError, match=r"Liger-Kernel is not installed here .*; pip install liger-kernel"):
        _module().load("liger")


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm", "add_rmsnorm_fp8", "copy"])
def test_the_eager_baselines_match_the_reference_off_tile(op: str) -> None:
    """load() returns one callable for every op, which picks the op from the names of its inputs."""
    torch = pytest.importorskip("torch")
    mod = _module()
    params = _params(op, 3, 5000)
    inputs = mod.make_inputs(params, 5, "cpu")
    outputs = mod.make_outputs(params, inputs)
    name = "torch_copy" if op == "copy" else "torch_eager"
    got = mod.load(name)(inputs, outputs) or outputs  # the copy writes its output, the others return theirs
    ref = mod.reference(params, inputs)
    assert set(got) == set(ref)
    if op == "copy":
        assert torch.equal(got["y"], ref["y"])
        return
    atol, rtol, _ = mod.TOLERANCES[params["dtype"]]
    for k in ref:
        assert ref[k].dtype == (torch.bfloat16 if k == "r" else torch.float64), k  # r: the bf16 the kernels write
        ok, detail = _close(got[k], ref[k], rtol, atol, k)
        assert ok, (k, detail)


def _off_centre(x: Any) -> Any:
    """x with row k moved by (k % 3 + 1) * (-1)^k (1, -2, 3, -1, ...), rounded to bf16: make_inputs' rows have a
    mean of about 0, which hides a LayerNorm's centring and whether its padded lanes enter the variance."""
    import torch

    shift = torch.tensor([(k % 3 + 1) * (-1.0) ** k for k in range(x.shape[0])], dtype=torch.float64)
    return (x.double() + shift[:, None]).to(torch.bfloat16)


def test_norms_that_let_the_padded_lanes_in_are_rejected() -> None:
    """At hidden 5000 (block 8192): an RMS over the whole block instead of the row, and a LayerNorm variance with the
    padded lanes' (0 - mean)^2 in it (a kernel without its tl.where), fail the comparison the kernels pass below and
    the module's own tolerance. The latter only on rows with a mean, so the interpreted LayerNorm runs on such rows:
    on make_inputs' rows (mean about 0) it passes the module's tolerance, which is what the harness checks."""
    torch = pytest.importorskip("torch")
    mod = _module()
    atol, rtol, _ = mod.TOLERANCES["bfloat16"]
    h, pad = 5000, _block(5000) - 5000
    params = _params("rmsnorm", 3, h)
    inputs = mod.make_inputs(params, 11, "cpu")
    x, w = inputs["x"].double(), inputs["w"].double()
    over_block = x * torch.rsqrt(x.square().sum(-1, keepdim=True) / (h + pad) + mod.EPS["rmsnorm"]) * w
    ref = mod.reference(params, inputs)["y"]
    assert not _close(over_block, ref)[0] and not _close(over_block, ref, rtol, atol)[0]

    def padded_layernorm(i: dict[str, Any]) -> Any:
        xd = i["x"].double()
        mean = xd.mean(-1, keepdim=True)
        var = ((xd - mean).square().sum(-1, keepdim=True) + pad * mean.square()) / h
        return (xd - mean) * torch.rsqrt(var + mod.EPS["layernorm"]) * i["w"].double() + i["b"].double()

    params = _params("layernorm", 3, h)
    inputs = mod.make_inputs(params, 11, "cpu")
    assert _close(padded_layernorm(inputs), mod.reference(params, inputs)["y"], rtol, atol)[0]
    shifted = {**inputs, "x": _off_centre(inputs["x"])}
    ref = mod.reference(params, shifted)["y"]
    assert not _close(padded_layernorm(shifted), ref)[0] and not _close(padded_layernorm(shifted), ref, rtol, atol)[0]


# ---------------------------------------------------------------- the Triton variants, under the interpreter


def _interpreted_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    artifact_module(ART, "kernels.py", "kernels", monkeypatch)  # what the module's `import kernels` finds, this test
    return _module(monkeypatch)


def _poisoned(like: Any) -> tuple[Any, Any]:
    """A tensor shaped like `like`, the first half of a buffer twice its size, every byte 0xFF (NaN in bf16, fp32
    and e4m3); the buffer, whose second half is the guard."""
    import torch

    buf = torch.empty(2 * like.numel(), dtype=like.dtype)
    buf.view(torch.uint8).fill_(0xFF)
    return buf[:like.numel()].view(like.shape), buf


def _guard_untouched(buf: Any) -> bool:
    import torch

    return bool((buf[buf.numel() // 2:].view(torch.uint8) == 0xFF).all())


def _run(mod: ModuleType, name: str, params: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """The variant's outputs through the module's load(), written into poisoned tensors whose guards must stay
    poisoned; the inputs must be left as they were."""
    assert mod.applies(name, params)
    outputs, bufs = {}, {}
    for k, t in mod.make_outputs(params, inputs).items():
        outputs[k], bufs[k] = _poisoned(t)
    pristine = {k: t.clone() for k, t in inputs.items()}
    mod.load(name)(dict(inputs), dict(outputs))
    assert kwiki_harness.inputs_changed(inputs, pristine) is None
    for k, buf in bufs.items():
        assert _guard_untouched(buf), f"{name} wrote past its output {k}"
    return outputs


@interpreted
@pytest.mark.parametrize(("name", "op", "rows", "hidden"), [
    ("triton_row", "rmsnorm", 3, 5000),
    ("triton_row", "rmsnorm", 4, 1000),
    ("triton_row", "rmsnorm", 2, 1),  # a row of one element, a block of one
    ("triton_rows", "rmsnorm", 5, 1000),  # 4 rows a program: the second has one row and three masked
    ("triton_rows", "rmsnorm", 7, 300),  # 8 rows a program, one masked
    ("triton_rows", "rmsnorm", 3, 5000),  # past 4096: one row a program
    ("triton_row", "layernorm", 3, 5000),
    ("triton_row", "layernorm", 4, 1000),
])
def test_the_bf16_norms_match_fp64(name: str, op: str, rows: int, hidden: int,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Within a bf16 ulp of the fp64 reference; LayerNorm on rows with a mean (see _off_centre)."""
    import torch

    mod = _interpreted_module(monkeypatch)
    params = _params(op, rows, hidden)
    inputs = mod.make_inputs(params, 11, "cpu")
    if op == "layernorm":
        inputs["x"] = _off_centre(inputs["x"])
    got = _run(mod, name, params, inputs)["y"]
    ref = mod.reference(params, inputs)["y"]
    assert ref.dtype == torch.float64 and got.dtype == torch.bfloat16
    ok, detail = _close(got, ref)
    assert ok, detail


@interpreted
@pytest.mark.parametrize(("rows", "hidden"), [(3, 5000), (2, 1000)])
def test_the_fused_add_rmsnorm_fp8_matches_fp64(rows: int, hidden: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """r within a bf16 ulp of the rounded sum (the interpreter truncates it, the GPU rounds it to nearest); the
    scale and q against the reference computed from the kernel's own r, which isolates the norm and the quantization
    from that rounding: the scale within fp32 rounding, q within half an e4m3 ulp."""
    import torch

    mod = _interpreted_module(monkeypatch)
    params = _params("add_rmsnorm_fp8", rows, hidden)
    inputs = mod.make_inputs(params, 11, "cpu")
    got = _run(mod, "triton_row", params, inputs)
    ok, detail = _close(got["r"], mod.reference(params, inputs)["r"], atol=0, name="r")
    assert ok, detail
    ref = mod.reference(params, {**inputs, "x": got["r"], "res": torch.zeros_like(got["r"])})
    ok, detail = _close(got["s"], ref["s"], rtol=1e-5, atol=0, name="s")  # an fp32 amax / 448
    assert ok, detail
    q, want = got["q"].double(), ref["q"]
    assert torch.isfinite(q).all() and q.abs().max() <= 448
    # Triton's interpreter loses the carry when rounding up fills the mantissa (1.111b becomes 1.000b of the same
    # binade, half the right value): leave out exactly those, a value whose nearest e4m3 is a power of two and
    # which came out as half of it
    nearest = want.float().to(torch.float8_e4m3fn).double()
    carried = (torch.frexp(nearest).mantissa.abs() == 0.5) & (q == nearest / 2)
    assert carried.float().mean() < 0.1
    ok_q = torch.isclose(q, want, rtol=2.0 ** -4, atol=2.0 ** -10)  # half an e4m3 ulp (subnormals: 2^-10)
    assert (ok_q | carried).all(), (q[~ok_q & ~carried], want[~ok_q & ~carried])
    assert (q.abs().amax(-1) == 448).all()  # each row's largest value lands on the format's largest


@interpreted
@pytest.mark.parametrize(("rows", "hidden"), [(3, 5000), (1, 1000)])
def test_the_triton_copy_is_exact(rows: int, hidden: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """4096 elements a program: 15000 elements end in a partial block, 1000 are less than one."""
    import torch

    mod = _interpreted_module(monkeypatch)
    params = _params("copy", rows, hidden)
    inputs = mod.make_inputs(params, 11, "cpu")
    assert torch.equal(_run(mod, "triton_copy", params, inputs)["y"], mod.reference(params, inputs)["y"])


@interpreted
@pytest.mark.parametrize(("name", "rows", "hidden"), [("triton_row", 3, 5000), ("triton_rows", 5, 1000)])
def test_a_wrong_weight_in_the_last_column_fails(name: str, rows: int, hidden: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above rejects a kernel that gets one column wrong: run with the weight's last element (the
    last before the masked lanes) a quarter larger, its rows pass against the reference of that weight and fail
    against the right one."""
    mod = _interpreted_module(monkeypatch)
    params = _params("rmsnorm", rows, hidden)
    inputs = mod.make_inputs(params, 11, "cpu")
    wrong = {**inputs, "w": inputs["w"].clone()}
    wrong["w"][-1] *= 1.25
    got = _run(mod, name, params, wrong)["y"]
    assert _close(got, mod.reference(params, wrong)["y"])[0]
    assert not _close(got, mod.reference(params, inputs)["y"])[0]


@interpreted
def test_a_mask_one_row_too_far_writes_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard check above can fail: triton_rows' kernel told there is one row more than the output holds (its
    inputs read from a buffer that has that row) writes it into the guard."""
    import torch

    mod = _interpreted_module(monkeypatch)
    kernels = sys.modules["kernels"]
    rows, h = 5, 1000
    params = _params("rmsnorm", rows + 1, h)
    inputs = mod.make_inputs(params, 11, "cpu")
    y, buf = _poisoned(torch.empty(rows, h, dtype=torch.bfloat16))
    kernels.rmsnorm_kernel[(2,)](inputs["x"], inputs["w"], y, rows, h, mod.EPS["rmsnorm"], ROWS=4, BLOCK=1024)
    assert _guard_untouched(buf)  # the right row count
    kernels.rmsnorm_kernel[(2,)](inputs["x"], inputs["w"], y, rows + 1, h, mod.EPS["rmsnorm"], ROWS=4, BLOCK=1024)
    assert not _guard_untouched(buf)
