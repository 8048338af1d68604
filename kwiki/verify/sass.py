"""Mechanism evidence from the binary: each variant's SASS expectations checked against `cuobjdump -sass`.

A page says "16-byte loads", "TMA", "wgmma", "setmaxnreg", "streaming stores"; the manifest says which
instructions prove it (`variants[].sass`, patterns of kwiki/wiki/instructions.py) and which kernels they
must be in (`variants[].kernels`, globs over demangled names). After every build (`--compile-only`
too, on machines without a GPU) each CUDA binary is disassembled once, and every kernel of every
variant with `sass` must match: a mismatch fails the variant's `mechanism` gate, located at its
manifest line, and the records of that variant are refused like any other gate's.

The disassembler is `cuobjdump` (with `nvdisasm`, which it calls for some architectures), found in
the Python environment first (the `nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm` wheels that kwiki
installs on Linux put them under site-packages/nvidia/cu*/bin), then on PATH. Without one, CI (the CI
variable set, or `kwiki verify --require-disassembler`) fails; elsewhere the checks are skipped
loudly and every variant reads 'not-checked'.

Disassembly (~1 s a binary) is cached in `sass.json` beside the binary, keyed by the binary's
sha256, the disassembler and CACHE_VERSION, so a cached `--compile-only` hashes and reads JSON only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fnmatch
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from kwiki.core.errors import EnvironmentProblem, FrontMatterError, Problem
from kwiki.core.paths import shown
from kwiki.core.proc import run_group
from kwiki.core.writefile import write_atomic
from kwiki.results.mechanism import KernelRow, MechanismEvidence, MechanismStatus
from kwiki.verify.types import BuildResult, Finding, Gating, Plan, RunOutcome
from kwiki.wiki.frontmatter import decode, parse_yaml
from kwiki.wiki.instructions import Pattern, parse_pattern, split_spelling
from kwiki.wiki.manifest import HOST, MANIFEST, Manifest, Variant

MECHANISM = "mechanism"  # the gate
CACHE_NAME = "sass.json"
CHECKS_NAME = "sass-checks.json"  # beside it: each variant's check result by its expectations, for the same key
# 2: a wgmma wait's depth spelled as a modifier (WARPGROUP.DEPBAR.LE.DEPTH1)
CACHE_VERSION = 2  # bump when what the cache holds, or how SASS is parsed, changes
DISASSEMBLE_TIMEOUT_S = 120.0


# ---------------------------------------------------------------- finding the tools


@dataclass(frozen=True)
class Tools:
    cuobjdump: str
    nvdisasm: str | None
    identity: str  # path, size and mtime of cuobjdump: part of the cache key, read without running it


def find_tools(path: str | None = None) -> Tools | None:
    """cuobjdump (and nvdisasm beside it or on PATH): the Python environment's wheels first, then PATH."""
    dirs = [Path(p) / "nvidia" for p in [*sys.path, sys.prefix] if p]
    found: list[Path] = []
    for base in dirs:
        if base.is_dir():
            found += sorted(base.glob("cu*/bin/cuobjdump"), reverse=True)  # cu13 before cu12
    on_path = shutil.which("cuobjdump", path=path)
    if on_path:
        found.append(Path(on_path))
    for exe in found:
        if exe.is_file() and os.access(exe, os.X_OK):
            sibling = exe.with_name("nvdisasm")
            nvdisasm = str(sibling) if sibling.is_file() else shutil.which("nvdisasm", path=path)
            st = exe.stat()
            return Tools(str(exe), nvdisasm, f"{exe}:{st.st_size}:{int(st.st_mtime)}")
    return None


def required_here(flag: bool) -> bool:
    """Whether a missing disassembler fails the run: with the flag, or under CI (the CI variable set)."""
    return flag or os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


# ---------------------------------------------------------------- disassembling one binary


