"""`kwiki verify`: pages -> plan -> build -> run -> records -> claims -> write-back and history."""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kwiki import SCHEMA_VERSION
from kwiki.core.errors import Problem, WriteBackError
from kwiki.verify import env as envmod
from kwiki.verify import history, tables
from kwiki.verify.build import BuildResult, build_all
from kwiki.verify.claims import ClaimResult, evaluate, evidence_for
from kwiki.verify.plan import Plan, select_pages
from kwiki.verify.plan import plan as make_plan
from kwiki.verify.run import RunOutcome, run_artifact
from kwiki.verify.writeback import locked, measurements_yaml, write_page
from kwiki.wiki.catalog import load_wiki
from kwiki.wiki.model import MeasuredClaim, Measurements, Provenance, Verdict

FAILING = frozenset({Verdict.worse, Verdict.failed, Verdict.error, Verdict.ambiguous})


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
    record_changes: list[dict] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    clocks_after: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (not any(c.verdict in FAILING for c in self.claims)
                and all(b.ok for b in self.builds)
                and not any(p.severity == "error" for p in self.problems))

    def as_json(self) -> dict:
        gpu = self.plan.gpu
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": self.ok,
            "run_id": self.run_id,
            "date": self.date,
            "environment": self.environment.as_json(),
            "gpu": gpu.name if gpu else None,
            "clocks_after": self.clocks_after,
            "artifacts": [{
                "path": a.path, "name": a.name, "hash": a.hash, "error": a.error, "pages": a.pages,
                "run_target": a.run_target, "not_run": a.why_not_run, "not_applicable": a.not_applicable,
            } for a in sorted(self.plan.artifacts.values(), key=lambda a: a.path)],
            "builds": [b.as_json() for b in self.builds],
            "runs": [{
                "artifact": o.artifact, "target": o.target, "variants": o.variants, "status": o.status,
                "message": o.message, "seconds": round(o.seconds, 3), "log": o.log, "records": len(o.records),
            } for path in sorted(self.outcomes) for o in self.outcomes[path]],
            "claims": [c.as_json() for c in self.claims],
            "record_changes": self.record_changes,
            "problems": [p.as_json() for p in self.problems],
            "written": self.written,
            "notes": self.notes,
            "seconds": self.seconds,
        }


def verify(root: Path, *, ids: list[str], tags: list[str], arch: str | None, compile_only: bool,
           write: bool, jobs: int, progress: Callable[[str], None]) -> Report:
    t0 = time.monotonic()
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    wiki = load_wiki(root)
    pages = select_pages(wiki, ids, tags, arch)
    problems = [p for page in pages for p in page.problems if p.severity == "error"]
    broken = {page.path for page in pages if any(p.severity == "error" for p in page.problems)}
    pages = [p for p in pages if p.path not in broken and p.meta is not None]
    environment = envmod.capture(root, want_gpu=not compile_only)
    run_id = now.strftime("%Y%m%dT%H%M%SZ") + (f"-{environment.commit}" if environment.commit else "")
    the_plan = make_plan(wiki, pages, environment, compile_only=compile_only)
    notes = _notes(the_plan, environment, compile_only)
    for note in notes:
        progress(note)
    for a in the_plan.artifacts.values():
        if a.problem:
            problems.append(a.problem)

    t_build = time.monotonic()
    builds = _build_stage(the_plan, environment, root, jobs, progress)
    build_wall = time.monotonic() - t_build
    outcomes, run_seconds, ran = _run_stage(the_plan, builds, root, run_id, progress)

    results = evaluate(the_plan, builds, outcomes)
    report = Report(run_id, now.isoformat(), environment, the_plan, builds, outcomes, results, problems,
                    notes=notes)
    report.clocks_after = envmod.clocks(the_plan.gpu.index) if the_plan.gpu else {}
    _history(report, root, write)
    if write:
        _write_back(report, root, progress)
    total_s = time.monotonic() - t0
    report.seconds = {
        "total": round(total_s, 3), "build_wall": round(build_wall, 3), "run": round(run_seconds, 3),
        "kwiki_overhead": round(total_s - build_wall - run_seconds, 3),
        "kwiki_overhead_per_artifact": round((total_s - build_wall - run_seconds) / max(1, ran), 3),
    }
    return report


def _build_stage(the_plan: Plan, environment: envmod.Environment, root: Path, jobs: int,
                 progress: Callable[[str], None]) -> list[BuildResult]:
    total = len(the_plan.builds)
    done = [0]

    def on_build(b: BuildResult) -> None:
        done[0] += 1
        state = "cached" if b.cached else ("built" if b.ok else "FAILED")
        progress(f"build {done[0]}/{total} {b.artifact} [{b.target}]: {state} ({b.seconds:.1f} s)"
                 + (f": {b.error}" if b.error else ""))

    return build_all(the_plan.builds, root, nvcc=environment.nvcc_path, nvcc_version=environment.nvcc,
                     cxx=environment.cxx_path, workers=jobs, progress=on_build)


