"""Where a page stands: its effective evidence, what its last verify run found, and its history.

One `Standing` per page, computed from the page's measurements block (written by `kwiki verify`)
and the results store; the site header, the indexes, `index.json` and the home page all read it,
so they never disagree about what "verified" or "drifted" means.

The states and their words are defined once, in kwiki.results.states.

A measurements block written before verdicts over runs (its claims carry no `runs`) is read as it
was then: drifted when a figure moved against the previous run, or a claim that passed fails now.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kwiki.results.states import State, below_goal, improved, regressed
from kwiki.results.store import ClaimRow, RecordRow
from kwiki.results.trace import PageTrace, evidence
from kwiki.wiki.evidence import EvidenceLevel
from kwiki.wiki.model import MeasuredClaim, PageMeta
from kwiki.wiki.verdict import JUDGED, NOT_REPRODUCED, PASSING, RUNS, Verdict

__all__ = ["Standing", "State", "claim_rows_by_page", "standing"]

SLOWER = "slower"  # the change of a figure that moved the wrong way (kwiki.verify.series)
HEADLINE_ORDER = {"bandwidth": 0, "throughput": 0, "ratio": 1, "time": 2}


@dataclass
class Standing:
    state: State
    evidence: str  # the effective evidence level
    verified_on: str | None = None
    date: str | None = None
    claims: int = 0  # claims on the page
    judged: int = 0  # claims the last run could judge
    passing: int = 0  # reproduced or better
    failing: int = 0  # worse (and not below goal), check failed, or caught in its series
    ambiguous: int = 0  # too close to its bound to call over its runs
    errors: int = 0  # the run could not measure it (a build or run error)
    not_run: int = 0  # in the block, but no run has measured it yet (a figure the runs did not collect)
    moved: list[str] = field(default_factory=list)  # claim ids whose figure drifted the wrong way
    improved: list[str] = field(default_factory=list)  # claim ids whose figure moved beyond its band the good way
    below_goal: dict[str, float] = field(default_factory=dict)  # claim id -> the share it misses its goal by
    caught: dict[str, str] = field(default_factory=dict)  # claim id -> where a variant it compares was caught
    unaudited: list[str] = field(default_factory=list)  # why it is measured, not verified: records without audit
    headline: tuple[str, MeasuredClaim] | None = None  # the first claim with a measured value
    runs: int | None = None  # the fewest runs any measured claim stands on (None: written before series)
    untraceable: list[str] = field(default_factory=list)  # why the block does not trace, one line each
    behind: list[str] = field(default_factory=list)  # claim ids whose figure leaves out some of its series' latest runs

    def summary(self) -> str:
        """One line: 'verified on NVIDIA H200, 2025-06-01: 4 of 4 claims reproduced'."""
        if self.state == State.not_measured:
            return f"not measured yet: figures are {self.evidence}" if self.claims else "no claims to measure"
        if self.state == State.untraceable:
            more = f" (and {len(self.untraceable) - 1} more)" if len(self.untraceable) > 1 else ""
            return (f"untraceable: kwiki's measurements do not trace to the results store: "
                    f"{self.untraceable[0] if self.untraceable else '?'}{more}")
        where = f"on {self.verified_on}" if self.verified_on else "on no GPU"
        counts = f"{self.passing} of {self.judged} claims reproduced" if self.judged else "no claim could be judged"
        extra = ""
        if self.failing:
            extra = f", {self.failing} not"
        if self.ambiguous:  # neither passing nor failing: why a page whose other claims pass is only measured
            extra += f", {self.ambiguous} ambiguous"
        if self.errors:
            extra += f", {self.errors} not measured (error)"
        if self.not_run:
            extra += f", {self.not_run} not run"
        if self.below_goal:
            extra += f", {len(self.below_goal)} below goal (by " + ", ".join(
                f"{v:.1%}" for _, v in sorted(self.below_goal.items())) + ")"
        if self.moved:
            extra += f", {len(self.moved)} drifted"
        if self.state == State.provisional and self.runs is not None:
            extra += f" ({self.runs} of {RUNS} runs)"
        if self.unaudited and self.state == State.measured:
            extra += (f"; not verified: {len(self.unaudited)} record{'s' if len(self.unaudited) != 1 else ''} "
                      f"without a passing profile audit ({self.unaudited[0]})")
        if self.behind:  # the figures trace, but newer runs of their series are in the store (kwiki.results.trace)
            n = len(self.behind)
            extra += (f"; {n} figure{'s' if n != 1 else ''} behind the results store ({self.behind[0]}"
                      f"{f' and {n - 1} more' if n > 1 else ''}: newer runs of {'their' if n != 1 else 'its'} series "
                      "are not judged in)")
        return f"{self.state.label} {where}, {(self.date or '')[:10]}: {counts}{extra}"


def _drifted(meta: PageMeta, history: list[ClaimRow]) -> list[str]:
    """Claims whose latest run left their series' band; in a block written before series, claims whose
    latest run moved their figure, or which passed the run before and fail now."""
    claims = meta.measurements.claims if meta.measurements else {}
    if any(mc.runs is not None for mc in claims.values()):
        by_id = {c.id: c for c in meta.claims}
        return sorted(cid for cid, mc in claims.items() if cid in by_id and regressed(by_id[cid], mc))
    moved = {cid for cid, mc in claims.items() if mc.change == SLOWER}
    by_claim: dict[tuple[str, str], list[ClaimRow]] = {}
    for row in history:
        by_claim.setdefault((row.claim, row.gpu), []).append(row)
    for (claim, _gpu), rows in by_claim.items():
        rows = sorted(rows, key=lambda r: r.date)
        if len(rows) >= 2 and rows[-2].verdict in PASSING and rows[-1].verdict not in PASSING:
            moved.add(claim)
    return sorted(moved)


def standing(meta: PageMeta, history: list[ClaimRow] | None = None, trace: PageTrace | None = None) -> Standing:
    """The standing of one page; `history` holds the results-store claim rows of this page, `trace` what
    the store says about its measurements block (kwiki.results.trace). An untraceable block makes the
    page untraceable: its evidence reads 'untraceable', no GPU is named, and only the claims that do
    trace are counted."""
    m = meta.measurements
    # an outside figure our measurement contradicts is history: it never counts towards the state
    history_only = {c.id for c in meta.claims if c.contradicted_by is not None}
    out = Standing(state=State.not_measured, evidence=evidence(meta, trace)[0],
                   claims=len(meta.claims) - len(history_only))
    if m is None:
        return out
    out.verified_on, out.date = m.verified_on, m.date
    counted = {cid: mc for cid, mc in m.claims.items() if cid not in history_only}
    if trace is not None and not trace.traceable:
        traced = {cid: mc for cid, mc in counted.items() if trace.untraceable(cid) is None}
        _count(out, meta, traced, history)
        out.state, out.untraceable, out.verified_on = State.untraceable, trace.reasons(), None
        return out
    _count(out, meta, counted, history, trace)
    out.unaudited = list(trace.unaudited) if trace is not None else []
    out.behind = sorted(trace.behind) if trace is not None else []
    if out.failing or (out.judged and not out.passing and not out.below_goal):
        out.state = State.not_reproduced
    elif out.moved:
        out.state = State.drifted
    elif out.below_goal:
        out.state = State.below_goal
    elif out.runs is not None and out.runs < RUNS:
        out.state = State.provisional
    elif m.evidence_level.value == "verified" and not out.unaudited and not (trace is not None and trace.legacy):
        out.state = State.verified  # never on rows of the format before run ids: one hand-written line makes one
    else:
        out.state = State.measured
    if out.state != State.verified and out.evidence == EvidenceLevel.verified.value:
        out.evidence = EvidenceLevel.measured.value  # "verified" has one meaning: the state
    return out


def evidence_rank(st: Standing) -> int:
    """The rank on the evidence ladder `query --evidence` filters a page with a measurements block by: its
    standing's, so that `query`, MCP and the home page count the same verified pages."""
    try:
        return EvidenceLevel(st.evidence).rank
    except ValueError:  # 'untraceable': ranked as the author's level by kwiki.results.trace.evidence
        return EvidenceLevel.source_reported.rank