@dataclass
class Kernel:
    """One kernel of a binary: its names, the architecture of its SASS, instruction counts and resources."""

    mangled: str
    name: str  # demangled, or the mangled name when no demangler could read it
    arch: str | None = None
    opcodes: dict[str, int] = field(default_factory=dict)  # full spelling ('LDG.E.NA.128') -> occurrences
    registers: int | None = None
    stack_bytes: int | None = None
    smem_bytes: int | None = None
    local_bytes: int | None = None


_ARCH = re.compile(r"^\s*arch = (\w+)")
_SASS_FUNC = re.compile(r"^\s*Function : (\S+)")
_RES_FUNC = re.compile(r"^\s*Function (\S+):\s*$")
_RES = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
# `wgmma.wait_group N` is WARPGROUP.DEPBAR.LE gsb0, 0xN: its operand N (how many wgmma groups may stay in flight)
# is what a variant about releasing stages early changes, so it is spelled as a modifier: WARPGROUP.DEPBAR.LE.DEPTH1
WGMMA_WAIT = "WARPGROUP.DEPBAR.LE"
_WAIT_DEPTH = re.compile(r"\s+gsb0\s*,\s*0x([0-9a-f]+)")
_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)")


def parse_listing(text: str) -> dict[str, Kernel]:
    """Kernels (mangled name -> Kernel) of `cuobjdump -sass -res-usage` output; names not yet demangled."""
    kernels: dict[str, Kernel] = {}
    arch: str | None = None
    current: Kernel | None = None
    res_for: Kernel | None = None
    for line in text.splitlines():
        if m := _ARCH.match(line):
            arch, current, res_for = m.group(1), None, None
        elif m := _SASS_FUNC.match(line):
            current = kernels.setdefault(m.group(1), Kernel(m.group(1), m.group(1)))
            current.arch = current.arch or arch
        elif m := _RES_FUNC.match(line):
            res_for = kernels.setdefault(m.group(1), Kernel(m.group(1), m.group(1)))
            res_for.arch = res_for.arch or arch
        elif res_for is not None and (m := _RES.search(line)):
            res_for.registers, res_for.stack_bytes, res_for.smem_bytes, res_for.local_bytes = map(int, m.groups())
            res_for = None
        elif current is not None and (m := _INSTR.match(line)):
            spelling = m.group(1)
            if spelling == WGMMA_WAIT and (d := _WAIT_DEPTH.match(line, m.end())):
                spelling += f".DEPTH{int(d.group(1), 16)}"  # wgmma.wait_group N: the depth is the mechanism
            current.opcodes[spelling] = current.opcodes.get(spelling, 0) + 1
    return kernels


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> demangled C++ names: c++filt when on PATH, else libstdc++'s __cxa_demangle; a name
    neither can read maps to itself (the globs are matched against both forms, so checks still work)."""
    out = {n: n for n in names}
    todo = [n for n in names if n.startswith("_Z")]
    if not todo:
        return out
    filt = shutil.which("c++filt")
    if filt:
        try:
            done = subprocess.run([filt], input="\n".join(todo) + "\n", capture_output=True, text=True, timeout=60)
            lines = done.stdout.splitlines()
            if done.returncode == 0 and len(lines) == len(todo):
                return out | dict(zip(todo, lines, strict=True))
        except (OSError, subprocess.TimeoutExpired):
            pass  # fall back to the library below
    return out | {n: d for n in todo if (d := _cxa_demangle(n))}


def _cxa_demangle(name: str) -> str | None:
    lib = ctypes.util.find_library("stdc++")
    if lib is None:
        return None
    try:
        fn = ctypes.CDLL(lib).__cxa_demangle
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    status = ctypes.c_int()
    ptr = fn(name.encode(), None, None, ctypes.byref(status))
    if not ptr or status.value != 0:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(ptr))


class DisassemblyError(EnvironmentProblem):
    """cuobjdump could not read a binary."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def cache_key(binary: Path, tools: Tools) -> str:
    """What a binary's disassembly (and every check on it) depends on: its contents, the tool, the parser."""
    return f"{CACHE_VERSION}:{sha256(binary)}:{tools.identity}"


