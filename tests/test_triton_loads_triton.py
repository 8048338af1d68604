"""The Triton copy and read streams artifact (triton_loads_sm90a) on the CPU, in two parts.

Without Triton's interpreter: the module passes the harness's contract check and lists the artifact.yaml's
variants, one copy and one read per (BLOCK, num_warps) shape, each applying to its own op only; the sanitize
params leave a partial block for every BLOCK; the bytes work() declares are those the tensors hold (a copy's read
plus its write, a read's read); the read's pairwise reference is the XOR of every word, and torch's copy is exact.
The module checks no params (make_inputs takes any op but "copy" for a read and rounds the bytes down to whole
words), so no refusal is tested.

Under Triton's CPU interpreter (only in a process started with TRITON_INTERPRET=1, which is never set here): each
Triton variant runs through the module's own load() on CPU tensors whose length no BLOCK divides, outputs poisoned
first, and must match the reference bit for bit: the copy's output equals its input, the read's word equals the
XOR of every input word. A launch that drops the last word, through the same load(), is refused: the check can fail.
"""

from __future__ import annotations

import functools
import operator
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
ART = ROOT / "artifacts" / "triton_loads_sm90a"
sys.path.insert(0, str(ROOT / "artifacts" / "common"))
import kwiki_harness  # noqa: E402  (the harness's own contract check and comparison)

# words: 17411 = 16384 + 1024 + 3 leaves a partial last block at every BLOCK (two programs at 16384), 5 is less
# than one block, 4099 one word past 4096
WORDS = [17411, 5, 4099]
interpreted = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                 reason="needs TRITON_INTERPRET=1 from the start (never set here: it would hold for "
                                        "the whole process)")


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return artifact_module(ART, "loads.py", "triton_loads_under_test")


def _params(op: str, words: int) -> dict[str, Any]:
    return {"op": op, "bytes": 4 * words, "dtype": "float32" if op == "copy" else "int32"}


def _manifest() -> dict[str, Any]:
    return dict(yaml.safe_load((ART / "artifact.yaml").read_text(encoding="utf-8")))


def _triton_variants() -> list[str]:
    """The artifact.yaml's Triton variants (all but torch's copy)."""
    return [v["name"] for v in _manifest()["variants"] if v["name"].startswith("triton_")]


def _exact(mod: ModuleType, p: dict[str, Any], got: Any, ref: Any, name: str) -> bool:
    """The harness's comparison under the module's tolerance for the dtype, (0, 0): bits, exactly."""
    atol, rtol, _ = mod.TOLERANCES[p["dtype"]]
    assert atol == rtol == 0.0
    return bool(kwiki_harness.compare(got, ref, atol, rtol, name)[0])


# ---------------------------------------------------------------------------------------------
# The module's contract, without the interpreter
# ---------------------------------------------------------------------------------------------

def test_the_module_passes_the_harness_contract_and_lists_the_yaml_variants(mod: ModuleType) -> None:
    assert kwiki_harness.contract_problems(mod) == []
    assert [v["name"] for v in _manifest()["variants"]] == mod.VARIANTS
    shapes = {(int(a[1:]), int(b[1:])) for a, b in (n.split("_")[2:4] for n in _triton_variants())}
    assert shapes == set(mod.SHAPES) and len(_triton_variants()) == 2 * len(mod.SHAPES)
    for block, warps in mod.SHAPES:
        assert {f"triton_copy_b{block}_w{warps}", f"triton_read_b{block}_w{warps}"} <= set(mod.VARIANTS)
        per_thread = block // (32 * warps)
        assert per_thread * 32 * warps == block and per_thread % 4 == 0  # whole 16-byte accesses per thread


