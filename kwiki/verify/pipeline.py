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
from kwiki.core.tracked import refuse_tracked_caches
from kwiki.results.audits import Audits
from kwiki.results.record import PROTOCOL_VERSION
from kwiki.results.store import RecordRow
from kwiki.verify import audit as audits
from kwiki.verify import compute_sanitizer as sanitizer
from kwiki.verify import env as envmod
from kwiki.verify import gates, history, pyartifact, sass, series, tracepass
from kwiki.verify import profile as profiler
from kwiki.verify.build import BuildOne, build_all, build_one
from kwiki.verify.claims import evaluate
from kwiki.verify.executor import Executor
from kwiki.verify.plan import plan as make_plan
from kwiki.verify.plan import select_pages
from kwiki.verify.run import gpu_lock, new_run_id, run_artifact
from kwiki.verify.types import BuildResult, ClaimResult, Gating, Options, Plan, PlannedArtifact, RunOutcome, ToolStage
from kwiki.verify.writeback import write_back
from kwiki.wiki.buildline import BuildJob
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
    gating: Gating = field(default_factory=Gating)
    mechanism: sass.MechanismReport = field(default_factory=sass.MechanismReport)  # the SASS checks (mechanism gate)
    series: dict[str, str] = field(default_factory=dict)  # artifact path -> series key
    profiled: profiler.ProfileStage | None = None  # --profile (or the cached profiles a timed run attached)
    sanitized: sanitizer.SanitizeStage | None = None  # --sanitize
    audits: dict[str, Any] | None = None  # the profile audits run (a timed run) or missing (--list-audits)
    timelines: tracepass.TraceStage | None = None  # the untimed trace pass of a timed run (manifests' `trace`)
    stage_only: bool = False  # --profile / --sanitize: build -> stage, no timed runs, no claims, nothing written

    def nothing_verified(self, *, compile_only: bool, until_runs: int | None) -> str | None:
        """Why a run that asked for measurements established nothing, or None. On a machine with no GPU
        at all the run can only build, as `--compile-only` does: that is said in the notes, not failed
        (`--require-gpu` makes it an error up front, for CI jobs on GPU runners)."""
        pages = len(self.plan.pages)
        if self.audits is not None and "missing" in self.audits:
            return None  # --list-audits: a listing, nothing built or run by design
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
        return (not any(c.verdict in BLOCKING and c.below_goal is None for c in self.claims)  # below goal: no failure
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
                "identity_pass": None if o.identity is None else {
                    "status": o.identity.status, "message": o.identity.message,
                    "seconds": round(o.identity.seconds, 3), "log": o.identity.log, "records": len(o.identity.records)},
            } for path in sorted(self.outcomes) for o in self.outcomes[path]],
            "claims": [c.as_json() for c in self.claims],
            "gates": self.gating.as_json(),
            "profile": self.profiled.as_json() if self.profiled else None,
            "sanitize": self.sanitized.as_json() if self.sanitized else None,
            "audits": self.audits,
            "timelines": self.timelines.as_json() if self.timelines else None,
            "mechanism": self.mechanism.as_json(),
            "record_changes": self.record_changes,
            "problems": [p.as_json() for p in self.problems],
            "written": self.written,
            "notes": self.notes,
            "seconds": self.seconds,
        }


@dataclass
class _Prepared:
    """The shared plan step's answer: the run's id and date, the machine, the plan and its series, what to say."""

    now: dt.datetime
    run_id: str
    environment: envmod.Environment
    plan: Plan
    keys: dict[str, str]  # artifact path -> series key
    past: list[RecordRow]  # the record rows of this GPU model's store
    notes: list[str]
    problems: list[Problem]


@dataclass
class _Built:
    """The shared build step's answer: every build, its wall time, and the SASS check of the binaries."""

    builds: list[BuildResult]
    wall: float
    mechanism: sass.MechanismReport


