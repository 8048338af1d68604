"""Compile artifacts: one binary per (artifact, target), in parallel, cached by content.

The cache key hashes the sources, every header they include (recursively, artifact dir and
artifacts/common), the manifest's build section, the build script, the compiler version and
the target. A second run with nothing changed compiles nothing.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

from kwiki.core.arch import parse_arch
from kwiki.core.machine import seal, sealed
from kwiki.core.paths import COMMON_DIR, included_files, shown, within
from kwiki.core.proc import run_group
from kwiki.core.writefile import write_atomic
from kwiki.verify.types import BuildResult, KernelResources
from kwiki.wiki.buildline import BuildJob, command
from kwiki.wiki.manifest import HOST, MANIFEST

BUILD_DIR = ".kwiki/build"
SHARED_CACHE_ENV = "KWIKI_BUILD_CACHE"  # a build cache outside the clone, shared by every run on the machine (CI)


def cache_key(job: BuildJob, root: Path, compiler_version: str | None) -> str:
    """The build's cache key: its settings, target, compiler and every file it reads (for a script, which may
    read anything there: every file of its folder and of artifacts/common)."""
    b = job.manifest.build
    files = [job.directory / s for s in [*b.sources, *b.headers, *filter(None, [b.script])]]
    files += included_files(files, [root / COMMON_DIR])
    h = hashlib.sha256()
    h.update(json.dumps({"build": b.model_dump(mode="json"), "target": job.target,
                         "compiler": compiler_version, "run_command": job.manifest.run.command},
                        sort_keys=True).encode())
    for path in sorted(set(files)):
        h.update(str(path.relative_to(root) if path.is_relative_to(root) else path).encode())
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"<missing>")
    if b.script:  # a script may read any file of its folder or of artifacts/common: every one is in the key
        h.update(_script_inputs(job.directory, root).encode())
    return h.hexdigest()[:20]


def _script_inputs(directory: Path, root: Path) -> str:
    """The hash of what a build script may read: every file of its folder and of artifacts/common that git tracks
    (outside a git work tree: every file), so what the build writes beside itself does not change its key."""
    from kwiki.core.tracked import tracked

    git = tracked(root)
    h = hashlib.sha256()
    for base in (directory, root / COMMON_DIR):
        if not base.is_dir():
            continue
        for path in sorted(p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                           and within(root, p)):
            rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
            if git is None or rel in git:
                h.update(rel.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def artifact_hash(directory: Path, root: Path, also: list[Path] | None = None) -> str:
    """Hash of an artifact's whole directory and the shared common directory (provenance), and of
    the directories in `also` (the artifact whose binary it runs, for `build.binary_of`).

    A committed link that leads out of the repository is never read (the containment rule).
    """
    h = hashlib.sha256()
    for base in (directory, *(also or []), root / COMMON_DIR):
        if not base.is_dir():
            continue
        for path in sorted(p for p in base.rglob("*")
                           if p.is_file() and "__pycache__" not in p.parts and within(root, p)):
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


_PTXAS = re.compile(  # a kernel's line, then its spills' and its registers' (ptxas -v writes them in that order)
    r"ptxas info\s*: (?:Compiling entry function|Function properties for) '?(?P<entry>[\w$.]+)'?"
    r"|(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads"
    r"|Used (?P<regs>\d+) registers(?:.*?, (?P<smem>\d+) bytes smem)?")


def parse_ptxas(log: str) -> dict[str, KernelResources]:
    """Registers, shared memory and spills per kernel from `ptxas -v` output."""
    kernels: dict[str, KernelResources] = {}
    k: KernelResources | None = None
    for m in filter(None, map(_PTXAS.search, log.splitlines())):
        if m["entry"]:
            k = kernels.setdefault(m["entry"], KernelResources())
        elif k is not None and m["stack"]:
            k.stack_bytes, k.spill_stores, k.spill_loads = int(m["stack"]), int(m["stores"]), int(m["loads"])
        elif k is not None and m["regs"]:
            k.registers, k.smem_bytes = int(m["regs"]), int(m["smem"] or 0)
    return kernels


@functools.lru_cache(maxsize=8)
def cxx_version(cxx: str | None) -> str | None:
    """The host compiler's `--version` banner: the cache key follows an upgrade in place, not only a new path."""
    if not cxx:
        return None
    try:
        done = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cxx}: no version ({exc})"
    return f"{cxx}: {done.stdout.strip() or done.stderr.strip()}"


