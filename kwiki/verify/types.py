"""The values that pass between the pipeline's stages, in one place: the plan (what to build and run), a build's
result, a run's outcome, the gates' findings, a claim's result, the options of a run and the interface every
tool stage (SASS, Nsight Compute, compute-sanitizer) offers. Stages import these; this module imports no stage."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from kwiki.core.errors import Problem
from kwiki.results.gpu import Gpu
from kwiki.results.record import Record
from kwiki.wiki.buildline import BuildJob
from kwiki.wiki.manifest import Manifest
from kwiki.wiki.model import Gate, Measure
from kwiki.wiki.pages import Page
from kwiki.wiki.verdict import RUNS, Verdict

# ---------------------------------------------------------------- the plan


@dataclass
class PlannedArtifact:
    path: str  # relative to the root, e.g. 'artifacts/vector_loads_sm90a'
    directory: Path
    manifest: Manifest | None
    error: str | None = None
    problem: Problem | None = None
    hash: str | None = None
    pages: list[str] = field(default_factory=list)
    run_target: str | None = None
    why_not_run: str | None = None
    run_variants: list[str] = field(default_factory=list)  # run together in one process
    isolated: list[str] = field(default_factory=list)  # each in a process of its own
    not_applicable: list[str] = field(default_factory=list)
    sustained: list[str] = field(default_factory=list)  # variants a claim selects in the sustained regime
    binary_of: PlannedArtifact | None = None  # the artifact whose build this one runs (build.binary_of)

    @property
    def name(self) -> str:
        return self.manifest.name if self.manifest else Path(self.path).name

    @property
    def build_name(self) -> str:
        """The name of the build this artifact runs: its own, or that of the artifact it borrows from."""
        return self.binary_of.name if self.binary_of else self.name


@dataclass
class Plan:
    root: Path
    pages: list[Page]
    artifacts: dict[str, PlannedArtifact]
    builds: list[BuildJob]
    gpu: Gpu | None
    compile_only: bool
    problems: list[Problem] = field(default_factory=list)  # page entries refused by the containment rule

    def artifact_for(self, page: Page, key: str) -> PlannedArtifact | None:
        assert page.meta is not None
        rel = page.meta.artifacts.get(key)
        return self.artifacts.get(rel.rstrip("/")) if rel else None


def measures(plan: Plan) -> Iterator[tuple[Page, Measure]]:
    """(page, what it measures) of every claim of the plan's pages that an artifact measures."""
    for page in plan.pages:
        assert page.meta is not None
        yield from ((page, c.measure) for c in page.meta.claims if c.measure is not None)


# ---------------------------------------------------------------- a build


@dataclass
class KernelResources:
    """What `ptxas -v` says of one kernel at compile time: registers per thread, static shared memory, stack and
    spills in bytes (the disassembler's view of the same kernel, with local memory: kwiki.verify.sass.Kernel)."""

    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    stack_bytes: int | None = None
    smem_bytes: int | None = None


@dataclass
class BuildResult:
    """The outcome of one BuildJob: the binary (or why there is none), from the cache or the compiler, and
    what ptxas said of each kernel."""

    artifact: str
    target: str
    ok: bool
    cached: bool
    key: str
    binary: str | None = None
    seconds: float = 0.0
    command: list[str] = field(default_factory=list)
    log: str | None = None
    error: str | None = None
    kernels: dict[str, KernelResources] = field(default_factory=dict)
    not_runnable: str | None = None  # why a good build cannot run here (a Python artifact without torch)
    library: str | None = None  # a Python artifact's CUDA library (python.cuda): its kernels' SASS is checked
    grid: list[dict[str, Any]] | None = None  # a Python artifact's GRID: {params, variants that run there}

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- a run


RunStatus = Literal["ok", "check-failed", "timeout", "crash", "cuda-error", "bad-output", "output-overflow",
                 "exit-error", "not-started"]


@dataclass
class IdentityPass:
    """The CUPTI pass of an events-timed run (the manifest's run.args end on --timing=events: launch-cost artifacts,
    whose point is the gaps CUPTI's busy time leaves out): the same binary, variants and shapes once more under CUPTI
    with few samples, untimed for any claim, for the kernels each variant ran. Its records are read by the identity
    gate only: never stored, gated otherwise, audited or claimed."""

    status: RunStatus
    records: list[Record] = field(default_factory=list)
    message: str = ""
    seconds: float = 0.0
    log: str | None = None


@dataclass
class RunOutcome:
    artifact: str
    target: str
    variants: list[str]
    status: RunStatus
    records: list[Record] = field(default_factory=list)
    seconds: float = 0.0
    log: str | None = None
    message: str = ""
    returncode: int | None = None
    sweep: bool = False  # the sweep's own process (the manifest's `shapes.sweep`): its records feed curves, no claim
    identity: IdentityPass | None = None  # events-timed runs: the kernels each variant ran, from a CUPTI pass

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# ---------------------------------------------------------------- the gates


@dataclass(frozen=True)
class Finding:
    """What one gate found about one record: a failure, or (`fail` False) a warning."""

    gate: str
    reason: str
    fail: bool = True

    def as_gate(self) -> Gate:
        return Gate(name=self.gate, reason=self.reason)