def verify(root: Path, options: Options, progress: Callable[[str], None],
           executor: Executor | None = None) -> Report:
    """`kwiki verify`: the tool stages --profile and --sanitize ask for, else a timed (or compile-only) run; with an
    `executor` (kwiki.fleet), its builds and runs happen where the executor puts them."""
    if options.variants and not options.stage_only:
        raise UsageError("--variants selects what --profile and --sanitize run; a timed run runs every variant")
    if executor is not None and (options.stage_only or options.compile_only):
        raise UsageError("--ray runs timed runs on a cluster; --profile, --sanitize and --compile-only run here")
    if options.list_audits:
        return list_audits(root, options, progress)
    refuse_tracked_caches(root)  # a binary, profile or key a checkout carries under .kwiki/ is never used
    return run_tools(root, options, progress) if options.stage_only else measure(root, options, progress, executor)


def measure(root: Path, options: Options, progress: Callable[[str], None],
            executor: Executor | None = None) -> Report:
    """Build, run, check and time every planned artifact; judge each claim over its series; append the run to the
    results store and write the numbers back (with `options.write`). `compile_only`: build and check only."""
    t0 = time.monotonic()
    prep = _prepare(root, options, progress, executor)
    built = _build(root, prep, options, progress, executor)
    outcomes: dict[str, list[RunOutcome]] = {}
    run_seconds, ran = 0.0, 0
    if executor is not None:  # its tasks hold their GPUs: one timing run per GPU there
        outcomes, run_seconds, ran = executor.run_stage(prep.plan, built.builds, root, prep.run_id, progress)
    audited = traces = None
    if executor is None:
        with gpu_lock(prep.plan.gpu, root, progress):  # one timing run per GPU, across processes
            outcomes, run_seconds, ran = _run_stage(prep.plan, built.builds, root, prep.run_id, progress)
            if options.audit and outcomes:  # the audits its records lack, where ncu is found
                audited = audits.run_missing(prep.plan, built.builds, outcomes, prep.keys, prep.environment.nvcc,
                                             root, prep.now.isoformat(), write=options.write, progress=progress)
            # after every timed run, so its stamps cost no timed sample anything
            traces = tracepass.run_stage(prep.plan, built.builds, outcomes, root, prep.run_id,
                                         write=options.write, progress=progress)
    elif tracepass.traced(prep.plan, outcomes):
        prep.notes.append("trace: the untimed trace pass runs in a local `kwiki verify`, not on a --ray cluster")
    # figures of earlier --profile runs of these binaries (no ncu)
    profiled = profiler.cached_stage(prep.plan, built.builds, outcomes, root, options.profile_tolerance) \
        if outcomes else None
    if audited is not None and audited.profiles:  # the audits just run: their counters and their gate
        profiler.attach(audited.profiles, outcomes, audited.names)
        profiled = profiled or profiler.ProfileStage(tolerance=options.profile_tolerance)
        have = {p.artifact for p in profiled.profiles}
        profiled.profiles += [p for p in audited.profiles if p.artifact not in have]
    report = _gate(prep, built, outcomes, profiled=profiled)
    if executor is not None:
        report.clocks_after = {}  # this machine's NVML would describe another GPU than the runs'
    report.claims = evaluate(prep.plan, built.builds, outcomes, report.gating)
    series.judge_over_runs(prep.plan, report.claims, prep.past, prep.keys, prep.run_id)
    audits.mark(prep.plan, report.claims, outcomes, prep.keys, prep.environment.nvcc, Audits.load(root))
    if audited is not None:
        report.notes += audited.notes
        report.audits = audited.as_json()
    if traces is not None:  # warnings: a missing picture of the schedule fails no timed result
        report.notes += traces.notes
        report.problems += traces.problems
        report.timelines = traces
    base = _provenance(report, None)
    report.record_changes = history.record_run(root, base, report.run_id, report.date, prep.plan, outcomes,
                                               report.claims, write=options.write, series=prep.keys,
                                               gating=report.gating, past=prep.past, mechanism=built.mechanism)
    if options.write:
        written, failed = write_back(root, prep.plan, outcomes, report.claims, base, progress, report.gating,
                                     other_gpu=options.other_gpu, notes=report.notes)
        report.written += written
        report.problems += failed
    report.seconds = _seconds(time.monotonic() - t0, built, run_seconds, ran)
    return report