def test_the_grid_and_the_sanitize_params(mod: ModuleType) -> None:
    assert mod.GRID == [_params("copy", mod.BYTES // 4), _params("read", mod.BYTES // 4)]
    blocks = {b for b, _ in mod.SHAPES}
    sanitize = _manifest()["sanitize"]["params"]
    assert {p["op"] for p in sanitize} == {"copy", "read"}
    for p in sanitize:
        assert p["bytes"] % 4 == 0 and p["dtype"] in mod.TOLERANCES
        assert all((p["bytes"] // 4) % b for b in blocks), p  # a partial last block at every BLOCK
    assert any((p["bytes"] // 4) % 16 for p in sanitize)  # and a length not even a multiple of 16


def test_each_variant_applies_to_its_own_op_only(mod: ModuleType) -> None:
    for name in mod.VARIANTS:
        ops = {p["op"] for p in mod.GRID if mod.applies(name, p)}
        assert ops == ({"read"} if name.startswith("triton_read") else {"copy"}), name


@pytest.mark.parametrize("op", ["copy", "read"])
def test_work_counts_the_bytes_the_tensors_hold(mod: ModuleType, op: str) -> None:
    p = _params(op, 1001)
    inputs = mod.make_inputs(p, 0, "cpu")
    outputs = mod.make_outputs(p, inputs)
    x = inputs["x"]
    assert str(x.dtype) == f"torch.{p['dtype']}" and x.shape == (1001,)
    read = x.numel() * x.element_size()
    assert read == p["bytes"]
    if op == "copy":
        y = outputs["y"]
        assert y.dtype == x.dtype and y.shape == x.shape and y.data_ptr() != x.data_ptr()
        assert mod.work(p) == {"bytes": float(read + y.numel() * y.element_size()), "bytes_level": "dram"}
        assert bool((x >= 0.5).all() and (x < 1.5).all())  # never zero: an unwritten zero cannot pass
    else:
        assert outputs["s"].shape == (1,) and outputs["s"].dtype == torch.int32
        assert mod.work(p) == {"bytes": float(read), "bytes_level": "dram"}  # the one-word result is not counted
        assert bool((x < 0).any() and (x > 0).any())
    assert mod.work(mod.GRID[0])["bytes"] == 2 * mod.work(mod.GRID[1])["bytes"] == 2.0 * mod.BYTES


@pytest.mark.parametrize("words", [1, 2, 3, 7, 1001, 4099])
def test_the_read_reference_is_the_xor_of_every_word(mod: ModuleType, words: int) -> None:
    p = _params("read", words)
    inputs = mod.make_inputs(p, words, "cpu")
    pristine = inputs["x"].clone()
    s = mod.reference(p, inputs)["s"]
    assert s.shape == (1,) and s.dtype == torch.int32
    assert int(s[0]) == functools.reduce(operator.xor, inputs["x"].tolist(), 0)
    assert torch.equal(inputs["x"], pristine)  # the halving leaves the input as it was


def test_torch_copy_is_exact_on_the_cpu(mod: ModuleType) -> None:
    p = _params("copy", 4099)
    inputs = mod.make_inputs(p, 3, "cpu")
    outputs = {k: t.fill_(float("nan")) for k, t in mod.make_outputs(p, inputs).items()}
    got = mod.load("torch_copy")(inputs, outputs) or outputs
    assert _exact(mod, p, got["y"], mod.reference(p, inputs)["y"], "y")


# ---------------------------------------------------------------------------------------------
# The Triton variants, under the interpreter
# ---------------------------------------------------------------------------------------------

def _interpreted_kernels(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The artifact's kernels.py registered as `kernels` for this test (load()'s `import kernels` finds it)."""
    pytest.importorskip("triton")
    return artifact_module(ART, "kernels.py", "kernels", monkeypatch)


def _run(mod: ModuleType, name: str, words: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(params, inputs, outputs) of variant `name` through the module's load(), the outputs poisoned first as the
    harness does (0xFF bytes: NaN for the copy, -1 for the read's word); the inputs are checked unchanged."""
    p = _params("read" if "read" in name else "copy", words)
    inputs = mod.make_inputs(p, words, "cpu")
    pristine = {k: t.clone() for k, t in inputs.items()}
    outputs = mod.make_outputs(p, inputs)
    for t in outputs.values():
        t.view(torch.uint8).fill_(0xFF)
    assert mod.applies(name, p)
    got = mod.load(name)(inputs, outputs) or outputs
    assert kwiki_harness.inputs_changed(inputs, pristine) is None
    return p, inputs, got


@interpreted
@pytest.mark.parametrize("words", WORDS)
@pytest.mark.parametrize("name", _triton_variants())
def test_every_triton_variant_matches_bit_for_bit(mod: ModuleType, name: str, words: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _interpreted_kernels(monkeypatch)
    p, inputs, got = _run(mod, name, words)
    ref = mod.reference(p, inputs)
    (key,) = ref
    assert _exact(mod, p, got[key], ref[key], key)
    if key == "y":
        assert torch.equal(got["y"].view(torch.int32), inputs["x"].view(torch.int32))  # the input's very bits


class _DropsTheLastWord:
    """A kernel launched with one word fewer than the module passes: what a wrong tail mask would do."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel

    def __getitem__(self, grid: Any) -> Any:
        launch = self.kernel[grid]
        return lambda x, out, n, **meta: launch(x, out, n - 1, **meta)


@interpreted
@pytest.mark.parametrize("name", ["triton_copy_b1024_w4", "triton_read_b16384_w16"])
def test_a_launch_that_drops_the_last_word_fails(mod: ModuleType, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above can fail: the same variant, its kernel told one word fewer, is refused."""
    kernels = _interpreted_kernels(monkeypatch)
    kernel = "read_kernel" if "read" in name else "copy_kernel"
    monkeypatch.setattr(kernels, kernel, _DropsTheLastWord(getattr(kernels, kernel)))
    p, inputs, got = _run(mod, name, WORDS[0])
    ref = mod.reference(p, inputs)
    (key,) = ref
    assert int(inputs["x"].view(torch.int32)[-1]) != 0  # the dropped word changes the XOR
    assert not _exact(mod, p, got[key], ref[key], key)