def shared_entry(job: BuildJob, root: Path, key: str) -> Path | None:
    """Where a build lives in the cache outside the clone ($KWIKI_BUILD_CACHE; none when unset): keyed by
    cache_key (the build settings, the target, the compiler and every source and header it reads) and by the
    checkout's path, which the binary embeds (__FILE__ in its error messages): a machine that ran CI before
    compiles only what changed."""
    base = os.environ.get(SHARED_CACHE_ENV)
    if not base:
        return None
    where = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:8]
    return Path(base) / job.artifact / f"{job.target}-{key}-{where}"


def _copy_entry(src: Path, dest: Path) -> bool:
    """Copy a build directory to `dest` whole or not at all (a temporary name, then one rename); best effort."""
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}-{time.monotonic_ns()}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, tmp, symlinks=True)
        if dest.exists():
            shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
        return True
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return False


def _binary_hash(path: Path) -> str:
    """The binary's SHA-256: a cache hit is re-hashed against the seal its build wrote on this machine."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_one(job: BuildJob, root: Path, nvcc: str | None, nvcc_version: str | None, cxx: str | None,
              started: Callable[[BuildJob], None] | None = None) -> BuildResult:
    """Compile one CUDA (or host C++) job, or take it from the cache; `started(job)` is told before a compiler
    runs. Another kind's build is the pipeline's to dispatch (kwiki.verify.pipeline)."""
    compiler_version = nvcc_version if job.manifest.build.compiler == "nvcc" or job.target != HOST else cxx_version(cxx)
    key = cache_key(job, root, compiler_version)
    final = root / BUILD_DIR / job.artifact / f"{job.target}-{key}"
    binary = final / job.artifact
    meta = final / "build.json"
    shared = shared_entry(job, root, key)
    if not (binary.exists() and meta.exists()) and shared is not None and (shared / job.artifact).exists() \
            and (shared / "build.json").exists():
        _copy_entry(shared, final)  # compiled before on this machine, in this checkout
    if binary.exists() and meta.exists():
        try:
            cached = json.loads(meta.read_text())
            if not sealed(root, cached.get("seal"), "build", key, _binary_hash(binary)):
                raise ValueError("not built on this machine")  # a checkout's or another machine's binary
            kernels = {k: KernelResources(**v) for k, v in cached.get("kernels", {}).items()}
            hit = BuildResult(job.artifact, job.target, True, True, key, str(binary), 0.0,
                              cached.get("command", []), str(final / "build.log"), None, kernels)
            return agree_on_variants(job, root, hit)
        except (ValueError, TypeError, AttributeError, OSError):
            pass  # a damaged, planted or foreign cache entry is rebuilt
    if started is not None:
        started(job)
    staging = final.with_name(final.name + f".tmp{os.getpid()}-{time.monotonic_ns()}")
    staging.mkdir(parents=True, exist_ok=True)
    out = staging / job.artifact
    b = job.manifest.build
    if b.script:
        env = {**os.environ, "KWIKI_OUT": str(out), "KWIKI_TARGET": job.target, "NVCC": nvcc or "",
               "KWIKI_GENCODE": "" if job.target == HOST else parse_arch(job.target).gencode(),
               "KWIKI_COMMON": str(root / COMMON_DIR)}
        argv: list[str] | str = ["bash", str(job.directory / b.script)]
    else:
        env = None
        argv = command(job, root, out, nvcc, cxx)
    if isinstance(argv, str):
        shutil.rmtree(staging, ignore_errors=True)
        return BuildResult(job.artifact, job.target, False, False, key, error=argv)
    res = run_group(argv, cwd=job.directory, env=env, timeout=b.timeout_s)
    log = res.stdout + res.stderr
    (staging / "build.log").write_text(log)
    if res.start_error or res.timed_out or res.returncode != 0 or not out.exists():
        why = res.start_error or (f"timed out after {b.timeout_s:g} s" if res.timed_out else
                                  f"exit {res.returncode}" if res.returncode != 0 else "no binary written")
        last = [ln for ln in log.splitlines() if "error" in ln.lower()][:3] or log.splitlines()[-3:]
        failed = final.with_name(final.name + ".failed")
        shutil.rmtree(failed, ignore_errors=True)
        staging.rename(failed)
        return BuildResult(job.artifact, job.target, False, False, key, None, res.seconds, list(argv),
                           str(failed / "build.log"), f"build failed ({why}): " + " | ".join(last)[:400])
    kernels = parse_ptxas(log)
    write_atomic(staging / "build.json", json.dumps(
        {"command": list(argv), "kernels": {k: asdict(v) for k, v in kernels.items()}, "seconds": res.seconds,
         "seal": seal(root, "build", key, _binary_hash(out))}, indent=1, sort_keys=True).encode())
    shutil.rmtree(final, ignore_errors=True)
    os.replace(staging, final)
    if shared is not None:
        _copy_entry(final, shared)
    built = BuildResult(job.artifact, job.target, True, False, key, str(binary), res.seconds, list(argv),
                        str(final / "build.log"), None, kernels)
    return agree_on_variants(job, root, built)


# one job's build: (job, root, nvcc, nvcc version, c++, started) -> its result
BuildOne = Callable[[BuildJob, Path, str | None, str | None, str | None, Callable[[BuildJob], None] | None],
                    BuildResult]
LIST_VARIANTS_TIMEOUT_S = 60.0


def agree_on_variants(job: BuildJob, root: Path, result: BuildResult) -> BuildResult:
    """A built CUDA binary must list (`--list-variants`, printed before any CUDA call, so no GPU is needed)
    exactly the variants its manifest declares, in the same order (then its shapes: agree_on_shapes); otherwise
    the build fails with both lists, located at the manifest. Not checked: `host` targets (fixtures need not
    implement the flag), and artifacts whose run.command is not the binary itself (a driver runs it, and the
    driver's variants are the manifest's)."""
    if not result.ok or not result.binary or job.target == HOST or job.manifest.not_the_binary():
        return result
    manifest = job.directory / MANIFEST
    where = f"{shown(manifest, root)}: variants"
    res = run_group([result.binary, "--list-variants"], cwd=job.directory, timeout=LIST_VARIANTS_TIMEOUT_S)
    declared = [v.name for v in job.manifest.variants]
    listed = [line.strip() for line in res.stdout.splitlines() if line.strip()]
    if res.start_error or res.timed_out or res.returncode != 0:
        why = res.start_error or (f"timed out after {LIST_VARIANTS_TIMEOUT_S:g} s" if res.timed_out else
                                  f"exited {res.returncode}")
        tail = " | ".join(res.stderr.strip().splitlines()[-2:])[:200]
        result.error = (f"{where}: `{job.artifact} --list-variants` {why}{': ' + tail if tail else ''}; a CUDA "
                        f"artifact prints its variant table with it (kwiki::Args does, before any CUDA call)")
    elif listed != declared:  # the same names in the same order: the manifest is the one source of the ladder
        missing = [n for n in declared if n not in listed]
        unknown = [n for n in listed if n not in declared]
        diff = "; ".join(part for part in (f"missing from the binary: {', '.join(missing)}" if missing else "",
                                           f"not in the manifest: {', '.join(unknown)}" if unknown else "",
                                           "the binary lists a name twice" if len(set(listed)) != len(listed) else "")
                         if part) or "the same names in another order"
        result.error = (f"{where}: the binary's --list-variants and the manifest disagree ({diff}): binary lists "
                        f"[{', '.join(listed)}]; manifest lists [{', '.join(declared)}]")
    else:
        return agree_on_shapes(job, root, result)
    result.ok = False
    return result


def agree_on_shapes(job: BuildJob, root: Path, result: BuildResult) -> BuildResult:
    """A binary given the manifest's shapes (`--OPTION=v1,v2`) must list them back (`--list-shapes=OPTION`, before
    any CUDA call: it runs with no device visible), the same values in the same order; otherwise the build fails,
    located at the manifest's `shapes` (an option the binary does not read, a value it rejects or reorders)."""
    where = f"{shown(job.directory / MANIFEST, root)}: shapes"
    for group in job.manifest.shapes:
        argv = [str(result.binary), *(g.arg() for g in job.manifest.shapes), f"--list-shapes={group.option}"]
        res = run_group(argv, cwd=job.directory, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                        timeout=LIST_VARIANTS_TIMEOUT_S)
        listed = [line.strip() for line in res.stdout.splitlines() if line.strip()]
        if res.start_error or res.timed_out or res.returncode != 0:
            tail = " | ".join(res.stderr.strip().splitlines()[-2:])[:200]
            result.error = (f"{where}: `{job.artifact} {' '.join(argv[1:])}` failed "
                            f"({res.start_error or ('timed out' if res.timed_out else f'exit {res.returncode}')})"
                            f"{': ' + tail if tail else ''}; a CUDA artifact lists the shapes it parsed "
                            "(kwiki::Args::get_shapes does, before any CUDA call)")
        elif listed != group.values:
            result.error = (f"{where}: --{group.option}: the binary lists [{', '.join(listed)}]; the manifest "
                            f"declares [{', '.join(group.values)}]")
        else:
            continue
        result.ok = False
        return result
    return _agree_on_sweep(job, root, result)


