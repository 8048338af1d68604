"""Evidence that traces: each figure of a page's measurements block, checked against the results store.

`kwiki verify` writes every figure twice: into the page (the measurements block, sealed by a
checksum anyone can recompute) and into the committed results store (`results/*.jsonl`: a claim
row per claim and run, a record row per measured configuration). Each measured claim of the block
names the runs whose values make its figure (`run_ids`, the last one the run that wrote it) and
their series. A claim is traceable when the store holds the claim row of that last run for this
page and claim, of the same series, with the same verdict, run count and change, and the record
rows of exactly those runs give the claim's figure, whose median is the page's value (within the
5 significant digits figures are stored with), whose lowest and highest are its range, and which,
judged again against the claim as the page states it now, give the block's verdict. The
block as a whole must follow from what traced: its `evidence_level` is `verified` only when every
claim that could run passed, on enough runs, on the GPU its conditions name, and `verified_on` is
a GPU one of its traced runs ran on.

A figure that traces can still be behind the store: the store holds a newer run of its series, with the claim's
figure, that the figure does not read (a run of an artifact two pages share verified only the other page). It stays
true of the runs it names; `kwiki check` warns and the page's state line says so (`PageTrace.behind`).

Untraceable, with a one-line reason: a block that asserts a measurement on a page that names no
artifact; a claim of the page without a `measure` (no run can have measured it); a figure whose
runs, verdict or value the store does not hold. Every reader applies the same check (`check`,
`show`, `query`, the MCP tools, `build`) and nothing untraceable is shown as verified: the page's
state is "untraceable" (kwiki.results.standing), never "verified".

Blocks written before run ids (their claims name no `run_ids`, `runs` nor `series`) trace through
the claim row the same older kwiki wrote alongside them: the store must hold a claim row of that
page and claim, itself written before series, on the provenance's GPU and date, with the block's
verdict and value, and a change that tells a drift as the block's does. Such a claim is traceable
but `kwiki check` warns that it was written before traceability (re-run `kwiki verify`), and it never makes
its page verified (`evidence`, kwiki.results.standing): one row of that older format is easy to write by hand. A
hand-written block without run ids finds no such
row and is untraceable.

Threat model. The results store is a file committed next to the pages, so traceability catches
inconsistent hand edits and forged blocks (a verdict turned from worse to reproduced, a figure
typed in, a claim raised after its run, a block pasted onto a page that no run measured, a
re-sealed block that no run wrote), not a determined forger who also writes matching store rows.
Nothing here is a signature; the real assurance is re-verification: `kwiki verify` on a GPU
re-measures the figures and appends its own rows.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kwiki.core.errors import Problem
from kwiki.results.audits import Audits, audit_key, audited, declares_work, selected
from kwiki.results.judge import judge, matches
from kwiki.results.series import Caught, boards_of, caught, caught_text, claim_value, run_board, runs_of, stats
from kwiki.results.states import UNTRACEABLE  # the state and evidence label of a block that does not trace
from kwiki.results.store import ClaimRow, RecordRow, read_all
from kwiki.wiki.evidence import AUTHOR_LEVELS, EvidenceLevel
from kwiki.wiki.manifest import HOST
from kwiki.wiki.model import Claim, MeasuredClaim, Metric, PageMeta
from kwiki.wiki.verdict import OUT_OF_SCOPE, PASSING, RUNS, Verdict

# relative: figures are stored to 5 significant digits (kwiki.core.numbers.round_sig), so the median or
# ratio of stored figures differs from the stored median by at most about 1.5e-4 of it
TOLERANCE = 3e-4
MOVED = frozenset({"faster", "slower"})
LEGACY = "written before traceability (no run ids); re-run kwiki verify"


@dataclass(frozen=True)
class ClaimTrace:
    """What the store says about one claim of a measurements block."""

    traceable: bool
    reason: str | None = None  # why not (or, for a legacy claim, that it was written before run ids)
    legacy: bool = False  # traced through a claim row written before run ids
    gpu: str | None = None  # the GPU of the run it traced to (None: nothing to trace, a not-run entry)
    caught: str | None = None  # a variant it compares was caught in a run of its series (kwiki.results.series)


@dataclass
class PageTrace:
    """What the store says about a page's measurements block: per claim, and about the block as a whole."""

    claims: dict[str, ClaimTrace] = field(default_factory=dict)
    block: str | None = None  # why the block as a whole does not trace
    unaudited: list[str] = field(default_factory=list)  # records its claims compare without a passing audit
    behind: dict[str, str] = field(default_factory=dict)  # claim id -> the runs of its series it does not read
    # claim id -> why its figure is of earlier code than the artifact's now (kwiki.results.freshness; set by the
    # readers that plan the page's artifacts: the index, the site; never by trace())
    changed: dict[str, str] = field(default_factory=dict)

    @property
    def traceable(self) -> bool:
        return self.block is None and all(t.traceable for t in self.claims.values())

    @property
    def legacy(self) -> bool:
        """Some claim traced only through a row written before run ids (`kwiki check` warns)."""
        return any(t.legacy for t in self.claims.values())

    def reasons(self) -> list[str]:
        """One line per thing that does not trace: the block's, then each claim's, by claim id."""
        out = [self.block] if self.block else []
        out += [f"claim {cid}: {t.reason}" for cid, t in sorted(self.claims.items()) if not t.traceable]
        return out

    def caught(self) -> dict[str, str]:
        """claim id -> where a variant it compares was caught in a run of its series: such a claim is failed."""
        return {cid: t.caught for cid, t in sorted(self.claims.items()) if t.caught}

    def untraceable(self, claim_id: str) -> str | None:
        t = self.claims.get(claim_id)
        return t.reason if t is not None and not t.traceable else None


