"""Shared test setup: markers that skip cleanly where the machine lacks a GPU, nvcc or a browser."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _has_gpu() -> bool:
    try:
        import pynvml
    except ImportError:
        return shutil.which("nvidia-smi") is not None
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return count > 0
    except pynvml.NVMLError:
        return False


def pytest_collection_modifyitems(config, items):
    needs = {
        "gpu": (_has_gpu, "needs an NVIDIA GPU (run these on the H200)"),
        "nvcc": (lambda: shutil.which("nvcc") is not None, "needs nvcc on PATH"),
        "browser": (lambda: any(shutil.which(b) for b in ("chromium", "chromium-browser")), "needs chromium"),
    }
    cache: dict[str, bool] = {}
    for item in items:
        for name, (probe, reason) in needs.items():
            if name in item.keywords:
                if name not in cache:
                    cache[name] = probe()
                if not cache[name]:
                    item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def fixture_copy(tmp_path: Path):
    """fixture_copy(NAME, TO): a fresh copy of tests/fixtures/NAME at tmp_path/TO, for a test that writes into it."""
    def copy(name: str, to: str) -> Path:
        target = tmp_path / to
        shutil.copytree(FIXTURES / name, target)
        return target
    return copy


@pytest.fixture(scope="session")
def compile_host_test(tmp_path_factory: pytest.TempPathFactory):
    """compile_host_test(NAME): artifacts/common/test/NAME.cu built with nvcc for the host (skips without nvcc)."""
    def build(name: str) -> Path:
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            pytest.skip("nvcc not on PATH")
        common = REPO / "artifacts" / "common"
        out = tmp_path_factory.mktemp(name) / name
        subprocess.run([nvcc, "-std=c++17", f"-I{common}", "-o", str(out), str(common / "test" / f"{name}.cu")],
                       check=True, capture_output=True, timeout=300)
        return out

    return build
