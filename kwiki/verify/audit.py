"""The profile audits of a verify run (kwiki.results.audits says what they are and why "verified" needs them).

A timed run, where Nsight Compute is found, audits every artifact whose records that a claim compares and that
declare work have no audit of the same code and toolchain (`run_missing`; each within AUDIT_BUDGET_S), appends
the audits to results/audits/, and the cached profile then gives the run's records their counters and gate. The
records a claim reads a profiler's count from (an `ncu_` figure) are profiled in every timed run (`counted`): the
count is that run's measurement, which no committed audit carries.
Each claim is then told which of its records still lack a passing audit (`mark`): its page stays "measured"
(kwiki.verify.claims.evidence_for) and says why. `missing` is the dry path (`kwiki verify --list-audits`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kwiki.results.audits import AUDIT_BUDGET_S, Audits, append_audits, audit_key, audited, declares_work, selected
from kwiki.results.judge import matches
from kwiki.results.store import RecordRow
from kwiki.verify.claims import NCU_PREFIX
from kwiki.verify.types import BuildResult, ClaimResult, Plan, PlannedArtifact, RunOutcome, measures
from kwiki.wiki.manifest import HOST
from kwiki.wiki.model import Selector
from kwiki.wiki.pages import Page
from kwiki.wiki.verdict import MEASURED


@dataclass(frozen=True)
class Need:
    """One record a claim compares, on the artifact that measures it."""

    artifact: PlannedArtifact
    variant: str
    params: dict[str, Any]


def compared(plan: Plan, page: Page, claim_id: str) -> list[tuple[PlannedArtifact, Selector]]:
    """(artifact, selector) of each figure a claim compares whose records must pass an audit
    (kwiki.results.audits.audited)."""
    assert page.meta is not None
    claim = next((c for c in page.meta.claims if c.id == claim_id), None)
    if claim is None or claim.measure is None:
        return []
    out = []
    for sel in audited(claim):  # none for an outcome claim: it uses no figure
        planned = plan.artifact_for(page, claim.measure.key_of(sel))
        if planned is not None:
            out.append((planned, sel))
    return out


def counted(plan: Plan) -> dict[str, list[Selector]]:
    """Artifact path -> the selectors of every claim of the plan's pages that reads a profiler's count (an `ncu_`
    figure, kwiki.verify.ncu): a count is a measurement of the run that makes it, not a property of the code a
    committed audit could stand for, so each timed run profiles those records again (the profile cache makes that
    free on a machine that has profiled the same binary; a fresh machine pays its ncu time)."""
    out: dict[str, list[Selector]] = {}
    for page, m in measures(plan):
        for sel in (s for s in m.selectors if s.key.startswith(NCU_PREFIX)):
            planned = plan.artifact_for(page, m.key_of(sel))
            if planned is not None:
                out.setdefault(planned.path, []).append(sel)
    return out


def target_of(planned: PlannedArtifact) -> str | None:
    """The target its records are measured on: this machine's, else the manifest's first GPU target."""
    if planned.run_target:
        return planned.run_target
    m = planned.manifest
    return next((t for t in m.targets if t != "host"), None) if m is not None else None


def auditable(planned: PlannedArtifact) -> bool:
    """A record of a host-only artifact runs no GPU kernel: Nsight Compute has nothing to count."""
    return target_of(planned) not in (None, HOST)


def key_of(planned: PlannedArtifact, series: Mapping[str, str], nvcc: str | None) -> str | None:
    return audit_key(series.get(planned.path), nvcc, target_of(planned))


def mark(plan: Plan, claims: list[ClaimResult], outcomes: Mapping[str, list[RunOutcome]], series: Mapping[str, str],
         nvcc: str | None, audits: Audits) -> None:
    """Tell each measured claim which records it compares declare work and lack a passing audit of their code."""
    pages = {(p.id or p.path): p for p in plan.pages}
    for c in claims:
        page = pages.get(c.page)
        if page is None or c.verdict not in MEASURED:
            continue
        for planned, sel in compared(plan, page, c.claim):
            if not auditable(planned):
                continue
            for r in (r for o in outcomes.get(planned.path, []) if not o.sweep for r in o.records if matches(r, sel)):
                if (r.bytes is None and r.flops is None) or not r.check.passed:
                    continue  # declares no work, or has no figure (a failed check): nothing to audit
                why = audits.why_not(key_of(planned, series, nvcc), planned.name, r.variant, r.params,
                                     selected=selected(r.extra))
                if why is not None and why not in c.unaudited:
                    c.unaudited.append(why)


def missing(plan: Plan, series: Mapping[str, str], nvcc: str | None, audits: Audits,
            rows: list[RecordRow]) -> list[dict[str, Any]]:
    """The dry path: each record the selected pages' claims compare that lacks a passing audit of the current code
    (a record of the store's current series that declares no work needs none; one never measured is listed)."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for page in plan.pages:
        assert page.meta is not None
        for claim in page.meta.claims:
            for planned, sel in compared(plan, page, claim.id):
                if not auditable(planned):
                    continue
                key = key_of(planned, series, nvcc)
                stored = [r for r in rows if r.series == series.get(planned.path) and r.artifact == planned.name
                          and matches(r, sel) and not r.sweep]  # a claim never reads the sweep's
                latest = stored[-1] if stored else None
                if latest is not None and (not latest.passed or not declares_work(latest.figures)):
                    continue
                params = latest.params if latest is not None else dict(sel.params)
                why = audits.why_not(key, planned.name, sel.variant, params,
                                     selected=latest is not None and selected(latest.figures))
                if why is None:
                    continue
                ident = (planned.name, sel.variant, str(sorted(params.items())))
                entry = out.setdefault(ident, {"artifact": planned.name, "variant": sel.variant, "params": params,
                                               "key": key, "why": why, "claims": []})
                entry["claims"].append(f"{page.meta.id}:{claim.id}")
    return [out[k] for k in sorted(out)]


@dataclass
class AuditStage:
    """The audits a timed run ran: per artifact, how long, and what it says."""

    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    written: int = 0
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    profiles: list[Any] = field(default_factory=list)  # kwiki.verify.profile.ArtifactProfile, for the gate
    names: dict[str, str] = field(default_factory=dict)  # artifact path -> name, for attaching their figures

    def as_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 3), "notes": self.notes, "written": self.written,
                "artifacts": self.artifacts}


