"""An artifact's Triton kernel compiled for sm_90a without a GPU, for the tests that check what its code becomes:
its SASS (through Triton's bundled cuobjdump), registers and shared memory. Skipped without Triton or that
cuobjdump, and under Triton's interpreter (which holds for the whole process once on)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass
class Compiled:
    cubin: Path
    sass: str  # cuobjdump -sass of the cubin
    shared: int  # bytes of shared memory a program uses
    tool: Path  # the cuobjdump that read it

    @property
    def ops(self) -> list[str]:
        """The SASS opcodes, in order (predicates left out)."""
        return [line.split()[1] if line.split()[1][0] != "@" else line.split()[2]
                for line in self.sass.splitlines() if line.strip().startswith("/*") and len(line.split()) > 2]

    def resources(self) -> str:
        """cuobjdump -res-usage of the cubin (REG:, SHARED:, LOCAL: ...)."""
        return subprocess.run([str(self.tool), "-res-usage", str(self.cubin)], capture_output=True, text=True,
                              check=True).stdout


def compile_sm90a(fn: Any, signature: Mapping[str, str], constexprs: Mapping[str, Any], tmp_path: Path, *,
                  num_warps: int, num_stages: int,
                  aligned: Callable[[str], bool] = lambda name: name.endswith("_ptr")) -> Compiled:
    """`fn` (a @triton.jit function) compiled for sm_90a with `signature` (every argument's type, "constexpr" for
    those in `constexprs`), the arguments `aligned` names declared 16-byte divisible, as a launch would find them."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("compiles for the GPU: run without TRITON_INTERPRET")
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        pytest.skip("this Triton has no bundled cuobjdump")
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in fn.arg_names if aligned(n)}
    src = triton.compiler.ASTSource(fn=fn, signature=dict(signature), constexprs=dict(constexprs), attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    cubin = tmp_path / f"{fn.__name__}.cubin"
    cubin.write_bytes(compiled.asm["cubin"])
    sass = subprocess.run([str(tool), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    return Compiled(cubin, sass, compiled.metadata.shared, tool)