class Store:
    """The results store's rows, indexed for tracing: claim rows by (page, claim, run), record rows by
    (series, artifact, run), the claim rows written before series by (page, claim), and by page."""

    def __init__(self, rows: list[RecordRow | ClaimRow], audits: Audits | None = None):
        self.audits = audits if audits is not None else Audits()  # none given: nothing counts as audited
        self.claim_rows: dict[tuple[str, str, str], ClaimRow] = {}
        self.legacy_rows: dict[tuple[str, str], list[ClaimRow]] = {}
        self.records: dict[tuple[str | None, str, str], list[RecordRow]] = {}
        self.run_records: dict[tuple[str, str], list[RecordRow]] = {}  # (artifact, run): one run, one series
        self.series_records: dict[tuple[str | None, str], list[RecordRow]] = {}  # (series, artifact): every run
        self.by_page: dict[str, list[ClaimRow]] = {}
        for row in rows:
            if isinstance(row, ClaimRow):
                self.claim_rows[(row.page, row.claim, row.run_id)] = row
                self.by_page.setdefault(row.page, []).append(row)
                if row.series is None and row.runs is None:
                    self.legacy_rows.setdefault((row.page, row.claim), []).append(row)
            else:
                self.records.setdefault((row.series, row.artifact, row.run_id), []).append(row)
                self.run_records.setdefault((row.artifact, row.run_id), []).append(row)
                self.series_records.setdefault((row.series, row.artifact), []).append(row)

    @classmethod
    def load(cls, root: Path) -> Store:
        return cls(read_all(root), Audits.load(root))

    def history(self, page_id: str, path: str | None = None) -> list[ClaimRow]:
        """The claim rows of a page (by its id, and by its path in older rows)."""
        return [*self.by_page.get(page_id, []), *(self.by_page.get(path, []) if path else [])]


# ---------------------------------------------------------------- one claim


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=1e-12)


def _no(reason: str) -> ClaimTrace:
    return ClaimTrace(False, reason)


def asserts_nothing(mc: MeasuredClaim) -> bool:
    """A claim that was not run: no figure, no verdict a run gave, no run named. It cannot help a page
    towards verified (a claim that could run and did not keeps a page from it), so it needs no trace."""
    return mc.verdict == Verdict.not_run and mc.value is None and not mc.run_ids