def list_audits(root: Path, options: Options, progress: Callable[[str], None]) -> Report:
    """--list-audits: the profile audits the selected pages' records lack, from the pages, the artifacts' files and
    the committed results alone (nothing built or run)."""
    prep = _prepare(root, options, progress)
    report = Report(prep.run_id, prep.now.isoformat(), prep.environment, prep.plan, [], {}, [], prep.problems,
                    notes=list(prep.notes), series=prep.keys)
    report.stage_only = True
    committed = Audits.load(root)
    models = series.stored_models(root) if prep.plan.gpu is None else []
    if not models:  # this machine's GPU model (or, with no GPU and no runs anywhere, every record: never measured)
        lacking = audits.missing(prep.plan, prep.keys, prep.environment.nvcc, committed, prep.past)
    else:  # no GPU here (a laptop, CI): what the committed runs of each GPU model in results/ lack
        report.notes.append("--list-audits: no GPU here: listing for the GPU models with runs in results/ ("
                            + ", ".join(models) + ")")
        lacking = []
        for model in models:
            found = audits.missing(prep.plan, series.keys(prep.plan, model), prep.environment.nvcc, committed,
                                   series.store_rows(prep.plan, model))
            lacking += [{**m, "gpu": model} for m in found]
    report.audits = {"missing": lacking}
    report.notes.append(f"--list-audits: {len(lacking)} records the selected pages' claims compare lack a passing "
                        "profile audit of their code" + ("" if not lacking else ": " + "; ".join(
                            f"{m['artifact']} {m['variant']}" for m in lacking)))
    return report


def run_tools(root: Path, options: Options, progress: Callable[[str], None]) -> Report:
    """--profile and --sanitize: build, then run only those tool stages over the binaries (no timed runs, no claims,
    nothing written; a timed run, later, reads the cached profiles)."""
    t0 = time.monotonic()
    prep = _prepare(root, options, progress)
    built = _build(root, prep, options, progress)
    with gpu_lock(prep.plan.gpu, root, progress):  # the opt-in stages cost only their own time
        profiled = profile(prep, built, root, options, progress) if options.profile else None
        sanitized = sanitize(prep, built, root, options, progress) if options.sanitize else None
    report = _gate(prep, built, {}, profiled=profiled, sanitized=sanitized)
    report.stage_only = True
    report.seconds = _seconds(time.monotonic() - t0, built, 0.0, 0, profiled, sanitized)
    return report


def profile(prep: _Prepared, built: _Built, root: Path, options: Options,
            progress: Callable[[str], None]) -> profiler.ProfileStage:
    """--profile: Nsight Compute over every artifact with a GPU build here; its counters are cached for the timed
    runs of the same binaries, and (with `options.write`, at the evidence's tolerances) its audits committed to
    results/audits/ (kwiki.results.audits)."""
    committed = []

    def commit(p: profiler.ArtifactProfile) -> None:  # each artifact's audits as soon as it is profiled
        committed.append(audits.commit(prep.plan, [p], prep.keys, prep.environment.nvcc, root, prep.now.isoformat()))

    keep = options.write and options.profile_tolerance is None and prep.plan.gpu is not None
    stage = profiler.run_stage(prep.plan, built.builds, root, progress, options.profile_tolerance,
                               each=commit if keep else None)
    if keep:
        stage.notes.append(f"--profile: {sum(committed)} audits committed to results/audits/")
    return stage


def sanitize(prep: _Prepared, built: _Built, root: Path, options: Options,
             progress: Callable[[str], None]) -> sanitizer.SanitizeStage:
    """--sanitize: every variant, small, under each compute-sanitizer tool asked for."""
    return sanitizer.run_stage(prep.plan, built.builds, root, progress, list(options.sanitize))