def run_missing(plan: Plan, builds: list[BuildResult], outcomes: Mapping[str, list[RunOutcome]],
                series: Mapping[str, str], nvcc: str | None, root: Path, date: str, *, write: bool,
                progress: Callable[[str], None], ncu: str | None = None) -> AuditStage:
    """Audit, under Nsight Compute, every artifact of this run whose records that declare work lack an audit of
    their code, or that a claim reads a profiler's count from (`counted`), each within AUDIT_BUDGET_S, and append
    the audits to results/audits/ (with `write`)."""
    from kwiki.verify import profile as profiler
    from kwiki.verify.ncu import find_ncu

    stage = AuditStage()
    audits = Audits.load(root)
    counts = counted(plan)
    todo = []
    for path, outs in sorted(outcomes.items()):
        planned = plan.artifacts.get(path)
        if planned is None or planned.manifest is None or not auditable(planned):
            continue
        key = key_of(planned, series, nvcc)
        # not the sweep's records: the profiled run is the shared process, at its shapes, so no audit would ever
        # cover a sweep size, and each run re-audited the sweep's variants for nothing (gemv_bf16_sm90a, H200,
        # 2026-12-06: 25 records, 33 s a run); no claim reads a sweep record
        # nor a record that timed no launch (a read roof fitted over a sweep of its own, kwiki_ceiling.cuh): the
        # profiled run gives it no case, so an audit of it alone failed (nvfp4_gemv_sm90a, H200, 2026-12-06: "no
        # record carries extra.profile_case" in each run after the first, when the roof was all that lacked one)
        outs = [o for o in outs if not o.sweep]
        unaudited = [r for o in outs for r in o.records if r.check.passed and (r.bytes or r.flops) and r.timing
                     and audits.why_not(key, planned.name, r.variant, r.params, selected=selected(r.extra)) is not None]
        uncounted = [r for o in outs for r in o.records if r.check.passed
                     and any(matches(r, sel) for sel in counts.get(path, []))]  # no record has its counts yet
        lacking = [r for r in unaudited + uncounted if not audits.uncountable(key, r.variant, r.params)]
        if lacking and key is not None:  # only the variants that lack one: the audit costs what is missing
            wanted = {r.variant for r in lacking}
            todo.append((path, replace(planned, run_variants=[v for v in planned.run_variants if v in wanted]), key))
    if not todo:
        return stage
    ncu = ncu or find_ncu()
    if plan.gpu is None or ncu is None:
        names = ", ".join(p.name for _, p, _ in todo)
        stage.notes.append(f"audits: {len(todo)} artifacts have records without a profile audit of their code "
                           f"({names}), and Nsight Compute (ncu) is not found here: the pages that use them stay "
                           "measured (set KWIKI_NCU, or run `kwiki verify` where ncu is)")
        return stage
    t0 = time.monotonic()
    by_key = {(b.artifact, b.target): b for b in builds}
    rows = []
    for path, planned, key in todo:
        build = by_key.get((planned.build_name, planned.run_target or ""))
        if build is None or not build.ok or build.binary is None:
            continue
        progress(f"audit {planned.name}: ncu (at most {AUDIT_BUDGET_S:.0f} s)")
        choices = profiler.told_choices(r for o in outcomes.get(path, []) for r in o.records)  # what the timed run
        p = profiler.profile_artifact(planned, build, ncu=ncu, root=root, gpu=plan.gpu.name,  # chose: profiled too
                                      gpu_index=plan.gpu.index, budget_s=AUDIT_BUDGET_S, choices=choices)
        profiler.match_selections([p], outcomes, {path: planned.name})  # what the timed run chose, where it chose
        mine = profiler.audit_rows(p, series=series[path], key=key, nvcc=nvcc,
                                   target=planned.run_target or "", gpu=plan.gpu.name, date=date)
        rows += mine
        stage.profiles.append(p)
        stage.names[path] = planned.name
        stage.artifacts.append({"artifact": planned.name, "seconds": round(p.seconds, 3), "cached": p.cached,
                                "error": p.error or p.skipped, "audited": len(mine),
                                "failed": sum(not r.passed for r in mine)})
        stage.notes.append(profiler.closing_note(p))
    if write:
        append_audits(root, plan.gpu.name, rows)
        stage.written = len(rows)
    stage.seconds = time.monotonic() - t0
    stage.notes.append(f"audits: {len(todo)} artifacts audited in {stage.seconds:.1f} s, {len(rows)} records"
                       + ("" if write else " (--no-write: not kept in results/audits/)"))
    return stage


def commit(plan: Plan, profiles: list[Any], series: Mapping[str, str], nvcc: str | None, root: Path,
           date: str) -> int:
    """Commit the audits of `kwiki verify --profile`'s profiles (kwiki.verify.profile.ArtifactProfile) to
    results/audits/; the number of audited records."""
    from kwiki.verify import profile as profiler

    assert plan.gpu is not None
    by_name = {a.name: (path, a) for path, a in plan.artifacts.items()}
    rows = []
    for p in profiles:
        found = by_name.get(p.artifact)
        if found is None or not auditable(found[1]):
            continue
        path, planned = found
        key = key_of(planned, series, nvcc)
        if key is None:
            continue
        rows += profiler.audit_rows(p, series=series[path], key=key, nvcc=nvcc, target=planned.run_target or "",
                                    gpu=plan.gpu.name, date=date)
    append_audits(root, plan.gpu.name, rows)
    return len(rows)