def trace_claim(meta: PageMeta, claim_id: str, mc: MeasuredClaim, store: Store, path: str | None = None) -> ClaimTrace:
    if asserts_nothing(mc):
        return ClaimTrace(True)
    claim = next((c for c in meta.claims if c.id == claim_id), None)
    if claim is None:
        return _no("the page has no claim with this id")
    if claim.measure is None:
        return _no("the claim names no measure, so no kwiki run can have measured it")
    if not mc.run_ids:
        return _legacy(meta.id, path, claim_id, mc, store)
    if len(set(mc.run_ids)) != len(mc.run_ids):
        return _no("a run id appears twice in run_ids")
    last = mc.run_ids[-1]
    row = store.claim_rows.get((meta.id, claim_id, last))
    if row is None:
        return _no(f"results/ holds no row of this claim from run {last}")
    if row.series != mc.series:
        return _no(f"series {mc.series or 'none'}, but run {last} judged it in series {row.series or 'none'}")
    if row.verdict != mc.verdict.value:
        return _no(f"verdict {mc.verdict.value}, but run {last} found {row.verdict}")
    prov = mc.provenance
    if prov is not None and prov.gpu != row.gpu:
        return _no(f"measured on {prov.gpu}, but run {last} ran on {row.gpu}")
    if prov is not None and prov.artifact_hash and row.artifact_hash and prov.artifact_hash != row.artifact_hash:
        return _no(f"artifact {prov.artifact_hash}, but run {last} ran artifact {row.artifact_hash}")
    if row.runs != mc.runs:
        return _no(f"stands on {mc.runs} runs, but run {last} counted {row.runs}")
    if row.change != mc.change or (mc.runs is not None and (mc.drift is not None) != (mc.change in MOVED)):
        return _no(f"change {mc.change or 'none'} (drift {mc.drift}), but run {last} found {row.change or 'none'}")
    if mc.value is None:
        return ClaimTrace(True, gpu=row.gpu)
    return _figure(claim, mc, row, store, _other_artifact(meta, claim))


def _other_artifact(meta: PageMeta, claim: Claim) -> str | None:
    """The artifact (by name) of the other figure a cross-artifact claim compares (`of`'s or `per`'s)."""
    m = claim.measure
    path = meta.artifacts.get(m.other) if m is not None and m.other else None
    return PurePosixPath(path).name if path else None


def _figure(claim: Claim, mc: MeasuredClaim, row: ClaimRow, store: Store, other: str | None = None) -> ClaimTrace:
    """The value and range of a measured claim, recomputed from the record rows of its runs, and its
    verdict, judged again from them against the claim as the page states it now (the claim lies outside
    the sealed block: a figure raised after the run would otherwise keep the run's verdict)."""
    assert mc.value is not None
    values, boards = [], []
    for run_id in mc.run_ids or []:
        rows = store.records.get((mc.series, row.artifact, run_id), [])
        other_rows = store.run_records.get((other, run_id)) if other else None  # the same run's other artifact
        value = claim_value(rows, claim, other_rows) if rows else None
        if value is None:
            return _no(f"run {run_id} holds no figure of this claim in series {mc.series or 'none'} in results/")
        values.append(value)
        boards.append((run_board(rows, claim, other_rows), value))
    if mc.boards is not None:
        have = [(b.board, b.runs) for b in mc.boards]
        if have != [(b, n) for b, n, _ in boards_of(boards)]:
            return _no(f"boards {have}, but its runs in results/ ran on {[(b, n) for b, n, _ in boards_of(boards)]}")
    if mc.runs is not None and mc.runs != len(values):
        return _no(f"stands on {mc.runs} runs, but names {len(values)} run ids")
    median = statistics.median(values)
    if not _close(median, mc.value) or (row.median is not None and not _close(row.median, mc.value)):
        return _no(f"value {mc.value:g}, but the median of its runs in results/ is {median:.5g}")
    if mc.range is not None and not (_close(min(values), mc.range[0]) and _close(max(values), mc.range[1])):
        return _no(f"range {mc.range[0]:g}-{mc.range[1]:g}, but its runs in results/ range "
                   f"{min(values):.5g}-{max(values):.5g}")
    if mc.runs is not None:  # judged over its series (kwiki.verify.series.judge_over_runs)
        band = stats(values).band
        now = judge(claim, median, band)
        c = _caught(claim, mc, row, store, other)
        if c is not None and mc.verdict == Verdict.failed:
            return ClaimTrace(True, gpu=row.gpu, caught=caught_text(c))
        if now != mc.verdict and judge(claim, mc.value, mc.spread or band) != mc.verdict:  # rounding aside
            return _no(f"verdict {mc.verdict.value}, but its runs make it {now.value} against the claim as the "
                       f"page states it ({claim.describe()}): the claim was edited after the run")
        if c is not None:  # a block written before the rule: it traces, and every reader counts it as failed
            return ClaimTrace(True, gpu=row.gpu, caught=caught_text(c))
    return ClaimTrace(True, gpu=row.gpu)


def _caught(claim: Claim, mc: MeasuredClaim, row: ClaimRow, store: Store, other: str | None) -> Caught | None:
    """Whether a variant the claim compares was caught in a run of its series up to the run that wrote the
    block (kwiki.results.series.caught): then the block's verdict must be `failed`."""
    if mc.series is None:
        return None
    runs = [run for run in runs_of(store.series_records.get((mc.series, row.artifact), []), mc.series, row.artifact,
                                   None) if max(r.date for r in run) <= row.date]
    per = {run[0].run_id: store.run_records.get((other, run[0].run_id), []) for run in runs} if other else None
    return caught(runs, claim, per)