def _agree_on_sweep(job: BuildJob, root: Path, result: BuildResult) -> BuildResult:
    """The sweep's sizes (the manifest's `shapes.sweep`, its own process) must list back like `values`."""
    entry = job.manifest.sweep_shapes()
    if entry is None:
        return result
    argv = [str(result.binary), entry.sweep_arg(), f"--list-shapes={entry.option}"]
    res = run_group(argv, cwd=job.directory, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                    timeout=LIST_VARIANTS_TIMEOUT_S)
    listed = [line.strip() for line in res.stdout.splitlines() if line.strip()]
    if res.start_error or res.timed_out or res.returncode != 0 or listed != entry.sweep:
        result.ok = False
        result.error = (f"{shown(job.directory / MANIFEST, root)}: shapes.sweep: --{entry.option}: the binary "
                        f"lists [{', '.join(listed)}] (exit {res.returncode}); the manifest declares "
                        f"[{', '.join(entry.sweep)}]")
    return result


def build_all(jobs: list[BuildJob], root: Path, *, nvcc: str | None, nvcc_version: str | None,
              cxx: str | None, workers: int = 0,
              progress: Callable[[BuildResult], None] | None = None,
              started: Callable[[BuildJob], None] | None = None, one: BuildOne | None = None) -> list[BuildResult]:
    """Build every job with `one` (default: build_one), `workers` at a time (default: CPU count); results in
    job order.

    `started(job)` is told as a compiler starts (from the worker's thread, and not for a cached
    build); `progress(result)` as each build ends, in the order they end, from this thread.
    """
    one = one or build_one
    workers = workers or os.cpu_count() or 1
    results: list[BuildResult | None] = [None] * len(jobs)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(one, job, root, nvcc, nvcc_version, cxx, started): i
                   for i, job in enumerate(jobs)}
        for fut in as_completed(futures):
            result = fut.result()
            results[futures[fut]] = result
            if progress:
                progress(result)
    return [r for r in results if r is not None]


__all__ = ["COMMON_DIR", "MANIFEST", "BuildJob", "BuildResult", "artifact_hash", "build_all", "build_one",
           "parse_ptxas"]
