"""The artifact manifest (`artifacts/<name>/artifact.yaml`): targets, build, run, variants, baseline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BeforeValidator,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from kwiki.core.arch import ArchError, normalize_arch
from kwiki.core.errors import FrontMatterError, ManifestError
from kwiki.core.paths import within
from kwiki.core.strict import Strict
from kwiki.wiki.frontmatter import decode, parse_yaml

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
                    "identity use them")


class Manifest(Strict):
    """An artifact: runnable code behind one or more pages."""

    name: Name
    title: str
    targets: list[Target] = Field(min_length=1)
    build: Build
    run: Run = Field(default_factory=Run)
    variants: list[Variant] = Field(min_length=1)
    baseline: Name | None = Field(default=None, description="variant every other one is compared with")
    ceiling: Name | None = Field(
        default=None, description="variant whose bandwidth is the speed of light for records of the same params")

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
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
        return self

    def variant(self, name: str) -> Variant | None:
        return next((v for v in self.variants if v.name == name), None)

    def variants_for(self, target: str) -> list[str]:
        return [v.name for v in self.variants if not v.targets or target in v.targets]


def load_manifest(directory: Path, root: Path) -> Manifest:
    """Read and validate `directory/artifact.yaml`; ManifestError with a location otherwise."""
    path = directory / MANIFEST
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
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
    return manifest