@dataclass
class Gating:
    """The gates' findings on every record of one run, and what could not be gated."""

    findings: list[tuple[str, Record, Finding]] = field(default_factory=list)  # (artifact name, record, finding)
    notes: list[str] = field(default_factory=list)
    _by_record: dict[int, list[Finding]] = field(default_factory=dict, repr=False)

    def add(self, artifact: str, record: Record, finding: Finding) -> None:
        self.findings.append((artifact, record, finding))
        self._by_record.setdefault(id(record), []).append(finding)

    def failed(self, record: Record) -> list[Finding]:
        return [f for f in self._by_record.get(id(record), []) if f.fail]

    def warnings(self, record: Record) -> list[Finding]:
        return [f for f in self._by_record.get(id(record), []) if not f.fail]

    def as_json(self) -> list[dict[str, Any]]:
        return [{"artifact": artifact, "variant": r.variant, "params": r.params, "gate": f.gate,
                 "severity": "failed" if f.fail else "warning", "reason": f.reason}
                for artifact, r, f in self.findings]


# ---------------------------------------------------------------- a claim


@dataclass
class ClaimResult:
    page: str
    claim: str
    verdict: Verdict
    value: float | None = None
    unit: str | None = None
    spread: float | None = None
    detail: str = ""
    artifact: str | None = None
    matches_hardware: bool = True
    claimed: str = ""
    change: str | None = None
    direction: str = "higher"
    figure: str = ""  # what was measured: 'variant.figure', or 'a.figure / b.figure' for ratios
    gates: list[Gate] = field(default_factory=list)  # gates its figure's records failed: never passing
    warnings: list[Gate] = field(default_factory=list)  # gates that warned about them (a wrong roof)
    # over the runs of its series (kwiki.verify.series); `value` and `spread` stay this run's own
    series: str | None = None
    runs: int | None = None  # runs the verdict stands on, this one included
    median: float | None = None  # the median figure over those runs: what the verdict judged
    band: float | None = None  # relative run-to-run band: k*MAD over the runs, at least 2% of the median
    range: tuple[float, float] | None = None  # lowest and highest figure over the runs
    drift: float | None = None  # this run's relative move from the median, when outside the band
    run_ids: list[str] = field(default_factory=list)  # the runs whose figures make `median` (this run last)
    boards: list[tuple[str, int, float]] = field(default_factory=list)  # (board, runs, median) behind `median`
    unaudited: list[str] = field(default_factory=list)  # records it compares that lack a passing profile audit
    below_goal: float | None = None  # worse, but beats what it compares with: the share it misses its goal by

    @property
    def provisional(self) -> bool:
        """Judged on fewer runs than a series needs: never shown as verified."""
        return self.runs is not None and self.runs < RUNS

    def as_json(self) -> dict[str, Any]:
        return {
            "page": self.page, "claim": self.claim, "verdict": self.verdict.value, "value": self.value,
            "unit": self.unit, "spread": self.spread, "detail": self.detail, "artifact": self.artifact,
            "matches_hardware": self.matches_hardware, "claimed": self.claimed, "change": self.change,
            "figure": self.figure, "below_goal": self.below_goal, "unaudited": list(self.unaudited),
            "gates": [g.model_dump() for g in self.gates], "warnings": [g.model_dump() for g in self.warnings],
            "series": None if self.series is None else {
                "key": self.series, "runs": self.runs, "median": self.median, "band": self.band,
                "range": list(self.range) if self.range else None, "drift": self.drift,
                "provisional": self.provisional, "run_ids": list(self.run_ids),
                "boards": [{"board": b, "runs": n, "median": m} for b, n, m in self.boards]},
        }


# ---------------------------------------------------------------- a run's options and its tool stages


DEFAULT_PROFILE_TOLERANCE: float | None = None  # None: each level's, from evidence (kwiki.results.audits.TOLERANCE)


@dataclass(frozen=True)
class Options:
    """What `kwiki verify` is asked to do: which pages, which mode (a timed run, `compile_only`, or the tool
    stages `profile` and `sanitize`), and what it may write."""

    ids: tuple[str, ...] = ()  # page ids; none: every page
    tags: tuple[str, ...] = ()
    arch: str | None = None
    compile_only: bool = False
    write: bool = True  # write measured numbers back into the pages and append the run to the results store
    jobs: int = 0  # builds at a time (0: the CPU count)
    until_runs: int | None = None  # leave out the artifacts whose series already have this many runs
    other_gpu: bool = False  # write pages whose measurements are another GPU model's (kwiki.verify.writeback)
    require_gpu: bool = False
    require_disassembler: bool = False
    profile: bool = False
    profile_tolerance: float | None = DEFAULT_PROFILE_TOLERANCE
    audit: bool = True  # run the profile audits the run's records lack, where ncu is found (kwiki.results.audits)
    list_audits: bool = False  # only list the audits the selected pages' records lack: nothing built or run
    sanitize: tuple[str, ...] = ()  # compute-sanitizer tools
    variants: tuple[str, ...] = ()  # what --profile and --sanitize run (a timed run runs every variant)

    @property
    def stage_only(self) -> bool:
        """--profile / --sanitize: build, then only those stages; no timed runs, no claims, nothing written."""
        return bool(self.profile or self.sanitize) and not self.compile_only


class ToolStage(Protocol):
    """A stage that runs a tool over the built binaries (the SASS check, Nsight Compute, compute-sanitizer): its
    findings land on the run's records as gate findings (and as problems where no record can carry them); it
    keeps its notes and the seconds it took, and says what it found as JSON."""

    notes: list[str]
    seconds: float

    def gate(self, gating: Gating, plan: Plan, outcomes: Mapping[str, list[RunOutcome]]) -> list[Problem]: ...

    def as_json(self) -> dict[str, Any] | list[dict[str, Any]]: ...
