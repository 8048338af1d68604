"""bench/gpu_pages.sh's GPU_MODEL guard: on another GPU than the one asked for, nothing runs and nothing is packed."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_another_gpu_than_the_one_asked_for_runs_nothing(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3'\n")
    smi.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out), "GPU_MODEL": "H200"}
    res = subprocess.run(["bash", "bench/gpu_pages.sh", "kernel-softmax"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 3
    assert "'NVIDIA H100 80GB HBM3', not the H200 asked for" in (out / "summary.txt").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["summary.txt"]  # no verify ran, nothing packed
