"""`kwiki verify`: pages -> plan -> build -> run -> records -> claims -> write-back and history."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kwiki import SCHEMA_VERSION
from kwiki.core.errors import EnvironmentProblem, Problem, UsageError
from kwiki.core.suggest import did_you_mean
from kwiki.results.record import PROTOCOL_VERSION
from kwiki.verify import env as envmod
from kwiki.verify import gates, history, pyartifact, sass, series
from kwiki.verify import profile as profiler
from kwiki.verify import sanitize as sanitizer
from kwiki.verify.build import BuildJob, BuildResult, build_all, build_one
from kwiki.verify.claims import ClaimResult, evaluate
from kwiki.verify.plan import Plan, PlannedArtifact, select_pages
from kwiki.verify.plan import plan as make_plan
from kwiki.verify.run import RunOutcome, gpu_lock, new_run_id, run_artifact
from kwiki.verify.writeback import write_back
from kwiki.wiki.catalog import load_wiki
from kwiki.wiki.model import Provenance
from kwiki.wiki.verdict import BLOCKING


@dataclass
class Report:
    run_id: str
    date: str
    environment: envmod.Environment
    plan: Plan
    builds: list[BuildResult]
    outcomes: dict[str, list[RunOutcome]]
    claims: list[ClaimResult]
    problems: list[Problem] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    record_changes: list[dict[str, Any]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    clocks_after: dict[str, Any] = field(default_factory=dict)
    gating: gates.Gating = field(default_factory=gates.Gating)
    mechanism: sass.MechanismReport = field(default_factory=sass.MechanismReport)  # the SASS checks (mechanism gate)
    series: dict[str, str] = field(default_factory=dict)  # artifact path -> series key
    profiled: profiler.ProfileStage | None = None  # --profile (or the cached profiles a timed run attached)
    sanitized: sanitizer.SanitizeStage | None = None  # --sanitize
    stage_only: bool = False  # --profile / --sanitize: build -> stage, no timed runs, no claims, nothing written

    def nothing_verified(self, *, compile_only: bool, until_runs: int | None) -> str | None:
        """Why a run that asked for measurements established nothing, or None. On a machine with no GPU
        at all the run can only build, as `--compile-only` does: that is said in the notes, not failed
        (`--require-gpu` makes it an error up front, for CI jobs on GPU runners)."""
        pages = len(self.plan.pages)
        if not self.plan.artifacts:
            return f"nothing verified: the {pages} selected page{'s' * (pages != 1)} name no artifact to build or run"
        if self.stage_only:
            if self.plan.gpu is None:  # the stages' notes say so; like --compile-only, not a failure
                return None if self.builds else "nothing verified: no artifact of the selected pages could be " \
                                                "built here"
            done = (self.profiled and self.profiled.profiles) or (self.sanitized and self.sanitized.results)
            return None if done else "nothing profiled or sanitized: no artifact of the selected pages has a GPU " \
                                     "build here (see the notes above)"
        could_run = any(a.run_target for a in self.plan.artifacts.values())
        if compile_only or (self.plan.gpu is None and not could_run):
            return None if self.builds else "nothing verified: no artifact of the selected pages could be built here"
        if until_runs is not None or any(self.outcomes.values()):
            return None
        return "nothing verified: no artifact of the selected pages ran here (see the notes above)"

    @property
    def ok(self) -> bool:
        return (not any(c.verdict in BLOCKING for c in self.claims)
                and all(b.ok for b in self.builds)
                and not any(f.fail for _, _, f in self.gating.findings)
                and not any(p.severity == "error" for p in self.problems))

    def as_json(self) -> dict[str, Any]:
        gpu = self.plan.gpu
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": self.ok,
            "run_id": self.run_id,
            "date": self.date,
            "environment": self.environment.as_json(),
            "gpu": gpu.name if gpu else None,
            "clocks_after": self.clocks_after,
            "protocol": PROTOCOL_VERSION,
            "artifacts": [{
                "path": a.path, "name": a.name, "hash": a.hash, "error": a.error, "pages": a.pages,
                "run_target": a.run_target, "not_run": a.why_not_run, "not_applicable": a.not_applicable,
                "series": self.series.get(a.path),
            } for a in sorted(self.plan.artifacts.values(), key=lambda a: a.path)],
            "builds": [b.as_json() for b in self.builds],
            "runs": [{
                "artifact": o.artifact, "target": o.target, "variants": o.variants, "status": o.status,
                "message": o.message, "seconds": round(o.seconds, 3), "log": o.log, "records": len(o.records),
            } for path in sorted(self.outcomes) for o in self.outcomes[path]],
            "claims": [c.as_json() for c in self.claims],
            "gates": self.gating.as_json(),
            "profile": self.profiled.as_json() if self.profiled else None,
            "sanitize": self.sanitized.as_json() if self.sanitized else None,
            "mechanism": self.mechanism.as_json(),
            "record_changes": self.record_changes,
            "problems": [p.as_json() for p in self.problems],
            "written": self.written,
            "notes": self.notes,
            "seconds": self.seconds,
        }


def verify(root: Path, *, ids: list[str], tags: list[str], arch: str | None, compile_only: bool,
           write: bool, jobs: int, progress: Callable[[str], None], until_runs: int | None = None,
           require_gpu: bool = False, require_disassembler: bool = False, profile: bool = False,
           profile_tolerance: float = profiler.DEFAULT_TOLERANCE, sanitize: list[str] | None = None,
           variants: list[str] | None = None) -> Report:
    """The pipeline. With `profile` or `sanitize` (and not `compile_only`) it runs only build -> those stages: no timed
    runs, no claims, no write-back or history (a timed run, later, reads the cached profiles)."""
    t0 = time.monotonic()
    stage_only = bool(profile or sanitize) and not compile_only
    if variants and not stage_only:
        raise UsageError("--variants selects what --profile and --sanitize run; a timed run runs every variant")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    wiki = load_wiki(root)
    pages = select_pages(wiki, ids, tags, arch)
    problems = [p for page in pages for p in page.problems if p.severity == "error"]
    broken = {page.path for page in pages if any(p.severity == "error" for p in page.problems)}
    pages = [p for p in pages if p.path not in broken and p.meta is not None]
    environment = envmod.capture(root, want_gpu=not compile_only)
    if require_gpu and not compile_only and not environment.gpus:
        raise EnvironmentProblem(f"--require-gpu: no GPU here ({environment.gpu_error or 'NVML saw none'})")
    run_id = new_run_id(now, environment.commit)
    the_plan = make_plan(wiki, pages, environment, compile_only=compile_only)
    keys, past = series.keys(the_plan), series.store_rows(the_plan)
    if variants:
        _only_variants(the_plan, variants)
    notes = _notes(the_plan, environment, compile_only)
    if stage_only:
        notes.append(f"--{' and --'.join(n for n, on in (('profile', profile), ('sanitize', sanitize)) if on)}: "
                     "build, then only that stage: no timed runs, no claims judged, nothing written"
                     + (" (a timed `kwiki verify` gives its records the cached profile figures)" if profile else ""))
    if until_runs is not None:
        skipped = series.until_runs(the_plan, past, keys, until_runs)
        notes.append(f"--until-runs {until_runs}: {len(skipped)} artifacts whose series have {until_runs} runs "
                     f"left out" + (f" ({', '.join(skipped)})" if skipped else ""))
    for note in notes:
        progress(note)
    for a in the_plan.artifacts.values():
        if a.problem:
            problems.append(a.problem)
    problems.extend(the_plan.problems)  # page entries the containment rule refused

    t_build = time.monotonic()
    builds = _build_stage(the_plan, environment, root, jobs, progress)
    build_wall = time.monotonic() - t_build
    for note in pyartifact.not_runnable(the_plan, builds):  # Python artifacts without torch here
        notes.append(note)
        progress(note)
    mechanism = sass.check_builds(the_plan, builds, root, require=sass.required_here(require_disassembler))
    problems += mechanism.problems()
    notes += [*mechanism.notes, *filter(None, [sass.summary(mechanism)])]
    for note in mechanism.notes:
        progress(note)
    outcomes: dict[str, list[RunOutcome]] = {}
    run_seconds, ran, profiled, sanitized = 0.0, 0, None, None
    with gpu_lock(the_plan.gpu, root, progress):  # one timing run per GPU, across processes
        if stage_only:  # the opt-in stages cost only their own time
            profiled = profiler.run_stage(the_plan, builds, root, progress, profile_tolerance) if profile else None
            sanitized = sanitizer.run_stage(the_plan, builds, root, progress, sanitize) if sanitize else None
        else:
            outcomes, run_seconds, ran = _run_stage(the_plan, builds, root, run_id, progress)
    if not stage_only and outcomes:  # figures of earlier --profile runs of these binaries (no ncu)
        profiled = profiler.cached_stage(the_plan, builds, outcomes, root, profile_tolerance)

    gating = gates.check(the_plan, outcomes)
    for stage, mod in ((profiled, profiler), (sanitized, sanitizer)):  # opt-in stages: their gates and notes
        if stage is not None:
            problems += mod.gate(gating, stage, outcomes, the_plan)
            notes += stage.notes
    sass.gate(gating, the_plan, outcomes, mechanism)
    results = []
    if not stage_only:
        results = evaluate(the_plan, builds, outcomes, gating)
        series.judge_over_runs(the_plan, results, past, keys, run_id)
    report = Report(run_id, now.isoformat(), environment, the_plan, builds, outcomes, results, problems,
                    notes=notes + gating.notes, gating=gating, series=keys, mechanism=mechanism,
                    profiled=profiled, sanitized=sanitized, stage_only=stage_only)
    report.clocks_after = envmod.clocks(the_plan.gpu.index) if the_plan.gpu else {}
    base = _provenance(report, None)
    if not stage_only:
        report.record_changes = history.record_run(root, base, report.run_id, report.date, the_plan, outcomes,
                                                   results, write=write, series=keys, gating=gating, past=past,
                                                   mechanism=mechanism)
    if write and not stage_only:
        written, failed = write_back(root, the_plan, outcomes, results, base, progress, gating)
        report.written += written
        report.problems += failed
    total_s = time.monotonic() - t0
    stages_s = (profiled.seconds if profiled else 0.0) + (sanitized.seconds if sanitized else 0.0)  # cached: 0
    report.seconds = {
        "total": round(total_s, 3), "build_wall": round(build_wall, 3), "run": round(run_seconds, 3),
        "mechanism": round(mechanism.seconds, 3),
        **({"profile": round(profiled.seconds, 3)} if profiled and stage_only else {}),
        **({"sanitize": round(sanitized.seconds, 3)} if sanitized else {}),
        "kwiki_overhead": round(total_s - build_wall - run_seconds - stages_s, 3),
        "kwiki_overhead_per_artifact": round((total_s - build_wall - run_seconds - stages_s) / max(1, ran), 3),
    }
    return report


def _only_variants(the_plan: Plan, variants: list[str]) -> None:
    """--variants: keep only the named variants of each planned artifact (an artifact with none of them runs
    nothing); a name no planned artifact declares is a usage error."""
    known = {v.name for a in the_plan.artifacts.values() if a.manifest for v in a.manifest.variants}
    unknown = [v for v in variants if v not in known]
    if unknown:
        raise UsageError(f"--variants: {', '.join(unknown)}: no artifact of the selected pages has such a variant"
                         + did_you_mean(unknown[0], sorted(known)))
    for a in the_plan.artifacts.values():
        a.run_variants = [v for v in a.run_variants if v in variants]
        a.isolated = [v for v in a.isolated if v in variants]


def _build_stage(the_plan: Plan, environment: envmod.Environment, root: Path, jobs: int,
                 progress: Callable[[str], None]) -> list[BuildResult]:
    total = len(the_plan.builds)
    done = [0]

    def on_build(b: BuildResult) -> None:
        done[0] += 1
        state = "cached" if b.cached else ("built" if b.ok else "FAILED")
        progress(f"build {done[0]}/{total} {b.artifact} [{b.target}]: {state} ({b.seconds:.1f} s)"
                 + (f": {b.error}" if b.error else ""))

    def on_start(job: BuildJob) -> None:
        progress(f"build {job.artifact} [{job.target}]: compiling")

    return build_all(the_plan.builds, root, nvcc=environment.nvcc_path, nvcc_version=environment.nvcc,
                     cxx=environment.cxx_path, workers=jobs, progress=on_build, started=on_start, one=_build_one)


# ---------------------------------------------------------------- artifact kinds


def _build_one(job: BuildJob, root: Path, nvcc: str | None, nvcc_version: str | None, cxx: str | None,
               started: Callable[[BuildJob], None] | None = None) -> BuildResult:
    """One job's build by its artifact's kind: a Python module is imported and its contract checked (nothing to
    compile), a CUDA artifact compiled."""
    if job.manifest.kind == "python":
        return pyartifact.check_module(job, root)
    return build_one(job, root, nvcc, nvcc_version, cxx, started)


def _run_one(planned: PlannedArtifact, build: BuildResult, *, gpu_index: int | None, root: Path,
             run_id: str) -> list[RunOutcome]:
    """One artifact's run by its kind: kwiki's harness for a Python artifact (one process, a watchdog per
    variant), the artifact's own binary for a CUDA one."""
    assert planned.manifest is not None
    if planned.manifest.kind == "python":
        return pyartifact.run_python(planned, build, gpu_index=gpu_index, root=root, run_id=run_id)
    return run_artifact(planned, build, gpu_index=gpu_index, root=root, run_id=run_id)