def disassemble(binary: Path, tools: Tools, key: str | None = None) -> tuple[dict[str, Kernel], bool]:
    """The kernels of `binary` and whether they came from the cache (`sass.json` beside it)."""
    key = key or cache_key(binary, tools)
    cache = binary.with_name(CACHE_NAME)
    try:
        data = json.loads(cache.read_text())
        if data.get("key") == key:
            return {k["mangled"]: Kernel(**k) for k in data["kernels"]}, True
    except (OSError, ValueError, TypeError, KeyError):
        pass  # missing or damaged: disassemble again
    env = {**os.environ}
    if tools.nvdisasm:
        env["NVDISASM_PATH"] = str(Path(tools.nvdisasm).parent)
        env["PATH"] = f"{Path(tools.nvdisasm).parent}{os.pathsep}{env.get('PATH', '')}"
    res = run_group([tools.cuobjdump, "-sass", "-res-usage", str(binary.resolve())], cwd=binary.parent, env=env,
                    timeout=DISASSEMBLE_TIMEOUT_S,
                    max_output=256 * 1024 * 1024)
    if res.start_error or res.timed_out or res.returncode != 0:
        why = res.start_error or ("timed out" if res.timed_out else f"exit {res.returncode}")
        tail = " | ".join(res.stderr.strip().splitlines()[-2:])[:300]
        raise DisassemblyError(f"{tools.cuobjdump} -sass {binary.name}: {why}{': ' + tail if tail else ''}")
    kernels = parse_listing(res.stdout)
    for mangled, name in demangle(sorted(kernels)).items():
        kernels[mangled].name = name
    doc = {"key": key, "kernels": [asdict(kernels[k]) for k in sorted(kernels)]}
    try:
        write_atomic(cache, json.dumps(doc, sort_keys=True).encode())
    except OSError:
        pass  # a read-only build directory: the next run disassembles again
    return kernels, False


# ---------------------------------------------------------------- checking one variant


@dataclass
class KernelEvidence:
    """What one kernel of a variant showed: resources and, per pattern, the instructions it matched."""

    name: str
    registers: int | None
    stack_bytes: int | None
    smem_bytes: int | None
    local_bytes: int | None
    spill_stores: int | None  # bytes, from ptxas -v of the build (None for a cached build of old)
    spill_loads: int | None
    matched: dict[str, int]  # pattern -> instructions it matched (require and forbid alike)


@dataclass
class VariantMechanism:
    """The mechanism check of one variant on one target's binary."""

    artifact: str
    variant: str
    target: str
    status: MechanismStatus
    manifest: str  # the artifact.yaml path, relative to the root
    line: int
    kernels: list[KernelEvidence] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    note: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def problem(self) -> Problem:
        return Problem(self.manifest, self.line, f"variants.{self.variant}.sass",
                       f"[{self.target}] mechanism: " + "; ".join(self.mismatches))

    def as_json(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "variant": self.variant, "target": self.target, "status": self.status,
                "manifest": f"{self.manifest}:{self.line}" if self.line else self.manifest,
                "kernels": [asdict(k) for k in self.kernels],
                "mismatches": self.mismatches, "note": self.note}


@functools.lru_cache(maxsize=1024)
def _glob(pattern: str) -> Callable[[str], object]:
    return re.compile(fnmatch.translate(pattern)).match


def named(glob: str, kernels: Iterable[Kernel], memo: dict[str, list[Kernel]] | None = None) -> list[Kernel]:
    """The kernels whose demangled or mangled name `glob` matches; `memo` (per binary) remembers the answer."""
    if memo is not None and glob in memo:
        return memo[glob]
    match = _glob(glob)
    found = [k for k in kernels if match(k.name) or match(k.mangled)]
    if memo is not None:
        memo[glob] = found
    return found