def _legacy(page_id: str, path: str | None, claim_id: str, mc: MeasuredClaim, store: Store) -> ClaimTrace:
    """A claim without run ids traces only as written before run ids: through the claim row that older
    kwiki wrote with it (itself before series): same GPU, date, verdict and value, and a change that tells a
    drift (faster, slower) as the block's does."""
    prov = mc.provenance
    if mc.runs is not None or mc.series is not None or prov is None:
        return _no("names no run ids (written by hand?); re-run kwiki verify")
    rows = [*store.legacy_rows.get((page_id, claim_id), []), *store.legacy_rows.get((path or "", claim_id), [])]
    for row in reversed(rows):
        if (row.gpu == prov.gpu and row.date[:10] == prov.date[:10] and row.verdict == mc.verdict.value
                and _close(row.value, mc.value) and (row.change in MOVED) == (mc.change in MOVED)):
            return ClaimTrace(True, LEGACY, legacy=True, gpu=row.gpu)
    return _no("names no run ids, and no row of results/ written before run ids has its GPU, date, verdict "
               "and value (written by hand?)")


# ---------------------------------------------------------------- the page


def trace(meta: PageMeta, store: Store, path: str | None = None) -> PageTrace | None:
    """What the store says about the page's measurements block (None: the page has none)."""
    m = meta.measurements
    if m is None:
        return None
    out = PageTrace({cid: trace_claim(meta, cid, mc, store, path) for cid, mc in sorted(m.claims.items())})
    out.unaudited = _unaudited(meta, store)
    out.behind = _behind(meta, store, out)
    measured = m.evidence_level.rank >= EvidenceLevel.measured.rank
    if not meta.artifacts and (measured or m.verified_on or not all(map(asserts_nothing, m.claims.values()))):
        out.block = "the page names no artifact, so no kwiki run can have measured it"
        return out
    gpus = {t.gpu for t in out.claims.values() if t.traceable and t.gpu is not None}
    if measured and not gpus:
        out.block = f"evidence_level {m.evidence_level.value}, but no claim of the block traces to a run in results/"
    elif m.verified_on and m.verified_on not in gpus:
        out.block = f"verified_on {m.verified_on}, but no traced run ran on it"
    elif m.evidence_level == EvidenceLevel.verified and out.traceable:
        why = _not_verified(meta, out)
        if why:
            out.block = f"evidence_level verified does not follow from its claims: {why}"
    return out


def _unaudited(meta: PageMeta, store: Store) -> list[str]:
    """Why the records the page's passing claims compare (in the run that wrote each) are not all audited: one
    line per record that declares work and has no passing profile audit of its code (kwiki.results.audits)."""
    assert meta.measurements is not None
    out: list[str] = []
    claims = {c.id: c for c in meta.claims}
    for cid, mc in sorted(meta.measurements.claims.items()):
        claim = claims.get(cid)
        if (claim is None or claim.measure is None or claim.metric == Metric.outcome or mc.verdict not in PASSING
                or not mc.run_ids or not mc.series):
            continue
        m, last = claim.measure, mc.run_ids[-1]
        written = store.claim_rows.get((meta.id, cid, last))
        if written is None:
            continue  # does not trace: said by the trace
        for sel in audited(claim):
            other = m.elsewhere(sel)
            name = _other_artifact(meta, claim) if other else None
            rows = (store.run_records.get((name, last), []) if other and name else
                    store.records.get((mc.series, written.artifact, last), []))
            for row in rows:
                if not matches(row, sel) or row.sweep or row.target == HOST or not declares_work(row.figures):
                    continue
                why = store.audits.why_not(audit_key(row.series, row.nvcc, row.target), row.artifact, row.variant,
                                           row.params, selected=selected(row.figures))
                if why is not None and why not in out:
                    out.append(why)
    return out


