"""Shared test setup: markers that skip cleanly where the machine lacks a GPU, nvcc or a browser."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Triton 3.9 warns (an error here) when this is unset, and 3.10 will default to no FP fusion; 1 is what Triton 3.6,
# the GPU machine's, does: the tests that compile the Triton kernels for sm_90a see the code the GPU runs
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


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


SHARED_CACHE = "KWIKI_BUILD_CACHE"  # kwiki.verify.build.SHARED_CACHE_ENV: a build cache outside the clone (CI)
# Taken out of the environment as the tests start (each xdist worker imports this file): a test sees no shared
# build cache (it asserts what a fresh build does, in a temporary checkout the cache would only collect) unless it
# asks for the machine's with the `shared_build_cache` fixture (the repository's own artifacts, compiled every run)
SHARED_CACHE_DIR = os.environ.pop(SHARED_CACHE, None) or None


@pytest.fixture
def shared_build_cache(monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The machine's build cache outside the clone ($KWIKI_BUILD_CACHE, set by .ci/run), for this test."""
    if SHARED_CACHE_DIR:
        monkeypatch.setenv(SHARED_CACHE, SHARED_CACHE_DIR)
    return SHARED_CACHE_DIR


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
        source = common / "test" / f"{name}.cu"
        out = tmp_path_factory.mktemp(name) / name
        # $KWIKI_BUILD_CACHE (CI): the binary is reused while the test program, the shared headers and nvcc are
        # the same (the key hashes all of them)
        key = hashlib.sha256(nvcc.encode())
        for path in [source, *sorted(common.glob("*.cuh"))]:
            key.update(path.name.encode() + path.read_bytes())
        cached = Path(SHARED_CACHE_DIR) / "host_tests" / f"{name}-{key.hexdigest()[:20]}" if SHARED_CACHE_DIR else None
        if cached is not None and cached.is_file():
            shutil.copy2(cached, out)
            return out
        subprocess.run([nvcc, "-std=c++17", f"-I{common}", "-o", str(out), str(source)],
                       check=True, capture_output=True, timeout=300)
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_name(cached.name + f".tmp{os.getpid()}")
            shutil.copy2(out, tmp)
            os.replace(tmp, cached)
        return out

    return build


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def _served(directory: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_QuietHandler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="session")
def served():
    """served(DIR): a context manager that serves DIR over HTTP on localhost and yields its URL (the browser
    tests' built sites)."""
    return _served