def kernels_of(variant: Variant, kernels: Iterable[Kernel],
               memo: dict[str, list[Kernel]] | None = None) -> list[Kernel]:
    """The binary's kernels that the variant's globs name (matched against demangled and mangled names)."""
    kernels = list(kernels)
    found = {k.mangled: k for g in variant.kernels for k in named(g, kernels, memo)}
    return sorted(found.values(), key=lambda k: k.name)


def check_variant(variant: Variant, target: str, kernels: dict[str, Kernel],
                  spills: dict[str, tuple[int | None, int | None]],
                  memo: dict[str, list[Kernel]] | None = None) -> tuple[list[KernelEvidence], list[str]]:
    """The evidence of each of the variant's kernels, and what did not match (empty when all did)."""
    assert variant.sass is not None
    require = [parse_pattern(p) for p in variant.sass.require]
    forbid = [parse_pattern(p, counted=False) for p in variant.sass.forbid]
    mine = kernels_of(variant, kernels.values(), memo)
    bad: list[str] = []
    for glob in variant.kernels:
        if not named(glob, kernels.values(), memo):
            bad.append(f"kernel glob {glob!r} matches no kernel with SASS in the binary "
                       f"({_kernel_list(kernels.values())})")
    evidence = []
    for k in mine:
        if k.arch is not None and k.arch != target:
            bad.append(f"kernel {k.name!r}: SASS for {k.arch}, not {target} (a -gencode is missing)")
        matched = {}
        for p in require:
            n = matched[p.text] = p.count_in(k.opcodes)
            if not p.holds(n):
                bad.append(f"kernel {k.name!r}: require {p.text!r}: expected {p.wanted}, found {n}"
                           + _nearby(p, k.opcodes))
        for p in forbid:
            n = matched[p.text] = p.count_in(k.opcodes)
            if n:
                spelled = sorted(s for s in k.opcodes if p.matches(s))
                bad.append(f"kernel {k.name!r}: forbid {p.text!r}: found {n} ({', '.join(spelled[:4])})")
        cap = variant.sass.max_registers
        if cap is not None and (k.registers is None or k.registers > cap):
            bad.append(f"kernel {k.name!r}: max_registers {cap}: uses "
                       + (f"{k.registers}" if k.registers is not None else "an unknown number (no -res-usage)"))
        stores, loads = spills.get(k.mangled, (None, None))
        evidence.append(KernelEvidence(k.name, k.registers, k.stack_bytes, k.smem_bytes, k.local_bytes,
                                       stores, loads, matched))
    return evidence, bad


def _nearby(p: Pattern, opcodes: dict[str, int]) -> str:
    """What the kernel has of the pattern's opcode instead (the likely misspelling or missing modifier)."""
    same = sorted((s, n) for s, n in opcodes.items() if fnmatchcase(split_spelling(s)[0], p.opcode))
    if not same:
        return f" (no {p.opcode} at all)"
    more = " ..." if len(same) > 6 else ""
    return f" (its {p.opcode}: " + ", ".join(f"{s} x{n}" for s, n in same[:6]) + more + ")"


def _kernel_list(kernels: Iterable[Kernel]) -> str:
    names = sorted(k.name for k in kernels)
    if not names:
        return "it holds no SASS at all"
    return "it has " + ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


# ---------------------------------------------------------------- a run's builds


@dataclass
class MechanismReport:
    results: list[VariantMechanism] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    disassembled: int = 0  # binaries read by cuobjdump (the others came from the cache)

    def problems(self) -> list[Problem]:
        return [r.problem() for r in self.results if r.failed]

    def failed(self, artifact: str, variant: str, target: str) -> VariantMechanism | None:
        return next((r for r in self.results if r.failed and (r.artifact, r.variant, r.target)
                     == (artifact, variant, target)), None)

    def for_variant(self, artifact: str, variant: str, target: str) -> VariantMechanism | None:
        return next((r for r in self.results if (r.artifact, r.variant, r.target) == (artifact, variant, target)),
                    None)

    def as_json(self) -> list[dict[str, Any]]:
        return [r.as_json() for r in self.results]

    def gate(self, gating: Gating, plan: Plan, outcomes: Mapping[str, list[RunOutcome]]) -> list[Problem]:
        """The mechanism gate's findings onto the run's records (its problems were said at build time)."""
        gate(gating, plan, outcomes, self)
        return []


