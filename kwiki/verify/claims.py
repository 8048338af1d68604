"""Give each claim a verdict from the records of a verify run."""

from __future__ import annotations

import math

from kwiki.core.arch import parse_arch
from kwiki.results.gpu import Gpu
from kwiki.results.judge import judge, matches
from kwiki.results.record import Record
from kwiki.verify.types import BuildResult, ClaimResult, Gating, Plan, RunOutcome
from kwiki.wiki.model import Claim, Metric, Outcome, Selector
from kwiki.wiki.pages import Page
from kwiki.wiki.verdict import MEASURED, OUT_OF_SCOPE, PASSING, Verdict


def outcome_of(status: str) -> Outcome:
    return {"ok": Outcome.passed, "check-failed": Outcome.check_failed, "timeout": Outcome.timeout}.get(
        status, Outcome.crash)


NCU_PREFIX = "ncu_"  # figures a profile audit attaches to a record (kwiki.verify.ncu), absent from a run without one


class _Missing(Exception):
    def __init__(self, verdict: Verdict, detail: str):
        super().__init__(detail)
        self.verdict, self.detail = verdict, detail


def _figure(outcomes: list[RunOutcome], sel: Selector) -> tuple[float, float | None, Record]:
    """(value, relative spread, record) of the selected figure, the spread None when the record has no
    timing (nothing says how much the figure moves); raises _Missing with a verdict otherwise."""
    outcome = next((o for o in outcomes if sel.variant in o.variants and not o.sweep), None)  # never the sweep's
    if outcome is None:
        raise _Missing(Verdict.error, f"variant {sel.variant!r} was not run (not in the artifact's manifest?)")
    found = [r for r in outcome.records if matches(r, sel)]
    if not found:
        if outcome.status == "check-failed":
            raise _Missing(Verdict.failed, outcome.message)
        if outcome.status != "ok":
            raise _Missing(Verdict.error, f"run {outcome.status}: {outcome.message}")
        raise _Missing(Verdict.error, f"no record of variant {sel.variant!r} with params {sel.params}")
    if len(found) > 1:
        raise _Missing(Verdict.error, f"{len(found)} records match variant {sel.variant!r} {sel.params}; "
                                      "give more params")
    record = found[0]
    if not record.check.passed:
        raise _Missing(Verdict.failed, f"variant {sel.variant!r} failed its correctness check")
    figures = record.figures()
    if sel.key not in figures and sel.key.startswith(NCU_PREFIX):  # a profiler's count, not a timed figure
        raise _Missing(Verdict.not_run, f"figure {sel.key!r} of {sel.variant!r} is Nsight Compute's: no profile of "
                                        "this code yet (a run with ncu and without --no-audit profiles it)")
    if sel.key not in figures:
        raise _Missing(Verdict.error, f"record of {sel.variant!r} has no figure {sel.key!r} "
                                      f"(has: {', '.join(sorted(figures))})")
    spread = record.timing.spread if record.timing else None
    return figures[sel.key], spread, record


def evaluate_claim(page: Page, claim: Claim, plan: Plan, builds: dict[tuple[str, str], BuildResult],
                   outcomes: dict[str, list[RunOutcome]], gpu: Gpu | None,
                   gating: Gating | None = None) -> ClaimResult:
    res = ClaimResult(page.id or page.path, claim.id, Verdict.not_testable, unit=claim.unit,
                      claimed=claim.describe(), direction=claim.direction)
    if gpu is not None and claim.conditions.gpu:
        res.matches_hardware = claim.conditions.gpu.lower() in gpu.name.lower()
    m = claim.measure
    if m is None:
        said = f"{claim.evidence}: {claim.source}" if claim.source else claim.evidence
        res.detail = said + "; no artifact measures it"
        return res
    res.figure = _describe(m.of) + (f" / {_describe(m.per)}" if m.per else "")
    planned = plan.artifact_for(page, m.artifact)
    if planned is None:
        res.verdict = Verdict.error
        res.detail = f"artifact {m.artifact!r} is not an artifact directory with {'artifact.yaml'}"
        return res
    res.artifact = planned.path
    if planned.manifest is None:
        res.verdict, res.detail = Verdict.error, planned.error or "invalid manifest"
        return res
    if gpu is not None and claim.conditions.arch and not parse_arch(claim.conditions.arch).runs_on(gpu.cc):
        res.verdict = Verdict.not_applicable
        res.detail = f"claim is for {claim.conditions.arch}; this GPU is {gpu.arch}"
        return res
    selectors = [s for s in [m.of, m.per] if s is not None and s.artifact in (None, m.artifact)]
    na = [s.variant for s in selectors if s.variant in planned.not_applicable]
    if na:
        res.verdict, res.detail = Verdict.not_applicable, f"variant {na[0]!r} does not target {planned.run_target}"
        return res
    failed_builds = [b for (name, _), b in builds.items() if name == planned.build_name and not b.ok]
    run_build = builds.get((planned.build_name, planned.run_target or ""))
    if failed_builds and (run_build is None or not run_build.ok):
        res.verdict, res.detail = Verdict.error, failed_builds[0].error or "build failed"
        return res
    if planned.why_not_run:
        res.verdict, res.detail = Verdict.not_run, f"not run: {planned.why_not_run}"
        return res
    runs = outcomes.get(planned.path, [])
    if claim.metric == Metric.outcome:
        return _judge_outcome(res, claim, runs)
    try:
        value, spread, record = _figure(_runs_of(page, m.of, m.artifact, plan, builds, outcomes), m.of)
        records = [record]
        if m.per is not None:
            denominator, spread2, record2 = _figure(_runs_of(page, m.per, m.artifact, plan, builds, outcomes), m.per)
            records.append(record2)
            if denominator == 0:
                raise _Missing(Verdict.error, f"figure {m.per.figure!r} of {m.per.variant!r} is zero")
            value = value / denominator
            spread = None if spread is None or spread2 is None else math.hypot(spread, spread2)
    except _Missing as exc:
        res.verdict, res.detail = exc.verdict, exc.detail
        return res
    res.value, res.spread = value, spread
    res.verdict = judge(claim, value, spread)
    if not res.matches_hardware:
        res.detail = f"measured on {gpu.name if gpu else '?'}; the claim is stated for {claim.conditions.gpu}"
    if gating is not None:
        _gate(res, records, gating)
    return res


