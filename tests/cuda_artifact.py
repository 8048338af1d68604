"""A CUDA artifact compiled with nvcc and run without a GPU, for the artifact tests: its source built with the
manifest's flags for sm_90a (skipped where nvcc is not on PATH), run with no device visible (a message seen
before any CUDA call proves none was made), and disassembled for its SASS checks (skipped without cuobjdump)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}


def build(tmp_path_factory: pytest.TempPathFactory, artifact: Path, source: str, *, timeout: int = 600) -> Path:
    """`artifact`/`source` built with the manifest's flags for sm_90a into a fresh temporary directory."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path_factory.mktemp(artifact.name) / Path(source).stem
    flags = yaml.safe_load((artifact / "artifact.yaml").read_text())["build"]["flags"]
    subprocess.run([nvcc, *flags, "-gencode=arch=compute_90a,code=sm_90a", f"-I{REPO / 'artifacts' / 'common'}",
                    "-o", str(out), str(artifact / source)], check=True, capture_output=True, timeout=timeout)
    return out


def run_without_gpu(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **NO_GPU})


def sass_kernels(binary: Path) -> dict[str, Any]:
    """The binary's kernels as kwiki.verify.sass reads them (name -> Kernel)."""
    from kwiki.verify.sass import disassemble, find_tools

    tools = find_tools()
    if tools is None:
        pytest.skip("no cuobjdump")
    return disassemble(binary, tools)[0]


def rung_checks(variants: Any, kernels: dict[str, Any], rung: str, below: str) -> tuple[list[str], list[str]]:
    """The SASS mismatches of `rung`'s expectation on its own kernels, and on the kernels of the rung `below` (the
    second must name what the rung adds: the expectation proves the mechanism, not just the build)."""
    from kwiki.verify.sass import check_variant

    by_name = {v.name: v for v in variants}
    own = check_variant(by_name[rung], "sm_90a", kernels, {})[1]
    on_below = by_name[rung].model_copy(update={"kernels": by_name[below].kernels})
    return own, check_variant(on_below, "sm_90a", kernels, {})[1]