# ---------------------------------------------------------------- the shared steps


def _prepare(root: Path, options: Options, progress: Callable[[str], None],
             executor: Executor | None = None) -> _Prepared:
    """Pages -> the machine (an executor's, where one is given) -> the plan, its series and what the run will say
    about them."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    wiki = load_wiki(root)
    pages = select_pages(wiki, list(options.ids), list(options.tags), options.arch)
    problems = [p for page in pages for p in page.problems if p.severity == "error"]
    broken = {page.path for page in pages if any(p.severity == "error" for p in page.problems)}
    pages = [p for p in pages if p.path not in broken and p.meta is not None]
    environment = envmod.capture(root, want_gpu=not options.compile_only and executor is None)
    if executor is not None:
        environment = executor.environment(environment)
    if options.require_gpu and not options.compile_only and not environment.gpus:
        raise EnvironmentProblem(f"--require-gpu: no GPU here ({environment.gpu_error or 'NVML saw none'})")
    run_id = new_run_id(now, environment.commit)
    the_plan = make_plan(wiki, pages, environment, compile_only=options.compile_only)
    keys, past = series.keys(the_plan), series.store_rows(the_plan)
    if options.variants:
        _only_variants(the_plan, list(options.variants))
    notes = _notes(the_plan, environment, options.compile_only)
    if options.stage_only:
        asked = [n for n, on in (("profile", options.profile), ("sanitize", options.sanitize)) if on]
        notes.append(f"--{' and --'.join(asked)}: build, then only that stage: no timed runs, no claims judged, "
                     "no page written"
                     + (" (its audits are committed to results/audits/; a timed `kwiki verify` gives its records "
                        "the cached profile figures)" if options.profile else ""))
    if options.until_runs is not None:
        skipped = series.until_runs(the_plan, past, keys, options.until_runs)
        notes.append(f"--until-runs {options.until_runs}: {len(skipped)} artifacts whose series have "
                     f"{options.until_runs} runs left out" + (f" ({', '.join(skipped)})" if skipped else ""))
    for note in notes:
        progress(note)
    problems += [a.problem for a in the_plan.artifacts.values() if a.problem]
    problems.extend(the_plan.problems)  # page entries the containment rule refused
    return _Prepared(now, run_id, environment, the_plan, keys, past, notes, problems)


def _build(root: Path, prep: _Prepared, options: Options, progress: Callable[[str], None],
           executor: Executor | None = None) -> _Built:
    """Every build of the plan, then the SASS check of every binary (the mechanism gate's evidence)."""
    t_build = time.monotonic()
    builds = _build_stage(prep.plan, prep.environment, root, options.jobs, progress,
                          executor.build_one if executor is not None else build_by_kind)
    wall = time.monotonic() - t_build
    for note in pyartifact.not_runnable(prep.plan, builds):  # Python artifacts without torch here
        prep.notes.append(note)
        progress(note)
    prep.problems += pyartifact.claim_params(prep.plan, builds)  # a typo in a claim's params, found before a GPU
    prep.problems += sanitizer.python_params_problems(prep.plan, builds, root)  # and in a sanitize.params entry
    mechanism = sass.check_builds(prep.plan, builds, root, require=sass.required_here(options.require_disassembler))
    prep.problems += mechanism.problems()
    prep.notes += [*mechanism.notes, *filter(None, [sass.summary(mechanism)])]
    for note in mechanism.notes:
        progress(note)
    return _Built(builds, wall, mechanism)


def _gate(prep: _Prepared, built: _Built, outcomes: dict[str, list[RunOutcome]], *,
          profiled: profiler.ProfileStage | None = None, sanitized: sanitizer.SanitizeStage | None = None) -> Report:
    """The gates over every record, then each tool stage's findings (the opt-in stages', then the SASS check's):
    the report, before claims are judged."""
    gating = gates.check(prep.plan, outcomes)
    problems, notes = list(prep.problems), list(prep.notes)
    stages: list[ToolStage] = [*(s for s in (profiled, sanitized) if s is not None), built.mechanism]
    for stage in stages:
        problems += stage.gate(gating, prep.plan, outcomes)
        if stage is not built.mechanism:  # the SASS check's notes were said at build time
            notes += stage.notes
    report = Report(prep.run_id, prep.now.isoformat(), prep.environment, prep.plan, built.builds, outcomes, [],
                    problems, notes=notes + gating.notes, gating=gating, series=prep.keys,
                    mechanism=built.mechanism, profiled=profiled, sanitized=sanitized)
    report.clocks_after = envmod.clocks(prep.plan.gpu.index) if prep.plan.gpu else {}
    return report


def _seconds(total_s: float, built: _Built, run_seconds: float, ran: int,
             profiled: profiler.ProfileStage | None = None,
             sanitized: sanitizer.SanitizeStage | None = None) -> dict[str, float]:
    """Where a run's time went: builds (wall), timed runs, the SASS check, the opt-in stages, and kwiki itself."""
    stages_s = (profiled.seconds if profiled else 0.0) + (sanitized.seconds if sanitized else 0.0)
    overhead = total_s - built.wall - run_seconds - stages_s
    return {
        "total": round(total_s, 3), "build_wall": round(built.wall, 3), "run": round(run_seconds, 3),
        "mechanism": round(built.mechanism.seconds, 3),
        **({"profile": round(profiled.seconds, 3)} if profiled else {}),
        **({"sanitize": round(sanitized.seconds, 3)} if sanitized else {}),
        "kwiki_overhead": round(overhead, 3),
        "kwiki_overhead_per_artifact": round(overhead / max(1, ran), 3),
    }


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
                 progress: Callable[[str], None], one: BuildOne) -> list[BuildResult]:
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
                     cxx=environment.cxx_path, workers=jobs, progress=on_build, started=on_start, one=one)