def _run_stage(the_plan: Plan, builds: list[BuildResult], root: Path, run_id: str,
               progress: Callable[[str], None]) -> tuple[dict[str, list[RunOutcome]], float, int]:
    """Run every artifact whose build for this GPU succeeded, one after another (runs never overlap)."""
    by_key = {(b.artifact, b.target): b for b in builds}
    runnable = [a for a in sorted(the_plan.artifacts.values(), key=lambda a: a.path)
                if a.run_target and a.manifest and (a.name, a.run_target) in by_key
                and by_key[(a.name, a.run_target)].ok]
    gpu_index = the_plan.gpu.index if the_plan.gpu else None
    outcomes: dict[str, list[RunOutcome]] = {}
    seconds = 0.0
    for n, planned in enumerate(runnable, 1):
        progress(f"run {n}/{len(runnable)} {planned.name} [{planned.run_target}] "
                 f"{len(planned.run_variants)} variants + {len(planned.isolated)} isolated")
        outs = run_artifact(planned, by_key[(planned.name, planned.run_target)], gpu_index=gpu_index,
                            root=root, run_id=run_id)
        outcomes[planned.path] = outs
        for o in outs:
            seconds += o.seconds
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


def _round(x: float | None, digits: int = 5) -> float | None:
    return None if x is None else float(f"{x:.{digits}g}")


def _history(report: Report, root: Path, write: bool) -> None:
    """Compare with the last run on this GPU model, then append this run's rows."""
    if not report.outcomes:
        return
    # every row carries the run's provenance, with the full time of the run as its date
    common = {**_provenance(report, None).model_dump(exclude={"artifact_hash"}),
              "date": report.date, "run_id": report.run_id}
    path = history.store_path(root, common["gpu"])
    old_rows, _ = history.read_store(path)
    last_c = history.last_claims(old_rows)
    for c in report.claims:
        if c.value is None:
            continue
        prev = last_c.get((c.page, c.claim))
        c.change = "new" if prev is None or prev.value is None else history.change(
            c.value, c.spread, prev.value, prev.spread, c.direction)
    rows = _record_rows(report, common, history.last_records(old_rows)) + _claim_rows(report, common)
    if write and rows:
        history.append_rows(path, rows)


def _record_rows(report: Report, common: dict, last: dict) -> list[history.Row]:
    """One row per record of the run; notes each record's change against its last passing run."""
    rows: list[history.Row] = []
    for path_key, outs in sorted(report.outcomes.items()):
        planned = report.plan.artifacts[path_key]
        for o in outs:
            for r in o.records:
                figs = {k: _round(v) for k, v in r.figures().items()}
                spread = r.timing.spread if r.timing else None
                prev = last.get((planned.name, r.variant, json.dumps(r.params, sort_keys=True)))
                if prev is not None and "time_us" in figs:
                    report.record_changes.append({
                        "artifact": planned.name, "variant": r.variant, "params": r.params,
                        "time_us": figs["time_us"], "previous_time_us": prev.figures["time_us"],
                        "change": history.change(figs["time_us"], spread, prev.figures["time_us"], prev.spread,
                                                 "lower")})
                regs = r.extra.get("registers")
                rows.append(history.RecordRow(
                    **common, artifact=planned.name, artifact_hash=planned.hash, target=o.target,
                    variant=r.variant, params=r.params, figures=figs, spread=_round(spread, 3),
                    samples=r.timing.samples if r.timing else None, passed=r.check.passed,
                    registers=int(regs) if isinstance(regs, (int, float)) else None))
    return rows


def _claim_rows(report: Report, common: dict) -> list[history.Row]:
    rows: list[history.Row] = []
    for c in report.claims:
        if c.artifact is None or c.verdict in (Verdict.not_run, Verdict.not_testable):
            continue
        planned = report.plan.artifacts.get(c.artifact)
        rows.append(history.ClaimRow(
            **common, artifact=planned.name if planned else c.artifact, artifact_hash=planned.hash if planned else None,
            page=c.page, claim=c.claim, value=_round(c.value), unit=c.unit, spread=_round(c.spread, 3),
            verdict=c.verdict.value, change=c.change))
    return rows


def _write_back(report: Report, root: Path, progress: Callable[[str], None]) -> None:
    by_page: dict[str, list[ClaimResult]] = {}
    for c in report.claims:
        by_page.setdefault(c.page, []).append(c)
    with locked(root):
        for page in report.plan.pages:
            meta = page.meta
            assert meta is not None
            results = [c for c in by_page.get(meta.id, []) if c.artifact is not None]
            level = evidence_for(results)
            if level is None:
                continue
            hashes = {c.artifact: report.plan.artifacts[c.artifact].hash for c in results
                      if c.artifact in report.plan.artifacts}
            m = Measurements(
                evidence_level=level,
                verified_on=report.plan.gpu.name if report.plan.gpu else None,
                date=report.date[:10],
                claims={c.claim: MeasuredClaim(
                    verdict=c.verdict, value=_round(c.value), unit=c.unit, spread=_round(c.spread, 3),
                    change=c.change, detail=c.detail or None,
                    provenance=_provenance(report, hashes.get(c.artifact))) for c in results},
            )
            statements = {c.id: c.statement for c in meta.claims}
            page_prov = _provenance(report, ", ".join(sorted({h for h in hashes.values() if h})) or None)
            regions = {"claims": tables.claims_table(results, page_prov, statements)}
            ladders = []
            for key in sorted(meta.artifacts):
                planned = report.plan.artifact_for(page, key)
                if planned and planned.path in report.outcomes:
                    ladders.append(tables.ladder_table(planned, report.outcomes[planned.path]))
            if ladders:
                regions["ladder"] = "\n".join(ladders) + "\n" + tables.provenance_line(page_prov)
            try:
                assert page.fm is not None
                if write_page(page.file, page.path, page.fm.text, measurements_yaml(m), regions):
                    report.written.append(page.path)
                    progress(f"wrote {page.path} ({level})")
            except WriteBackError as exc:
                report.problems.append(exc.problem())
                progress(f"NOT written: {exc}")
