"""Triton 3.6's CPU interpreter (TRITON_INTERPRET=1) where it differs from the GPU, for the tests that run an
artifact's Triton kernels on the CPU, and the artifact's module loaded under a name of its own.

`patch()` mends, for the test's process only and once, the interpreter's defects that every such test meets (none
is in the kernels):
- it converts a 1-element array with int(), which numpy >= 2.4 refuses: a tensor's __index__ reads its one element;
- its tl.dot multiplies its operands' storage as integers: bf16 bit patterns (uint16) and e4m3 ones (uint8). Both
  are decoded to fp32 first, which is exact.
A test whose kernels meet a defect of their own patches it beside this (test_decode_gemm_triton.py's integer to
bf16 cast, test_gemm_epilogue_triton.py's fp32 to e4m3 rounding).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def patch() -> None:
    import numpy as np
    import torch
    import triton.language as tl
    import triton.runtime.interpreter as interp

    if getattr(interp, "_kwiki_patched", False):
        return
    lang_tensor = interp._patch_lang_tensor

    def patch_tensor(tensor: Any, scope: Any) -> None:
        lang_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interp._patch_lang_tensor = patch_tensor
    builder = interp.InterpreterBuilder
    dot = builder.create_dot

    def as_f32(h: Any) -> Any:
        if h.dtype.scalar == tl.bfloat16:
            return interp.TensorHandle((h.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
        if h.dtype.scalar == tl.float8e4nv:
            bits = torch.from_numpy(np.ascontiguousarray(h.data).view(np.uint8))
            return interp.TensorHandle(bits.view(torch.float8_e4m3fn).float().numpy(), tl.float32)
        return h

    def create_dot(self: Any, a: Any, b: Any, d: Any, precision: Any, imprecise: Any) -> Any:
        return dot(self, as_f32(a), as_f32(b), d, precision, imprecise)

    builder.create_dot = create_dot
    interp._kwiki_patched = True


def load_artifact(directory: Path, filename: str, name: str) -> ModuleType:
    """The artifact's module `filename` under `name`, its directory first on sys.path (its kernels.py)."""
    sys.path.insert(0, str(directory))
    spec = importlib.util.spec_from_file_location(name, directory / filename)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def artifact_module(directory: Path, filename: str, name: str, monkeypatch: Any = None) -> ModuleType:
    """The artifact's module `filename` under `name`, without touching sys.path; registered in sys.modules for the
    test's duration when `monkeypatch` (pytest's) is given: Triton's interpreter finds a kernel's helpers through
    the kernel's module."""
    spec = importlib.util.spec_from_file_location(name, directory / filename)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    if monkeypatch is not None:
        monkeypatch.setitem(sys.modules, spec.name, mod)
    spec.loader.exec_module(mod)
    return mod
