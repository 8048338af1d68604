"""Shared test setup: markers that skip cleanly where the machine lacks a GPU, nvcc or a browser."""

from __future__ import annotations

import shutil
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
