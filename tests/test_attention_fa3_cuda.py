"""attention_fwd_bf16_sm90a's FlashAttention-3-style CUDA rungs (fa3.cu) without a GPU.

The manifest climbs from the Triton rungs to the three CUDA ones and the page's claims name them at GRID entries;
compiled with nvcc for sm_90a as kwiki builds the module's library, each rung's SASS expectations hold on its own
kernel and fail on the rung below it (the ping-pong's named-barrier arrivals, the overlap's wgmma wait of depth 1),
P V is a wgmma whose A operand is registers and whose B is transposed (which the opcode patterns cannot say), and
operands the kernels are not built for are refused by name before any CUDA call: by the module, and by the
library's launcher itself (on this machine a CUDA call would return a CUDA error, not -1). The kernels run only on
an H200 (kwiki verify), where the harness checks them against the module's reference."""

from __future__ import annotations

import ctypes
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kwiki.wiki.manifest import Manifest, load_manifest
from kwiki.wiki.pages import load_page

REPO = Path(__file__).resolve().parent.parent
ART = REPO / "artifacts" / "attention_fwd_bf16_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "kernels" / "attention-fwd.md"
RUNGS = ["cuda_fa3_ws", "cuda_fa3_pingpong", "cuda_fa3_overlap"]


def manifest() -> Manifest:
    return load_manifest(ART, REPO)


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("kwiki_test_attention_fa3", ART / "attention.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_cuda_rungs_climb_above_the_triton_ones_and_name_their_kernels() -> None:
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants if v.rung and v.rung >= 2] == [
        ("triton_fa2_split", 2), ("cuda_fa3_ws", 3), ("cuda_fa3_pingpong", 4), ("cuda_fa3_overlap", 5)]
    assert m.python is not None and m.python.cuda == ["fa3.cu"]
    by_name = {v.name: v for v in m.variants}
    for name in RUNGS:
        assert by_name[name].kernels == [name.replace("cuda_", "") + "_kernel"]
        assert by_name[name].sass is not None and {"STL", "LDL"} <= set(by_name[name].sass.forbid)
    mod = _module()
    assert set(mod.FA3) == set(RUNGS) and set(RUNGS) <= set(mod.VARIANTS)
    ours = [p for p in mod.GRID if p["outputs"] == "o" and p["head_dim"] == 128]
    assert {p["seq"] for p in ours} >= {1000, 4096, 8192, 16384}  # every head-dim-128 shape, the off-tile ones included
    assert any(p["kv_heads"] < p["heads"] and p["seq"] % 128 for p in ours)  # grouped-query, off the tile
    assert all(mod.applies(n, p) == (p in ours) for n in RUNGS for p in mod.GRID)  # never head dim 64 or the LSE


def test_the_page_claims_select_the_cuda_rungs_at_grid_entries() -> None:
    page = load_page(PAGE, REPO)
    mod = _module()
    grid = mod.GRID
    named: set[str] = set()
    for c in page.meta.claims:
        if c.measure is None:
            continue
        for sel in (c.measure.of, c.measure.per):
            if sel is None or sel.variant not in RUNGS:
                continue
            named.add(sel.variant)
            at = [p for p in grid if all(p[k] == v for k, v in sel.params.items()) and mod.applies(sel.variant, p)]
            assert len(at) == 1, (c.id, sel.params)
    assert named == set(RUNGS)
    assert any(p["seq"] == 8192 and p["mask"] == "none" for p in grid)


def test_operands_the_kernels_are_not_built_for_are_named() -> None:
    torch = pytest.importorskip("torch")
    mod = _module()
    ok = torch.zeros(1, 2, 40, 128, dtype=torch.bfloat16)
    assert mod.fa3_operands_error(ok, ok, ok, ok.clone()) is None
    d64 = torch.zeros(1, 2, 40, 64, dtype=torch.bfloat16)
    assert "head_dim 64 is not one of (128,)" in mod.fa3_operands_error(d64, d64, d64, d64)
    half = ok.half()
    assert "k is torch.float16" in mod.fa3_operands_error(ok, half, ok, ok)
    strided = torch.zeros(1, 40, 2, 128, dtype=torch.bfloat16).transpose(1, 2)
    assert "v is not contiguous" in mod.fa3_operands_error(ok, ok, strided, ok)
    grouped = torch.zeros(1, 1, 40, 128, dtype=torch.bfloat16)  # one KV head for q's two: grouped-query
    assert mod.fa3_operands_error(ok, grouped, grouped, ok.clone()) is None
    three = torch.zeros(1, 3, 40, 128, dtype=torch.bfloat16)  # 3 KV heads do not divide 2 query heads
    assert "kv_heads dividing heads" in mod.fa3_operands_error(ok, three, three, ok)
    assert "o has shape" in mod.fa3_operands_error(ok, grouped, grouped, grouped)  # o is q's shape, not k's
    wide = torch.zeros(300, 300, 1, 128, dtype=torch.bfloat16)
    assert "batch * heads 90000 is above 65535" in mod.fa3_operands_error(wide, wide, wide, wide)