def _behind(meta: PageMeta, store: Store, t: PageTrace) -> dict[str, str]:
    """claim id -> why its figure is behind the store: among the latest runs of its series that hold the claim's
    figure (as many as a judgement reads), one the figure does not read. It happens when a run of an artifact two
    pages share verified the other page (this one was not written), or when two copies of the checkout each ran the
    series and the page kept one judgement. The figure is still true of the runs it names (it traces); `kwiki verify`
    of the page judges it over the latest runs. Only figures that trace are looked at."""
    assert meta.measurements is not None
    out: dict[str, str] = {}
    claims = {c.id: c for c in meta.claims}
    for cid, mc in sorted(meta.measurements.claims.items()):
        claim = claims.get(cid)
        if claim is None or mc.value is None or not mc.run_ids or not mc.series or not t.claims[cid].traceable:
            continue  # a traced figure with run ids: its claim has a measure, and the run that wrote it a row
        written = store.claim_rows[(meta.id, cid, mc.run_ids[-1])]
        other = _other_artifact(meta, claim)
        held = [run[0].run_id for run in runs_of(store.series_records.get((mc.series, written.artifact), []),
                                                 mc.series, written.artifact, None)
                if claim_value(run, claim, store.run_records.get((other, run[0].run_id)) if other else None)
                is not None]
        unread = [rid for rid in held[-RUNS:] if rid not in mc.run_ids]
        if unread:
            latest = min(RUNS, len(held))
            out[cid] = (f"series {mc.series} holds {len(held)} runs with its figure; the {len(mc.run_ids)} it reads "
                        f"leave out {len(unread)} of the latest {latest} (the newest: {unread[-1]}): "
                        f"kwiki verify {meta.id} judges it over those {latest}")
    return out


def _not_verified(meta: PageMeta, t: PageTrace) -> str | None:
    """Why the traced claims do not make the page verified (kwiki.verify.claims.evidence_for), or None."""
    assert meta.measurements is not None
    conditions = {c.id: c.conditions.gpu for c in meta.claims}
    for cid, mc in sorted(meta.measurements.claims.items()):
        if mc.verdict in OUT_OF_SCOPE:
            continue
        if mc.verdict not in PASSING:
            return f"claim {cid} is {mc.verdict.value}"
        if mc.runs is not None and mc.runs < RUNS:
            return f"claim {cid} stands on {mc.runs} of {RUNS} runs"
        want, ran_on = conditions.get(cid), t.claims[cid].gpu
        if want and ran_on and ran_on != "host" and want.lower() not in ran_on.lower():
            return f"claim {cid} is stated for {want} but ran on {ran_on}"
    return None


def evidence(meta: PageMeta, t: PageTrace | None) -> tuple[str, int]:
    """The page's evidence label and its rank on the ladder, for `query --evidence`: kwiki's level when
    its block traces; for an untraceable block 'untraceable', ranked as the author's own level (never
    above source-reported), so no filter for measured or verified pages matches it."""
    if t is None or t.traceable:
        level = meta.effective_evidence
        if t is not None and t.legacy and level == EvidenceLevel.verified:
            level = EvidenceLevel.measured  # a row of the format before run ids never makes a page verified
        return level.value, level.rank
    own = meta.evidence_level if meta.evidence_level in AUTHOR_LEVELS else EvidenceLevel.spec
    return UNTRACEABLE, own.rank


# ---------------------------------------------------------------- kwiki check


def check_pages(root: Path, pages: list[tuple[str, PageMeta, int]]) -> list[Problem]:
    """`kwiki check`'s trace check over (path, meta, line of `measurements`) of the pages with a block: an
    error for each figure that does not trace; a warning for a block written before run ids, and one per series of
    figures behind the store (`_behind`: only a `kwiki verify` of the page resolves it, so --strict keeps it a
    warning)."""
    if not pages:
        return []
    store = Store.load(root)
    out: list[Problem] = []
    for path, meta, line in pages:
        t = trace(meta, store, path)
        if t is None:
            continue
        if t.block:
            out.append(Problem(path, line, "measurements", f"untraceable: {t.block}"))
        for cid, ct in sorted(t.claims.items()):
            if not ct.traceable:
                out.append(Problem(path, line, f"measurements.claims.{cid}", f"untraceable: {ct.reason}"))
        if t.legacy:
            out.append(Problem(path, line, "measurements", LEGACY, "warning"))
        by_reason: dict[str, list[str]] = {}
        for cid, why in sorted(t.behind.items()):
            by_reason.setdefault(why, []).append(cid)
        for why, ids in sorted(by_reason.items()):
            named = ", ".join(ids[:4]) + (f" and {len(ids) - 4} more" if len(ids) > 4 else "")
            out.append(Problem(path, line, "measurements", f"{len(ids)} figure(s) behind the results store "
                                                           f"({named}): {why}", "warning"))
    return out