def _run_stage(the_plan: Plan, builds: list[BuildResult], root: Path, run_id: str,
               progress: Callable[[str], None]) -> tuple[dict[str, list[RunOutcome]], float, int]:
    """Run every artifact whose build for this GPU succeeded, one after another (runs never overlap)."""
    by_key = {(b.artifact, b.target): b for b in builds}
    runnable = [a for a in sorted(the_plan.artifacts.values(), key=lambda a: a.path)
                if a.run_target and a.manifest and (a.build_name, a.run_target) in by_key
                and by_key[(a.build_name, a.run_target)].ok]
    gpu_index = the_plan.gpu.index if the_plan.gpu else None
    outcomes: dict[str, list[RunOutcome]] = {}
    seconds = 0.0
    for n, planned in enumerate(runnable, 1):
        assert planned.run_target is not None  # runnable holds only artifacts with a run target
        progress(f"run {n}/{len(runnable)} {planned.name} [{planned.run_target}] "
                 f"{len(planned.run_variants)} variants + {len(planned.isolated)} isolated")
        t0 = time.perf_counter()
        outs = _run_one(planned, by_key[(planned.build_name, planned.run_target)], gpu_index=gpu_index,
                        root=root, run_id=run_id)
        seconds += time.perf_counter() - t0  # wall time: a Python artifact's outcomes share one process's seconds
        outcomes[planned.path] = outs
        for o in outs:
            progress(f"    {o.status}: {len(o.records)} records in {o.seconds:.1f} s"
                     + (f" ({o.message})" if o.message else ""))
    return outcomes, seconds, len(runnable)