def _count(out: Standing, meta: PageMeta, claims: dict[str, MeasuredClaim], history: list[ClaimRow] | None,
           trace: PageTrace | None = None) -> None:
    """The counts, drifted, below-goal and caught claims, runs and headline of a standing, over `claims`."""
    by_id = {c.id: c for c in meta.claims}
    out.caught = {cid: why for cid, why in (trace.caught() if trace is not None else {}).items() if cid in claims}
    out.below_goal = {cid: short for cid, mc in claims.items() if cid in by_id and cid not in out.caught
                      and (short := below_goal(by_id[cid], mc)) is not None}
    verdicts = {cid: mc.verdict for cid, mc in claims.items()}
    out.judged = sum(v in JUDGED for v in verdicts.values())
    out.passing = sum(v in PASSING and cid not in out.caught for cid, v in verdicts.items())
    out.failing = sum((v in NOT_REPRODUCED or cid in out.caught) and cid not in out.below_goal
                      for cid, v in verdicts.items())
    out.ambiguous = sum(v == Verdict.ambiguous and cid not in out.caught for cid, v in verdicts.items())
    out.errors = sum(v == Verdict.error and cid not in out.caught for cid, v in verdicts.items())
    out.not_run = sum(v == Verdict.not_run for v in verdicts.values())
    out.moved = _drifted(meta, history or [])
    out.improved = sorted(cid for cid, mc in claims.items() if cid in by_id and improved(by_id[cid], mc))
    counted = [mc.runs for mc in claims.values() if mc.runs is not None]
    out.runs = min(counted) if counted else None
    # "how fast" first: a rate, then a ratio (x cuBLAS, fraction of a ceiling), then the rest
    ranked = sorted(meta.claims, key=lambda c: HEADLINE_ORDER.get(c.metric.value, len(HEADLINE_ORDER)))
    order = [c.id for c in ranked]
    out.headline = next(((cid, claims[cid]) for cid in order
                         if cid in claims and claims[cid].value is not None and claims[cid].verdict in PASSING
                         and cid not in out.caught),
                        None)


def claim_rows_by_page(rows: list[RecordRow | ClaimRow]) -> dict[str, list[ClaimRow]]:
    """The store's claim rows grouped by the page they belong to (its id, or its path in older rows)."""
    out: dict[str, list[ClaimRow]] = {}
    for row in rows:
        if isinstance(row, ClaimRow):
            out.setdefault(row.page, []).append(row)
    return out