def check_builds(plan: Plan, builds: list[BuildResult], root: Path, *, require: bool) -> MechanismReport:
    """Check every variant's SASS expectations against its build (for every built CUDA target); a borrowing
    artifact (build.binary_of) is checked against the binary it runs. EnvironmentProblem when `require`
    and there is something to check but no disassembler."""
    import time

    t0 = time.monotonic()
    report = MechanismReport()
    by_key = {(b.artifact, b.target): b for b in builds}
    pairs: list[tuple[str, Path, Manifest, str]] = [(j.artifact, j.directory, j.manifest, j.artifact)
                                                    for j in plan.builds]
    pairs += [(a.name, a.directory, a.manifest, a.build_name) for a in plan.artifacts.values()
              if a.manifest is not None and a.binary_of is not None]
    todo = [(name, directory, m, build_name, t) for name, directory, m, build_name in pairs
            if any(v.sass for v in m.variants) and getattr(m.build, "compiler", None) == "nvcc"
            for t in m.targets if t != HOST]
    if not todo:
        return report
    tools = find_tools()
    if tools is None:
        msg = ("no disassembler: cuobjdump is neither in this Python environment nor on PATH (kwiki's install brings "
               "it on Linux; elsewhere: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
        if require:
            raise EnvironmentProblem(f"{msg}; the SASS expectations cannot be checked (required under CI and by "
                                     "--require-disassembler)")
        report.notes.append(f"WARNING: {msg}: the SASS expectations of every variant were NOT CHECKED")
    cache: dict[str, dict[str, Kernel]] = {}
    memos: dict[str, dict[str, list[Kernel]]] = {}  # per binary: glob -> the kernels it names
    checks: dict[str, _Checks] = {}  # per binary: the check results cached beside it
    for name, directory, manifest, build_name, target in todo:
        build = by_key.get((build_name, target))
        lines: dict[int, int] | None = None  # read only when a variant fails: the location of its message
        rel = shown(directory / MANIFEST, root)
        for i, v in enumerate(manifest.variants):
            if not v.sass or target not in (v.sass.targets or v.targets or [target]):
                continue
            res = VariantMechanism(name, v.name, target, "not-checked", rel, 0)
            report.results.append(res)
            if tools is None:
                res.note = "no disassembler here"
                continue
            # a Python artifact's kernels are in the CUDA library its module loads (python.cuda)
            binary = build.library if build is not None and manifest.kind == "python" else \
                build.binary if build is not None else None
            if build is None or not build.ok or not binary:
                res.note = "not built" if build is None or not build.ok or manifest.kind != "python" else \
                    "no CUDA library (python.cuda) to check"
                continue
            if binary not in checks:
                checks[binary] = _Checks(Path(binary), cache_key(Path(binary), tools))
            spills = {k: (r.spill_stores, r.spill_loads) for k, r in build.kernels.items()}
            known = checks[binary]
            spec = known.spec(v, target, spills)
            if spec in known.results:
                res.kernels, res.mismatches = known.results[spec]
            else:
                if binary not in cache:
                    kernels, hit = disassemble(Path(binary), tools, known.key)
                    cache[binary] = kernels
                    report.disassembled += not hit
                res.kernels, res.mismatches = check_variant(v, target, cache[binary], spills,
                                                            memos.setdefault(binary, {}))
                known.add(spec, res.kernels, res.mismatches)
            res.status = "failed" if res.mismatches else "passed"
            if res.failed:
                lines = _variant_lines(directory, root) if lines is None else lines
                res.line = lines.get(i, 1)
    for known in checks.values():
        known.save()
    report.seconds = time.monotonic() - t0
    return report


class _Checks:
    """The check results cached beside one binary (sass-checks.json), under the disassembly's key: a variant's
    result is a function of the binary, its `kernels` and `sass`, the target and ptxas's spills, so a cached
    `--compile-only` neither reads the listing nor matches a pattern."""

    def __init__(self, binary: Path, key: str) -> None:
        self.path, self.key, self.dirty = binary.with_name(CHECKS_NAME), key, False
        self.results: dict[str, tuple[list[KernelEvidence], list[str]]] = {}
        try:
            doc = json.loads(self.path.read_text())
            if doc.get("key") == key:
                self.results = {s: ([KernelEvidence(**k) for k in r["kernels"]], list(r["mismatches"]))
                                for s, r in doc["checks"].items()}
        except (OSError, ValueError, TypeError, KeyError):
            pass  # missing, damaged or of another binary: check again

    @staticmethod
    def spec(v: Variant, target: str, spills: dict[str, tuple[int | None, int | None]]) -> str:
        assert v.sass is not None
        doc = [v.kernels, v.sass.model_dump(mode="json"), target, sorted(spills.items())]
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:24]

    def add(self, spec: str, kernels: list[KernelEvidence], mismatches: list[str]) -> None:
        self.results[spec], self.dirty = (kernels, mismatches), True

    def save(self) -> None:
        if not self.dirty:
            return
        doc = {"key": self.key, "checks": {s: {"kernels": [asdict(k) for k in ks], "mismatches": m}
                                           for s, (ks, m) in sorted(self.results.items())}}
        try:
            write_atomic(self.path, json.dumps(doc, sort_keys=True).encode())
        except OSError:
            pass  # a read-only build directory: checked again next time



