"""Builds: compiler command lines, ptxas figures, the content-hash cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.core.paths import included_files
from kwiki.verify.build import parse_ptxas

PTXAS = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z12scale_kernelPffi' for 'sm_90a'
ptxas info    : Function properties for _Z12scale_kernelPffi
    0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 16384 bytes smem, 372 bytes cmem[0]
ptxas info    : Compiling entry function '_Z4copyv' for 'sm_90a'
ptxas info    : Function properties for _Z4copyv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 356 bytes cmem[0]
"""


def test_parse_ptxas_reads_registers_smem_and_spills():
    k = parse_ptxas(PTXAS)
    assert k["_Z12scale_kernelPffi"].registers == 40
    assert k["_Z12scale_kernelPffi"].smem_bytes == 16384
    assert (k["_Z12scale_kernelPffi"].spill_stores, k["_Z12scale_kernelPffi"].spill_loads) == (8, 12)
    assert k["_Z4copyv"].registers == 8 and k["_Z4copyv"].smem_bytes == 0


def test_included_files_follows_local_includes(tmp_path: Path):
    common = tmp_path / "common"
    common.mkdir()
    (common / "a.cuh").write_text('#include "b.cuh"\n')
    (common / "b.cuh").write_text("// leaf\n")
    src = tmp_path / "main.cu"
    src.write_text('#include "a.cuh"\n#include <cstdio>\n#include "missing.h"\n')
    assert [p.name for p in included_files([src], [common])] == ["a.cuh", "b.cuh"]


def test_header_change_invalidates_the_cache(tmp_path: Path, capsys):
    root = tmp_path / "p"
    shutil.copytree(Path(__file__).parent / "fixtures" / "verify" / "project", root)
    common = root / "artifacts" / "common"
    common.mkdir()
    (common / "shared.h").write_text("// v1\n")
    src = root / "artifacts" / "host_ok" / "main.cpp"
    src.write_text('#include "shared.h"\n' + src.read_text())
    args = ["verify", "--quiet", "--json", "--compile-only", "--root", str(root), "fixture-page"]
    main(args)
    first = json.loads(capsys.readouterr().out)
    main(args)
    second = json.loads(capsys.readouterr().out)
    (common / "shared.h").write_text("// v2\n")
    main(args)
    third = json.loads(capsys.readouterr().out)
    assert [b["cached"] for b in first["builds"]] == [False]
    assert [b["cached"] for b in second["builds"]] == [True]
    assert [b["cached"] for b in third["builds"]] == [False]


@pytest.mark.nvcc
def test_nvcc_builds_each_target_and_keeps_ptxas_figures(tmp_path: Path, capsys):
    root = tmp_path / "p"
    shutil.copytree(Path(__file__).parent / "fixtures" / "verify" / "nvcc_project", root)
    code = main(["verify", "--quiet", "--json", "--compile-only", "--root", str(root)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report["builds"]
    builds = {b["target"]: b for b in report["builds"]}
    assert set(builds) == {"sm_90a", "sm_100a"}
    assert all(b["ok"] for b in builds.values())
    assert any("-gencode=arch=compute_90a,code=sm_90a" in part for part in builds["sm_90a"]["command"])
    kernels = builds["sm_90a"]["kernels"]
    assert kernels and all(k["registers"] > 0 for k in kernels.values())
    assert {c["claim"]: c["verdict"] for c in report["claims"]} == {"scale-ok": "not-run"}


def test_host_build_cache_follows_the_compiler_version_not_its_path(tmp_path: Path, capsys, monkeypatch):
    """A compiler upgraded in place (same path, new version) must not reuse binaries built by the old one."""
    from kwiki.verify.build import cxx_version

    real = shutil.which("c++") or shutil.which("g++")
    if real is None:
        pytest.skip("no host C++ compiler")
    root = tmp_path / "p"
    shutil.copytree(Path(__file__).parent / "fixtures" / "verify" / "project", root)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    cxx = bindir / "c++"

    def install(version: str) -> None:
        cxx.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "c++ (Fake) {version}"; exit 0; fi\n'
                       f'exec {real} "$@"\n')
        cxx.chmod(0o755)
        cxx_version.cache_clear()

    monkeypatch.setenv("PATH", f"{bindir}:{Path(real).parent}")
    args = ["verify", "--quiet", "--json", "--compile-only", "--root", str(root), "fixture-page"]
    install("12.1.0")
    main(args)
    first = json.loads(capsys.readouterr().out)
    main(args)
    second = json.loads(capsys.readouterr().out)
    install("14.2.0")
    main(args)
    third = json.loads(capsys.readouterr().out)
    assert [b["cached"] for b in first["builds"]] == [False]
    assert [b["cached"] for b in second["builds"]] == [True]
    assert [b["cached"] for b in third["builds"]] == [False]