def _runs_of(page: Page, sel: Selector, default: str, plan: Plan, builds: dict[tuple[str, str], BuildResult],
             outcomes: dict[str, list[RunOutcome]]) -> list[RunOutcome]:
    """The run outcomes a selector reads: its own artifact's (a figure of another artifact of the same run)
    or the measure's; _Missing, with a verdict, when that other artifact was not run here."""
    if sel.artifact is None or sel.artifact == default:
        planned = plan.artifact_for(page, default)
        return outcomes.get(planned.path, []) if planned else []
    other = plan.artifact_for(page, sel.artifact)
    if other is None or other.manifest is None:
        raise _Missing(Verdict.error, f"artifact {sel.artifact!r}: " + (other.error or "invalid manifest" if other
                                                                          else "not an artifact directory"))
    if sel.variant in other.not_applicable:
        raise _Missing(Verdict.not_applicable, f"variant {sel.variant!r} of {other.name} does not target "
                                               f"{other.run_target}")
    build = builds.get((other.build_name, other.run_target or ""))
    if other.why_not_run or build is None or not build.ok:
        why = other.why_not_run or (build.error if build else None) or "not built"
        raise _Missing(Verdict.not_run if other.why_not_run else Verdict.error, f"{other.name} not run: {why}")
    return outcomes.get(other.path, [])


def _gate(res: ClaimResult, records: list[Record], gating: Gating) -> None:
    """A figure from a record that failed a gate is never reproduced or better: the claim fails, naming the gate."""
    for r in records:
        res.gates += [f.as_gate() for f in gating.failed(r)]
        res.warnings += [f.as_gate() for f in gating.warnings(r)]
    if res.gates:
        res.verdict = Verdict.failed
        res.detail = "; ".join(f"gate {g.name}: {g.reason}" for g in res.gates)


def _describe(sel: Selector) -> str:
    params = ",".join(f"{k}={v}" for k, v in sorted(sel.params.items()))
    where = f"{sel.artifact}:" if sel.artifact else ""
    return f"{where}{sel.variant}" + (f"[{params}]" if params else "") + f".{sel.key}"


def _judge_outcome(res: ClaimResult, claim: Claim, runs: list[RunOutcome]) -> ClaimResult:
    assert claim.measure is not None
    outcome = next((o for o in runs if claim.measure.of.variant in o.variants), None)
    if outcome is None:
        res.verdict, res.detail = Verdict.error, f"variant {claim.measure.of.variant!r} was not run"
        return res
    got = outcome_of(outcome.status)
    if outcome.status == "check-failed" and claim.measure.of.variant not in {
            r.variant for r in outcome.records if not r.check.passed}:
        got = Outcome.passed
    res.verdict = Verdict.reproduced if got == claim.expect else Verdict.worse
    res.detail = f"ended: {got.value}" + (f" ({outcome.message})" if outcome.message else "")
    return res


def evaluate(plan: Plan, builds: list[BuildResult], outcomes: dict[str, list[RunOutcome]],
             gating: Gating | None = None) -> list[ClaimResult]:
    by_key = {(b.artifact, b.target): b for b in builds}
    results = []
    for page in plan.pages:
        assert page.meta is not None
        for claim in page.meta.claims:
            results.append(evaluate_claim(page, claim, plan, by_key, outcomes, plan.gpu, gating))
    return results


def evidence_for(results: list[ClaimResult]) -> str | None:
    """The evidence level a page earns from its claim results (None: nothing was measured)."""
    ran = [r for r in results if r.value is not None or r.verdict in MEASURED]
    if not ran:
        return None
    runnable = [r for r in results if r.verdict not in OUT_OF_SCOPE]
    all_pass = all(r.verdict in PASSING for r in runnable)
    on_matching = all(r.matches_hardware for r in runnable)
    settled = not any(r.provisional for r in runnable)  # fewer runs than a series needs: never verified
    audited = not any(r.unaudited for r in runnable)  # every record they compare passed a profile audit
    return "verified" if all_pass and on_matching and settled and audited else "measured"
