"""An artifact's build line: the compile its manifest asks for on one target, as a value and as a command line.

The pipeline runs it (kwiki.verify.build); the site shows it (the build line on an artifact's page).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kwiki.core.arch import parse_arch
from kwiki.core.paths import COMMON_DIR
from kwiki.wiki.manifest import HOST, Manifest


@dataclass(frozen=True)
class BuildJob:
    """One compile the plan asks for: an artifact for one target (a value; the build never changes it)."""

    artifact: str
    directory: Path  # absolute artifact directory
    manifest: Manifest
    target: str




def command(job: BuildJob, root: Path, out: Path, nvcc: str | None, cxx: str | None) -> list[str] | str:
    """The compiler command line, or a string saying why there is none."""
    b = job.manifest.build
    include = f"-I{root / COMMON_DIR}"
    libs = [f"-l{lib}" for lib in b.libs]
    sources = [str(job.directory / s) for s in b.sources]
    extra = b.target_flags.get(job.target, [])
    if b.compiler == "c++" and job.target == HOST:
        if not cxx:
            return "no C++ compiler (c++/g++) on PATH"
        return [cxx, *b.flags, *extra, include, "-o", str(out), *sources, *libs]
    if not nvcc:
        return "nvcc not found on PATH (install the CUDA toolkit)"
    gencode = [] if job.target == HOST else [parse_arch(job.target).gencode(), "-Xptxas=-v"]
    return [nvcc, *b.flags, *gencode, *extra, include, "-o", str(out), *sources, *libs]