# ---------------------------------------------------------------- compiled (nvcc) as kwiki builds the library


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    m = manifest()
    build = m.library_build()
    assert build is not None
    out = tmp_path_factory.mktemp("fa3") / "libfa3.so"
    subprocess.run([nvcc, *build.flags, "-gencode=arch=compute_90a,code=sm_90a", f"-I{REPO / 'artifacts' / 'common'}",
                    "-o", str(out), *[str(ART / s) for s in build.sources]],
                   check=True, capture_output=True, timeout=900)
    return out


def _tools() -> Any:
    from kwiki.verify.sass import find_tools

    tools = find_tools()
    if tools is None:
        pytest.skip("no cuobjdump")
    return tools


@pytest.mark.nvcc
@pytest.mark.parametrize(("rung", "below", "words"), [
    ("cuda_fa3_pingpong", "cuda_fa3_ws", "require 'BAR.ARV >= 2'"),                   # the turns' arrivals
    ("cuda_fa3_overlap", "cuda_fa3_pingpong", "require 'WARPGROUP.DEPBAR.LE.DEPTH1'"),  # S_j waited for alone
])
def test_each_cuda_rungs_sass_expectation_holds_on_it_and_fails_on_the_rung_below(library, rung, below, words):
    from kwiki.verify.sass import check_variant, disassemble

    kernels = disassemble(library, _tools())[0]
    by_name = {v.name: v for v in manifest().variants}
    for name in RUNGS:
        assert check_variant(by_name[name], "sm_90a", kernels, {})[1] == [], name
    on_below = by_name[rung].model_copy(update={"kernels": by_name[below].kernels})
    mismatches = check_variant(on_below, "sm_90a", kernels, {})[1]
    assert any(words in m for m in mismatches), mismatches


# HGMMA.64x128x16.F32.BF16 R24, R152, gdesc[UR16].tnspB, R24 : A from registers, B transposed (N-major V)
_RS = re.compile(r"HGMMA\.64x128x16\.F32\.BF16 R\d+, R\d+, gdesc\[UR\d+\]\.tnspB,")
_SS = re.compile(r"HGMMA\.64x128x16\.F32\.BF16 R\d+, gdesc\[UR\d+\], (R\d+|RZ)")


@pytest.mark.nvcc
def test_p_v_takes_p_from_registers_and_v_transposed_and_q_k_both_from_shared_memory(library):
    listing = subprocess.run([_tools().cuobjdump, "-sass", str(library)], capture_output=True, text=True,
                             check=True, timeout=120).stdout
    bodies = dict(re.findall(r"Function : (fa3_\w+_kernel)\n(.*?)(?=\n\s+Function : |\Z)", listing, re.S))
    assert sorted(bodies) == sorted(n.replace("cuda_", "") + "_kernel" for n in RUNGS)
    for name, body in bodies.items():
        assert len(_RS.findall(body)) >= 16, name  # 8 k16 steps of P V, in the loop and after it
        assert len(_SS.findall(body)) >= 16, name  # 8 of Q K^T (2 boxes x 4 k16 steps), first tile and the loop


@pytest.mark.nvcc
@pytest.mark.parametrize(("change", "why"), [({"head_dim": 64}, "head dim"), ({"variant": 3}, "variant"),
                                             ({"q": 8}, "misaligned q"), ({"group": 0}, "no query heads a KV head"),
                                             ({"group": 3}, "8 query heads are not groups of 3")])
def test_the_launcher_refuses_what_it_is_not_built_for_before_any_cuda_call(library, change, why):
    lib = ctypes.CDLL(str(library))
    fn = lib.kwiki_fa3_fwd
    fn.argtypes = [ctypes.c_int, *[ctypes.c_void_p] * 4, *[ctypes.c_int] * 5, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    args = {"variant": 0, "q": 1 << 20, "k": 1 << 20, "v": 1 << 20, "o": 1 << 21, "bh": 8, "seq": 1000,
            "head_dim": 128, "causal": 0, "group": 4, "stream": None} | change
    assert fn(*args.values()) == -1, why  # a CUDA call here (no GPU) would return a CUDA error code instead


@pytest.mark.nvcc
def test_the_module_refuses_operands_by_name_before_calling_the_library(library, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("KWIKI_CUDA_LIBRARY", str(library))
    call = _module().load("cuda_fa3_pingpong")
    q = torch.zeros(1, 2, 40, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"attention\.py\): cuda_fa3_pingpong: .*head_dim 64 is not one of"):
        call({"q": q, "k": q, "v": q, "causal": False}, {"o": torch.empty_like(q)})