# ---------------------------------------------------------------- artifact kinds


def build_by_kind(job: BuildJob, root: Path, nvcc: str | None, nvcc_version: str | None, cxx: str | None,
               started: Callable[[BuildJob], None] | None = None) -> BuildResult:
    """One job's build by its artifact's kind: a Python module is imported and its contract checked (and the CUDA
    library it loads, if its manifest names one, compiled), a CUDA artifact compiled."""
    if job.manifest.kind == "python":
        return pyartifact.build_library(job, root, pyartifact.check_module(job, root),
                                        lambda lib: build_one(lib, root, nvcc, nvcc_version, cxx, started))
    return build_one(job, root, nvcc, nvcc_version, cxx, started)


def run_by_kind(planned: PlannedArtifact, build: BuildResult, *, gpu_index: int | None, root: Path,
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
        sweep = planned.manifest.sweep_shapes() if planned.manifest else None
        progress(f"run {n}/{len(runnable)} {planned.name} [{planned.run_target}] "
                 f"{len(planned.run_variants)} variants + {len(planned.isolated)} isolated"
                 + (f", then a sweep of {len(sweep.sweep)} sizes" if sweep is not None else ""))
        t0 = time.perf_counter()
        outs = run_by_kind(planned, by_key[(planned.build_name, planned.run_target)], gpu_index=gpu_index,
                        root=root, run_id=run_id)
        seconds += time.perf_counter() - t0  # wall time: a Python artifact's outcomes share one process's seconds
        outcomes[planned.path] = outs
        for o in outs:
            progress(f"    {o.status}: {len(o.records)} records in {o.seconds:.1f} s"
                     + (f" ({o.message})" if o.message else ""))
            if o.identity is not None:
                progress(f"    identity pass (CUPTI): {o.identity.status}, {len(o.identity.records)} records in "
                         f"{o.identity.seconds:.1f} s" + (f" ({o.identity.message})" if o.identity.message else ""))
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
