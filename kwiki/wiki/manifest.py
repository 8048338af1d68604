"""The artifact manifest (`artifacts/<name>/artifact.yaml`): targets, build, run, variants, baseline."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from kwiki.core.arch import ArchError, normalize_arch
from kwiki.core.errors import FrontMatterError, ManifestError
from kwiki.core.paths import COMMON_DIR, included_files, shown, within
from kwiki.core.strict import Strict
from kwiki.wiki.frontmatter import decode, parse_yaml
from kwiki.wiki.instructions import parse_pattern
from kwiki.wiki.rungs import RungRegion, check_markers

MANIFEST = "artifact.yaml"
MAX_OUTPUT_BYTES = 256 * 1024 * 1024  # a run's output is held in memory: a bound, not a wish
HOST = "host"


def _target(value: object) -> str:
    if value == HOST:
        return HOST
    try:
        return normalize_arch(value)
    except ArchError as exc:
        raise ValueError(f"{exc} (or 'host' for code that runs on the CPU only)") from None


Target = Annotated[str, BeforeValidator(_target)]
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=80)]
RelPath = Annotated[str, StringConstraints(pattern=r"^[^/~].*$", min_length=1)]
KernelPattern = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f]+$")]


def _required(value: str) -> str:
    parse_pattern(value)
    return value.strip()


def _forbidden(value: str) -> str:
    parse_pattern(value, counted=False)
    return value.strip()


RequiredSass = Annotated[str, StringConstraints(max_length=200), AfterValidator(_required)]
ForbiddenSass = Annotated[str, StringConstraints(max_length=200), AfterValidator(_forbidden)]


class Sass(Strict):
    """What the compiled code (SASS, read by `cuobjdump -sass`) of each of a variant's kernels must and
    must not contain. A pattern is OPCODE(.MODIFIER)*, matched by opcode and modifier SET, never by
    substring: `LDG.128` is any LDG having the modifier 128 (`LDG.E.128`, `LDG.E.NA.128.CONSTANT`,
    `LDG.E.LTC256B.128`, ...); `*` globs within one part (`HGMMA.64x256x*.BF16`); a require pattern
    may end in `>= N` or `== N` (static instruction count per kernel, default >= 1).
    Grammar and examples: kwiki/wiki/instructions.py and CONTRIBUTING.md."""

    require: list[RequiredSass] = Field(
        default_factory=list, description="patterns each kernel of the variant must contain (e.g. 'LDG.E.128', "
                                          "'HGMMA.F32.BF16 >= 4', 'UTMALDG'); counts are per kernel")
    forbid: list[ForbiddenSass] = Field(
        default_factory=list, description="patterns no kernel of the variant may contain (e.g. 'LDG.128' for a "
                                          "variant about 4-byte loads); no count: one occurrence fails")
    max_registers: int | None = Field(
        default=None, ge=1, le=255, description="registers per thread each kernel may use at most (ptxas's choice, "
                                                "from cuobjdump -res-usage): the evidence of a variant about "
                                                "register pressure or occupancy")
    targets: list[Target] = Field(
        default_factory=list, description="check only these targets' binaries (default: every target the variant "
                                          "builds for); for spellings that differ by architecture")

    @model_validator(mode="after")
    def _something(self) -> Sass:
        if not self.require and not self.forbid and self.max_registers is None:
            raise ValueError("give 'require', 'forbid' or 'max_registers' (or drop 'sass')")
        return self


class Build(Strict):
    """How to compile. Either `sources` (compiled by `compiler`) or a `script`.

    A script runs in the artifact's directory with KWIKI_OUT (the binary to write), KWIKI_TARGET,
    KWIKI_GENCODE (empty for host), NVCC and KWIKI_COMMON (the shared include directory) set.
    """

    sources: list[RelPath] = Field(default_factory=list)
    headers: list[RelPath] = Field(default_factory=list, description="extra files that feed the cache key")
    script: RelPath | None = None
    binary_of: RelPath | None = Field(
        default=None, description="an artifact directory (relative to this one) whose binary this artifact runs: "
                                  "the code is compiled once, by that artifact's build, and run here another way")
    compiler: Literal["nvcc", "c++"] = "nvcc"
    flags: list[str] = Field(default_factory=lambda: ["-O3", "-std=c++17"])
    target_flags: dict[Target, list[str]] = Field(default_factory=dict)
    libs: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_+-]+$")]] = Field(default_factory=list)
    timeout_s: float = Field(default=300, gt=0, le=3600)

    @model_validator(mode="after")
    def _one_way(self) -> Build:
        if sum(map(bool, (self.sources, self.script, self.binary_of))) != 1:
            raise ValueError("give one of 'sources', 'script' or 'binary_of'")
        return self


class Run(Strict):
    """How to run a build. The binary gets `args`, then `--variants a,b,c` (the variants to run).

    `command`, when given, replaces the binary: '{binary}' in it becomes the built binary's path
    and '{python}' the Python running kwiki (for drivers that load the build, or torch baselines).
    """

    args: list[str] = Field(default_factory=list)
    command: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _options(self) -> Run:
        for i, arg in enumerate(self.args):
            if not arg.startswith("--"):
                hint = (" (a YAML flow list splits at commas: quote the whole option)"
                        if i and "," not in self.args[i - 1] and "=" in self.args[i - 1] else "")
                raise ValueError(f"args[{i}] {arg!r} is not an option of the form --name=value{hint}")
        return self
    timeout_s: float = Field(default=300, gt=0, le=3600)
    max_output_bytes: int = Field(default=4 * 1024 * 1024, gt=0, le=MAX_OUTPUT_BYTES)


SANITIZE_TOOLS = ("memcheck", "racecheck", "synccheck")
SanitizeTool = Literal["memcheck", "racecheck", "synccheck"]
FlopsPath = Literal["tensor", "fp32"]  # where Nsight Compute counts FLOPs: the tensor path's operations, FP32 ops


class SanitizeExpect(Strict):
    """What each compute-sanitizer tool reports on this variant: `clean` (the default for every tool), `error`
    (the variant's bug is within the tool's reach: it must report it) or `either` (not judged)."""

    expect: dict[SanitizeTool, Literal["clean", "error", "either"]] = Field(default_factory=dict)
    why: str = Field(default="", description="why, in one line (e.g. racecheck does not see async-proxy races)")


class SanitizeRun(SanitizeExpect):
    """How `kwiki verify --sanitize` runs the artifact under each compute-sanitizer tool: `<binary> run.args
    args --check-only --variants ...` (no timing loop; kwiki.verify.compute_sanitizer says which variants share a
    process). Its `expect` and `why` hold for every variant that does not name the tool in its own (e.g. an
    artifact whose variants all run a library's kernels). A `kind: python` artifact runs kwiki's harness in its
    profile mode instead (each case checked, then called once more), over `params` in place of its GRID."""

    args: list[str] = Field(default_factory=list, description="options after run.args that make the run small "
                                                              "(e.g. '--shapes=256x256x256', '--repeats=1')")
    timeout_s: float = Field(default=600, gt=0, le=3600, description="per process (one variant, or several "
                                                                         "sharing one) and tool")
    params: list[dict[str, str | int | float | bool]] = Field(
        default_factory=list,
        description="a `kind: python` artifact's GRID under the sanitizer: small params entries, one at least off "
                    "every tile, in place of the module's GRID (whose shapes are the claims'); each has a dtype. "
                    "Default: the module's GRID")

    @model_validator(mode="after")
    def _options(self) -> SanitizeRun:
        bad = [a for a in self.args if not a.startswith("--")]
        if bad:
            raise ValueError(f"args {bad[0]!r} is not an option of the form --name=value")
        return self


TRACE_OUT = "{out}"


class Trace(Strict):
    """The untimed trace pass (kwiki.verify.tracepass): after a timed `kwiki verify` run, kwiki runs the built binary
    once more with `args` ('{out}' replaced by a file of its own), no timing, under run.timeout_s; the binary writes
    one measured timeline (kwiki.results.timelines.Timeline: spans of `%globaltimer` stamps) per line to that file,
    and kwiki commits them to results/timelines/ for the page's chart. The binary's shapes are not passed: `args`
    names the shape it traces."""

    args: list[str] = Field(min_length=1, description="the binary's options for the pass, '{out}' exactly once (the "
                                                      "file it writes its Timeline lines to), e.g. "
                                                      "['--trace-out={out}', '--shapes=4096x4096x4096']")

    @field_validator("args")
    @classmethod
    def _out_once(cls, args: list[str]) -> list[str]:  # a field's validator: its error is located at trace.args
        bad = [a for a in args if not a.startswith("--")]
        if bad:
            raise ValueError(f"{bad[0]!r} is not an option of the form --name=value")
        n = sum(a.count(TRACE_OUT) for a in args)
        if n != 1:
            raise ValueError(f"'{TRACE_OUT}' appears {n} times: give it exactly once (the file the pass writes its "
                             "timelines to, e.g. --trace-out={out})")
        return args

    def argv(self, out: str) -> list[str]:
        """`args` with '{out}' replaced by `out`."""
        return [a.replace(TRACE_OUT, out) for a in self.args]


class Variant(Strict):
    name: Name
    description: str = ""
    targets: list[Target] = Field(default_factory=list, description="default: every target of the artifact")
    isolated: bool = Field(default=False,
                           description="run alone in its own process (for variants meant to hang or crash)")
    timeout_s: float | None = Field(default=None, gt=0, le=3600, description="run timeout of an isolated variant")
    rung: int | None = Field(default=None, ge=0, le=99,
                             description="its place on the artifact's ladder (0: the library baseline), "
                                         "as fast.cu numbers kernels")
    adds: str | None = Field(default=None, description="what this rung adds to the rung below it, in one line")
    kernels: list[KernelPattern] = Field(
        default_factory=list,
        description="the kernels this variant launches: shell globs (fnmatch) over demangled kernel names, "
                    "e.g. 'gemv_block<*>' or '*cutlass*' for a library; the mechanism checks and kernel "
                    "identity use them. They are alternatives: every kernel that runs must match one, and one "
                    "of them must run")
    kernels_all: bool = Field(
        default=False, description="every glob of `kernels` must name a kernel that ran in one of the variant's "
                                   "timed samples (a multi-kernel custom variant); default: any one of them")
    sanitize: SanitizeExpect | None = Field(
        default=None, description="what compute-sanitizer's tools report on it (kwiki verify --sanitize); "
                                  "default: every tool clean")
    flops_dtype: str | None = Field(
        default=None, description="the dtype this variant's FLOPs run in where its records say another (a library "
                                  "baseline that multiplies on CUDA cores, 'fp32', beside rungs on tensor cores): "
                                  "it replaces its records' flops_dtype, so the physical gate and the profile "
                                  "audit hold its FLOPs to that path's peak and counter")
    flops_paths: list[FlopsPath] | None = Field(
        default=None, min_length=2, description="the paths the profile audit counts this variant's FLOPs on, together "
                                                "(['tensor', 'fp32']): a library that picks a tensor-core kernel at "
                                                "some shapes and a CUDA-core one at others (cuBLAS's GEMV off the "
                                                "tile). Only the audit reads it: its records, their roof and their "
                                                "series stay as their flops_dtype says; default: the path of that "
                                                "dtype alone")
    sass: Sass | None = Field(
        default=None, description="mechanism evidence: SASS instructions every kernel that `kernels` matches in "
                                  "the built binary must (`require`) and must not (`forbid`) contain; checked "
                                  "after every build (also --compile-only), a mismatch fails the variant's "
                                  "`mechanism` gate. Library variants (cuBLAS) name their kernels and no `sass`")

    @field_validator("flops_paths")
    @classmethod
    def _paths_once(cls, paths: list[str] | None) -> list[str] | None:  # located at variants.N.flops_paths
        if paths is not None and len(set(paths)) != len(paths):
            raise ValueError(f"{paths} names a path twice: name each of 'tensor' and 'fp32' once")
        return paths

    @model_validator(mode="after")
    def _sass_needs_kernels(self) -> Variant:
        if self.sass is not None and not self.kernels:
            raise ValueError(f"variant {self.name!r} has 'sass' but no 'kernels': name the kernels it checks")
        if self.kernels_all and not self.kernels:
            raise ValueError(f"variant {self.name!r} has 'kernels_all' but no 'kernels'")
        if self.sass is not None and self.targets:
            extra = sorted(set(self.sass.targets) - set(self.targets))
            if extra:
                raise ValueError(f"variant {self.name!r}: sass.targets {extra} are not targets of the variant")
        return self


class Python(Strict):
    """A Python artifact (`kind: python`): a module that supplies kernels; kwiki's harness
    (artifacts/common/kwiki_harness.py) owns the inputs, the reference comparison and the clock.

    The module defines GRID (a list of params mappings), VARIANTS (the variant names), TOLERANCES
    ({dtype: (atol, rtol, reason)}), make_inputs(params, seed, device), make_outputs(params, inputs),
    reference(params, inputs), work(params) and load(name) (the variant's callable); it imports torch
    and Triton inside those functions only, so kwiki can import it on a machine without them.
    CONTRIBUTING.md, "Python artifacts", has the whole contract.
    """

    module: RelPath = Field(description="the artifact's module, a .py file inside its directory")
    call_timeout_s: float = Field(default=120, gt=0, le=3600,
                                  description="watchdog of one call of a variant (the first call compiles); a "
                                              "variant's own `timeout_s` replaces it; a call that overruns it is "
                                              "that variant's `timeout`")
    input_sets: int = Field(default=3, ge=2, le=16, description="pre-filled input sets the timed samples rotate "
                                                                "through (fewer when they do not fit in memory)")
    cuda: list[RelPath] = Field(
        default_factory=list, description="CUDA sources kwiki compiles, per target, into one shared library (nvcc "
                                          "-shared, the artifact's headers on the include path) whose path the "
                                          "module reads from $KWIKI_CUDA_LIBRARY (ctypes); its kernels get the SASS "
                                          "and identity gates, and the harness times them interleaved with the "
                                          "module's torch baselines in one process")
    cuda_flags: list[str] = Field(default_factory=lambda: ["-O3", "-std=c++17"],
                                  description="nvcc flags of the shared library (-shared and -fPIC are added)")

    @model_validator(mode="after")
    def _py(self) -> Python:
        if not self.module.endswith(".py") or ".." in Path(self.module).parts:
            raise ValueError(f"module {self.module!r} must be a .py file inside the artifact")
        bad = [c for c in self.cuda if not c.endswith(".cu") or ".." in Path(c).parts]
        if bad:
            raise ValueError(f"cuda {bad[0]!r} must be a .cu file inside the artifact")
        return self


SIZE = re.compile(r"^[1-9][0-9]*(x[1-9][0-9]*)*$")


class Shapes(Strict):
    """Shapes the binary receives: `--OPTION=v1,v2,...` (before run.args), each value `dims` positive integers
    joined by 'x' ("4096x7168"). The manifest is their one source: the binary has no defaults, lists what it parsed
    with `--list-shapes=OPTION` (compared with `values`, in order, at every build), and a claim's params that name
    these dims must be one of the values (`kwiki check`). Each value gives the params {dims[0]: a, dims[1]: b, ...}
    of the records measured at it."""

    option: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]*$")] = Field(
        default="shapes", description="the binary's option (kwiki passes --OPTION=v1,v2,...)")
    dims: list[Name] = Field(min_length=1, description="the params one value gives, in order (e.g. [M, N, K])")
    values: list[str] = Field(min_length=1, description="the shapes, in the order the binary runs them "
                                                        "(e.g. '4096x4096x4096'); include one off the tile")
    sweep: list[str] = Field(
        default_factory=list, description="more sizes for the curve across sizes (kwiki.site.curves), run in a "
                                          "process of their own after the ladder's (`--OPTION=SWEEP` and the "
                                          "variants of `sweep_variants` only); the ladder tables fold them into one "
                                          "line, and claims name `values` only")
    sweep_variants: list[Name] = Field(
        default_factory=list, description="the variants the sweep runs: the baseline, the ceiling (if any) and the "
                                          "rungs the curve draws (required with `sweep`)")

    @model_validator(mode="after")
    def _values(self) -> Shapes:
        for field, given in (("values", self.values), ("sweep", self.sweep)):
            for i, v in enumerate(given):
                if not SIZE.match(v) or len(v.split("x")) != len(self.dims):
                    raise ValueError(f"{field}[{i}] {v!r} is not {len(self.dims)} positive integers joined by 'x' "
                                     f"({'x'.join(self.dims)})")
        if len(set(self.values)) != len(self.values) or len(set(self.sweep)) != len(self.sweep):
            raise ValueError("a value repeats")
        both = [v for v in self.sweep if v in self.values]
        if both:
            raise ValueError(f"sweep {both[0]!r} is also one of `values`: a size is the ladder's or the sweep's")
        if bool(self.sweep) != bool(self.sweep_variants):
            raise ValueError("give `sweep` and `sweep_variants` together (the sizes, and the variants run at them)")
        if len(set(self.dims)) != len(self.dims):
            raise ValueError("a dim repeats")
        return self

    def arg(self) -> str:
        return f"--{self.option}={','.join(self.values)}"

    def sweep_arg(self) -> str:
        """The option of the sweep's own process: its sizes in place of `values`."""
        return f"--{self.option}={','.join(self.sweep)}"

    def params(self, sweep: bool = False) -> list[dict[str, int]]:
        """Each value (with `sweep`, each sweep size) as the params it gives, in order."""
        given = self.sweep if sweep else self.values
        return [dict(zip(self.dims, map(int, v.split("x")), strict=True)) for v in given]


class Manifest(Strict):
    """An artifact: runnable code behind one or more pages."""

    name: Name
    title: str
    kind: Literal["binary", "python"] = Field(
        default="binary", description="binary: a built program that checks and times itself and prints records; "
                                      "python: a module of kernels that kwiki's harness checks and times")
    targets: list[Target] = Field(min_length=1)
    python: Python | None = Field(default=None, description="the module of a `kind: python` artifact")
    build: Build
    run: Run = Field(default_factory=Run)
    variants: list[Variant] = Field(min_length=1)
    baseline: Name | None = Field(default=None, description="variant every other one is compared with")
    sanitize: SanitizeRun = Field(default_factory=SanitizeRun,
                                  description="how kwiki verify --sanitize runs it (small shapes)")
    ceiling: Name | None = Field(
        default=None, description="variant whose bandwidth is the speed of light for records of the same params")
    shapes: list[Shapes] = Field(
        default_factory=list, description="the shapes the binary runs, one entry per option it takes them by "
                                          "(the manifest is their one source: the binary has no defaults)")
    fresh_inputs: bool | Annotated[str, StringConstraints(min_length=3, strip_whitespace=True)] | None = Field(
        default=None, description="protocol 3: true when every timed sample's inputs are new random values with the "
                                  "reference computed again on the GPU (every timed record then says so, or fails the "
                                  "`fresh` gate); a text says why not (e.g. an fp64 host reference of seconds)")
    trace: Trace | None = Field(
        default=None, description="the untimed trace pass: one launch of a stamped build after the timed runs, its "
                                  "timelines written to '{out}' and committed to results/timelines/ for the page")

    @model_validator(mode="before")
    @classmethod
    def _python_build(cls, data: object) -> object:
        """A Python artifact has no build section: its module is its one source (hashed, checked to exist)."""
        if not isinstance(data, dict) or data.get("kind") != "python":
            return data
        if "build" in data:
            raise ValueError("a `kind: python` artifact has no 'build': kwiki imports its module (python.module)")
        if isinstance(data.get("run"), dict) and data["run"].get("command"):
            raise ValueError("a `kind: python` artifact has no run.command: kwiki's harness runs it (run.args "
                             "gives the harness bench options, e.g. --max-seconds=1)")
        module = data["python"].get("module") if isinstance(data.get("python"), dict) else None
        if not isinstance(module, str) or not module:
            raise ValueError("a `kind: python` artifact names its module: python: {module: <file>.py}")
        cuda = data["python"].get("cuda") or []
        cuda = [c for c in cuda if isinstance(c, str)] if isinstance(cuda, list) else []
        return {**data, "build": {"sources": [module, *cuda]}}  # the library's sources are hashed and checked too

    def library_build(self) -> Build | None:
        """The build of a Python artifact's CUDA library (python.cuda), or None: a shared object of those sources."""
        if self.python is None or not self.python.cuda:
            return None
        return Build(sources=list(self.python.cuda), flags=[*self.python.cuda_flags, "-shared", "-Xcompiler", "-fPIC"],
                     timeout_s=self.build.timeout_s)

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        if (self.kind == "python") != (self.python is not None):
            raise ValueError("give 'python' (its module) exactly when kind is python")
        names = [v.name for v in self.variants]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"variant names repeat: {', '.join(dupes)}")
        for role in ("baseline", "ceiling"):
            if getattr(self, role) is not None and getattr(self, role) not in names:
                raise ValueError(f"{role} {getattr(self, role)!r} is not one of the variants")
        for v in self.variants:
            extra = sorted(set(v.targets) - set(self.targets))
            if extra:
                raise ValueError(f"variant {v.name!r} targets {extra}, which the artifact does not build")
        extra = sorted(set(self.build.target_flags) - set(self.targets))
        if extra:
            raise ValueError(f"build.target_flags names {extra}, which are not targets")
        options = [g.option for g in self.shapes]
        if len(set(options)) != len(options):
            raise ValueError("shapes: two entries name the same option")
        if self.shapes and self.kind == "python":
            raise ValueError("shapes: a `kind: python` artifact's shapes are its module's GRID")
        if self.sanitize.params and self.kind != "python":
            raise ValueError("sanitize.params: only a `kind: python` artifact has a GRID to replace (a binary's "
                             "sanitize.args repeat a shape option with a smaller value)")
        for i, entry in enumerate(self.sanitize.params):
            if "dtype" not in entry:
                raise ValueError(f"sanitize.params[{i}]: every entry names its dtype (the module's TOLERANCES key)")
        self._sweep_consistent(names)
        for arg in self.run.args:
            if any(arg == f"--{o}" or arg.startswith(f"--{o}=") for o in options):
                raise ValueError(f"run.args {arg!r} repeats an option of `shapes` (the manifest's shapes are their "
                                 "one source: kwiki passes them)")
        return self

    @model_validator(mode="after")
    def _trace_needs_binary(self) -> Manifest:
        if self.trace is not None and self.kind == "python":
            raise ValueError("trace: a `kind: python` artifact has no binary of its own to trace (kwiki's harness "
                             "runs it)")
        return self

    def _sweep_consistent(self, names: list[str]) -> None:
        """A sweep runs in a process of its own with its one option, so it needs a binary of one `shapes` entry;
        its variants must be the manifest's, shared-process ones, and give the curve its baseline and roof."""
        entry = self.sweep_shapes()
        if entry is None:
            return
        if len(self.shapes) != 1:
            raise ValueError("shapes: a `sweep` needs a manifest of one `shapes` entry (its process passes that "
                             "option alone)")
        unknown = [v for v in entry.sweep_variants if v not in names]
        if unknown:
            raise ValueError(f"shapes.sweep_variants: {unknown[0]!r} is not one of the variants")
        alone = [v for v in entry.sweep_variants if (var := self.variant(v)) is not None and var.isolated]
        if alone:
            raise ValueError(f"shapes.sweep_variants: {alone[0]!r} is isolated (it runs alone, never in the sweep)")
        for role in ("baseline", "ceiling"):
            needed = getattr(self, role)
            if needed is not None and needed not in entry.sweep_variants:
                raise ValueError(f"shapes.sweep_variants: name the {role} {needed!r}: the curve is drawn against it")
        if not set(entry.sweep_variants) - {self.baseline, self.ceiling}:
            raise ValueError("shapes.sweep_variants: name a rung besides the baseline and the ceiling (the curve's "
                             "best rung)")

    def sweep_shapes(self) -> Shapes | None:
        """The `shapes` entry that has a sweep, or None."""
        return next((g for g in self.shapes if g.sweep), None)

    def run_args(self) -> list[str]:
        """What the binary gets before `--variants`: the shapes' options, then run.args."""
        return [*(g.arg() for g in self.shapes), *self.run.args]

    def sweep_args(self) -> list[str]:
        """What the sweep's process gets before `--variants` (kwiki.verify.run): the sweep's sizes, then run.args."""
        entry = self.sweep_shapes()
        return [entry.sweep_arg(), *self.run.args] if entry is not None else []

    def sweep_keys(self, groups: Mapping[str, tuple[Mapping[str, object], set[str]]]) -> set[str]:
        """Which of a run's shape groups (a key -> (params, the variants measured there)) are sweep sizes. A
        group whose params carry the sweep entry's dims is one when they name a sweep size; a group whose params
        name its shape otherwise (`--mib` given, a byte count recorded) is one when only `sweep_variants` ran
        there (every variant of the main process runs at each of `values`)."""
        entry = self.sweep_shapes()
        if entry is None:
            return set()
        sizes = entry.params(sweep=True)
        only = set(entry.sweep_variants)
        out = set()
        for key, (params, ran) in groups.items():
            named = [d for d in entry.dims if d in params]
            if named:
                hit = any(all(p[d] == params[d] for d in named) for p in sizes)
            else:
                hit = bool(ran) and ran <= only and bool({v.name for v in self.variants} - only)
            if hit:
                out.add(key)
        return out

    def declares_shape(self, params: Mapping[str, object]) -> bool | None:
        """Whether `params` (a claim's selector) name a declared shape: None when no entry of `shapes` has a dim
        among them (nothing to check), else whether one value of such an entry agrees on every dim it names."""
        verdict: bool | None = None
        for group in self.shapes:
            named = [d for d in group.dims if d in params]
            if not named:
                continue
            verdict = verdict or any(all(p[d] == params[d] for d in named) for p in group.params())
        return verdict

    def variant(self, name: str) -> Variant | None:
        return next((v for v in self.variants if v.name == name), None)

    @property
    def flops_dtypes(self) -> dict[str, str]:
        """variant -> the dtype its FLOPs run in, where its manifest entry says (Variant.flops_dtype)."""
        return {v.name: v.flops_dtype for v in self.variants if v.flops_dtype}

    @property
    def flops_paths(self) -> dict[str, tuple[str, ...]]:
        """variant -> the paths its FLOPs are counted on together, where its manifest entry says
        (Variant.flops_paths)."""
        return {v.name: tuple(v.flops_paths) for v in self.variants if v.flops_paths}

    def not_the_binary(self) -> str | None:
        """Why a tool that wraps the artifact's binary (ncu, compute-sanitizer) would not see its kernels, or None."""
        if self.kind == "python":
            return "a Python artifact: the tool would wrap the interpreter"
        if self.run.command and self.run.command[0] != "{binary}":
            return "its run.command is a driver, not the binary"
        return None

    def variants_for(self, target: str) -> list[str]:
        return [v.name for v in self.variants if not v.targets or target in v.targets]


def shape_list(manifest: Manifest) -> str:
    """The declared shapes in one line, for messages: 'shapes: M x K in 4096x7168, 8192x8192'."""
    return "; ".join(f"--{g.option}: {'x'.join(g.dims)} in {', '.join(g.values)}" for g in manifest.shapes)


def load_manifest(directory: Path, root: Path) -> Manifest:
    """Read and validate `directory/artifact.yaml`; ManifestError with a location otherwise."""
    path = directory / MANIFEST
    rel = shown(path, root)
    if os.path.lexists(path) and not within(root, path):  # the containment rule (kwiki.core.paths)
        raise ManifestError("lies outside the repository once links are resolved (or is a broken link); not read",
                            path=rel)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"cannot read manifest: {exc.strerror or exc}", path=rel) from None
    try:
        text, _, _ = decode(raw)
        data, lines = parse_yaml(text)
    except FrontMatterError as exc:
        raise ManifestError(exc.message, path=rel, line=exc.line) from None
    if not isinstance(data, dict):
        raise ManifestError("manifest must be a mapping", path=rel, line=1)
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = tuple(err["loc"])
        line = next((lines[loc[:i]] for i in range(len(loc), 0, -1) if loc[:i] in lines), 1)
        field = ".".join(str(p) for p in loc)
        msg = err["msg"].removeprefix("Value error, ")
        more = len(exc.errors()) - 1
        raise ManifestError(msg + (f" (and {more} more)" if more else ""), path=rel, line=line, field=field) from None
    if manifest.name != directory.name:
        raise ManifestError(f"name {manifest.name!r} differs from its directory {directory.name!r}",
                            path=rel, line=lines.get(("name",), 1), field="name")
    for src in [*manifest.build.sources, *manifest.build.headers, *filter(None, [manifest.build.script])]:
        if ".." in Path(src).parts or not (directory / src).is_file():
            raise ManifestError(f"{src!r} is not a file inside the artifact", path=rel, field="build")
        if not within(root, directory / src):
            raise ManifestError(f"{src!r} is a link that leads out of the repository", path=rel, field="build")
    rung_regions(manifest, directory, root)  # a broken or unknown rung marker is the manifest's problem too
    return manifest


def rung_regions(manifest: Manifest, directory: Path, root: Path) -> list[RungRegion]:
    """The rung regions (kwiki.wiki.rungs) of the artifact's sources and headers (and, for a Python artifact, every
    .py file beside its module: its kernels usually live in one), and of the headers of artifacts/common they
    include (a kernel body two artifacts share lives there), checked against its variants."""
    files = [*manifest.build.sources, *manifest.build.headers]
    if manifest.kind == "python":
        files += sorted(p.name for p in directory.glob("*.py") if p.name not in files and within(root, p))
    paths = [directory / f for f in files]
    common = (root / COMMON_DIR).resolve()
    paths += [h for h in included_files(paths, [common]) if h.parent == common and within(root, h)]
    return check_markers([(p, shown(p, root)) for p in paths], {v.name: v.rung for v in manifest.variants})
