"""stream_k_gemm_sm90a's host-side plan, without Triton: Stream-K's grid never has more programs than iterations.

An empty program between two contributors to a split tile never raises the flag its finisher waits for, so an
uncapped grid hangs on a GEMM with fewer tiles x k-blocks than SMs (tests/test_stream_k_gemm_triton.py runs such
shapes under the interpreter; this test holds the cap where Triton is not installed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ARTIFACT = Path(__file__).resolve().parents[1] / "artifacts" / "stream_k_gemm_sm90a"
spec = importlib.util.spec_from_file_location("kwiki_test_stream_k_gemm", ARTIFACT / "stream_k_gemm.py")
assert spec is not None and spec.loader is not None
stream_k = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stream_k)


def test_streamk_grid_is_capped_at_the_iterations() -> None:
    assert stream_k.streamk_programs(128, 128, 4096, 132) == 64  # one tile of 64 k-blocks on the H200
    assert stream_k.streamk_programs(33, 20, 40, 20, 32, 32, 16) == 6  # the interpreter's case: 2 tiles x 3
    assert stream_k.streamk_programs(8192, 8192, 8192, 132) == 132  # a real GEMM keeps one program per SM
