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


def lists_its_manifest(binary: Path, manifest: Any) -> None:
    """The binary lists the manifest's variants (in order) and its first shapes entry's values, before any CUDA call."""
    res = run_without_gpu(binary, "--list-variants")
    assert res.returncode == 0 and res.stdout.split() == [v.name for v in manifest.variants], res.stderr
    shapes = manifest.shapes[0]
    res = run_without_gpu(binary, shapes.arg(), f"--list-shapes={shapes.option}")
    assert res.returncode == 0 and res.stdout.split() == shapes.values, res.stderr


def rung_checks(variants: Any, kernels: dict[str, Any], rung: str, below: str) -> tuple[list[str], list[str]]:
    """The SASS mismatches of `rung`'s expectation on its own kernels, and on the kernels of the rung `below` (the
    second must name what the rung adds: the expectation proves the mechanism, not just the build)."""
    from kwiki.verify.sass import check_variant

    by_name = {v.name: v for v in variants}
    own = check_variant(by_name[rung], "sm_90a", kernels, {})[1]
    on_below = by_name[rung].model_copy(update={"kernels": by_name[below].kernels})
    return own, check_variant(on_below, "sm_90a", kernels, {})[1]


def build_library(tmp_path_factory: pytest.TempPathFactory, artifact: Path, *, timeout: int = 900) -> Path:
    """A Python artifact's CUDA library (its manifest's python.cuda) built as kwiki builds it, for sm_90a, into a fresh
    temporary directory (skipped where nvcc is not on PATH)."""
    from kwiki.wiki.manifest import load_manifest

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    build = load_manifest(artifact, REPO).library_build()
    assert build is not None, f"{artifact.name} has no CUDA library"
    out = tmp_path_factory.mktemp(artifact.name) / f"lib{artifact.name}.so"
    subprocess.run([nvcc, *build.flags, "-gencode=arch=compute_90a,code=sm_90a", f"-I{REPO / 'artifacts' / 'common'}",
                    "-o", str(out), *[str(artifact / s) for s in build.sources]],
                   check=True, capture_output=True, timeout=timeout)
    return out


def sass_tools() -> Any:
    """kwiki's disassembler (cuobjdump and nvdisasm), or a skip where there is none."""
    from kwiki.verify.sass import find_tools

    tools = find_tools()
    if tools is None:
        pytest.skip("no cuobjdump")
    return tools


class FakeLibrary:
    """A library as ctypes.CDLL would load it, answering one symbol: the argtypes the module sets on it and the
    arguments of every call (each call returns 0). fake = FakeLibrary.of("kwiki_fp8_gemm") is what a test puts in place
    of ctypes.CDLL; fake.loaded lists the libraries the module loaded through it, the last one last."""

    def __init__(self, symbol: str) -> None:
        setattr(self, symbol, self)
        self.argtypes: list[Any] = []
        self.restype: Any = None
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, *args: Any) -> int:
        assert len(args) == len(self.argtypes)
        self.calls.append(args)
        return 0

    @classmethod
    def of(cls, symbol: str) -> Any:
        loaded: list[FakeLibrary] = []

        def cdll(path: str) -> FakeLibrary:
            loaded.append(cls(symbol))
            return loaded[-1]

        cdll.loaded = loaded  # type: ignore[attr-defined]
        return cdll


def library_rung_checks(library: Path, variants: Any, names: Any, rung: str, below: str) -> list[str]:
    """Every variant in `names` meets its SASS expectation in `library` (asserted), and what `rung`'s expectation finds
    wrong on `below`'s kernels (rung_checks' second list: it must name what the rung adds)."""
    from kwiki.verify.sass import check_variant, disassemble

    kernels = disassemble(library, sass_tools())[0]
    by_name = {v.name: v for v in variants}
    for name in names:
        assert check_variant(by_name[name], "sm_90a", kernels, {})[1] == [], name
    own, on_below = rung_checks(variants, kernels, rung, below)
    assert own == []
    return on_below


def claimed_at_one_entry(page: Path, grid: list[dict[str, Any]], applies: Any, names: Any) -> set[str]:
    """The variants among `names` that the page's measured claims select, each selection matching exactly one GRID
    entry at which the variant applies (asserted: a claim names one record)."""
    from kwiki.wiki.pages import load_page

    named: set[str] = set()
    for c in load_page(page, REPO).meta.claims:
        if c.measure is None:
            continue
        for sel in (c.measure.of, c.measure.per):
            if sel is None or sel.variant not in names:
                continue
            named.add(sel.variant)
            at = [p for p in grid if all(p.get(k) == v for k, v in sel.params.items()) and applies(sel.variant, p)]
            assert len(at) == 1, (c.id, sel.params)
    return named


def host_program(tmp_path_factory: pytest.TempPathFactory, name: str, source: str) -> Path:
    """A small host program (`source`, C++ including headers of artifacts/common) built with nvcc for sm_90a into a
    fresh temporary directory, for tests of the headers' host-and-device code (skipped where nvcc is not on PATH)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    d = tmp_path_factory.mktemp(name)
    (d / "host.cu").write_text(source)
    subprocess.run([nvcc, "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", f"-I{REPO / 'artifacts' / 'common'}",
                    "-o", str(d / "host"), str(d / "host.cu")], check=True, capture_output=True, timeout=300)
    return d / "host"


def launcher_result(library: Path, symbol: str, argtypes: list[Any], args: dict[str, Any]) -> int:
    """What the library's launcher `symbol` returns for `args` (in argtypes' order), called through ctypes. Without a
    GPU a launcher that reached a CUDA call returns a CUDA error code, so -1 says it refused before any."""
    import ctypes

    fn = getattr(ctypes.CDLL(str(library)), symbol)
    fn.argtypes = argtypes
    fn.restype = ctypes.c_int
    return int(fn(*args.values()))



def fake_libraries(monkeypatch: pytest.MonkeyPatch, torch: Any, symbol: str, *, stream: int = 0) -> list[FakeLibrary]:
    """FakeLibrary.of(symbol) put in place of ctypes.CDLL, torch's current stream one whose handle is `stream`, and
    $KWIKI_CUDA_LIBRARY set: the list of the libraries the module loads from now on, the last one last."""
    import ctypes

    cdll = FakeLibrary.of(symbol)
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: type("Stream", (), {"cuda_stream": stream})())
    monkeypatch.setenv("KWIKI_CUDA_LIBRARY", "lib.so")
    return cdll.loaded  # type: ignore[no-any-return]