def _variant_lines(directory: Path, root: Path) -> dict[int, int]:
    """Variant index -> the line of its `sass` (else of the variant) in the manifest, for located messages."""
    try:
        _, lines = parse_yaml(decode((directory / MANIFEST).read_bytes())[0])
    except (OSError, FrontMatterError):
        return {}
    out: dict[int, int] = {}
    for loc, line in lines.items():
        if len(loc) >= 2 and loc[0] == "variants" and isinstance(loc[1], int):
            if loc[2:] == ("sass",) or (loc[1] not in out and len(loc) == 2):
                out[loc[1]] = line
    return out


# ---------------------------------------------------------------- the gate and the records


def gate(gating: Gating, plan: Plan, outcomes: Mapping[str, list[RunOutcome]], report: MechanismReport) -> None:
    """Fail every record of a variant whose SASS did not match, on the target it ran."""
    for path, outs in sorted(outcomes.items()):
        planned = plan.artifacts.get(path)
        if planned is None:
            continue
        for o in outs:
            for r in o.records:
                res = report.failed(planned.name, r.variant, o.target)
                if res is not None:
                    gating.add(planned.name, r, Finding(MECHANISM, f"{res.manifest}:{res.line}: "
                                                                   + "; ".join(res.mismatches)[:600]))


def evidence(res: VariantMechanism | None) -> MechanismEvidence | None:
    """The mechanism evidence a results-store row carries (None when the variant declares no `sass`)."""
    if res is None:
        return None
    return MechanismEvidence(status=res.status, kernels=[KernelRow(**asdict(k)) for k in res.kernels],
                             mismatches=res.mismatches, note=res.note)


def summary(report: MechanismReport) -> str | None:
    """The one-line summary of a run's checks for the notes."""
    if not report.results:
        return None
    counts: dict[str, int] = {}
    for r in report.results:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    return (f"mechanism (SASS): {len(report.results)} variant checks: {summary}; {report.disassembled} binaries "
            f"disassembled, the rest cached ({report.seconds:.2f} s)")


__all__ = ["MECHANISM", "Kernel", "MechanismReport", "Tools", "check_builds", "check_variant", "demangle",
           "disassemble", "find_tools", "gate", "parse_listing", "summary"]