def _notes(the_plan: Plan, environment: envmod.Environment, compile_only: bool) -> list[str]:
    notes = []
    if not environment.nvcc_path:
        notes.append("nvcc not found: CUDA artifacts cannot be compiled here (install the CUDA toolkit)")
    if compile_only:
        notes.append("--compile-only: building every artifact, running none")
    elif the_plan.gpu is None:
        notes.append(f"no GPU found ({environment.gpu_error or 'NVML saw none'}): building every artifact, "
                     "running only host-only ones")
    else:
        g = the_plan.gpu
        notes.append(f"GPU {g.index}: {g.name} ({g.arch}, {g.sm_count} SMs, {g.memory_gib} GiB, "
                     f"SM {g.sm_mhz}/{g.sm_mhz_max} MHz), driver {environment.driver}, CUDA {environment.cuda}")
    return notes


def _provenance(report: Report, artifact_hash: str | None) -> Provenance:
    e, g = report.environment, report.plan.gpu
    return Provenance(gpu=g.name if g else "host", gpu_uuid=g.uuid if g else None, arch=g.arch if g else None,
                      driver=e.driver, cuda=e.cuda, nvcc=e.nvcc, date=report.date[:10], commit=e.commit,
                      dirty=e.dirty, kwiki=e.kwiki, artifact_hash=artifact_hash)
