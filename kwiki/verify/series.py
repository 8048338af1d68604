"""A verify run's series: the key of each planned artifact's series, and its claims judged over their runs.

The key is `<gpu model>/p<protocol>/<hash>` (kwiki.results.series says what a series is and how its runs
are judged); the hash covers the artifact's own files, the headers they include and the build settings.
"""

from __future__ import annotations

from pathlib import Path

from kwiki.results.freshness import code_key
from kwiki.results.judge import judge
from kwiki.results.record import PROTOCOL_VERSION
from kwiki.results.series import (
    boards_of,
    caught,
    caught_text,
    claim_value,
    follows,
    follows_text,
    older_series,
    run_board,
    run_counts,
    runs_of,
    stats,
)
from kwiki.results.states import shortfall
from kwiki.results.store import RecordRow, gpu_slug, read_store, store_path
from kwiki.results.storelines import RESULTS_DIR
from kwiki.verify.types import ClaimResult, Plan, PlannedArtifact, measures
from kwiki.wiki.model import Claim
from kwiki.wiki.verdict import MEASURED, NOT_MEASURED, RUNS, Verdict

# ---------------------------------------------------------------- the key


def series_key(planned: PlannedArtifact, gpu_name: str, root: Path) -> str | None:
    """`nvidia-h200/p1/3fa2c9d0e1b2`: the series of `planned` on this GPU model (None without a manifest). Its code
    part is kwiki.results.freshness.code_key, which also tells a page's figures of earlier code."""
    m = planned.manifest
    if m is None:
        return None
    builder = planned.binary_of or planned  # an artifact that runs another's binary: that build's files
    if builder.manifest is None:
        return None
    own = (builder.directory, builder.manifest) if planned.binary_of else None
    return f"{gpu_slug(gpu_name)}/p{PROTOCOL_VERSION}/{code_key(planned.directory, m, root, own)}"


def gpu_name(plan: Plan) -> str:
    return plan.gpu.name if plan.gpu else "host"


def keys(plan: Plan, gpu: str | None = None) -> dict[str, str]:
    """artifact path -> series key, for every planned artifact with a manifest, on this machine's GPU model (or
    `gpu`'s)."""
    out = {}
    for path, planned in sorted(plan.artifacts.items()):
        key = series_key(planned, gpu or gpu_name(plan), plan.root)
        if key is not None:
            out[path] = key
    return out


def store_rows(plan: Plan, gpu: str | None = None) -> list[RecordRow]:
    """The record rows of this GPU model's store (or `gpu`'s): the runs every series is read from."""
    rows, _ = read_store(store_path(plan.root, gpu or gpu_name(plan)))
    return [r for r in rows if isinstance(r, RecordRow)]


def stored_models(root: Path) -> list[str]:
    """The GPU models whose stores are in results/, by the name their records carry ('NVIDIA H200')."""
    out: set[str] = set()
    for path in sorted((root / RESULTS_DIR).glob("*.jsonl")):
        rows, _ = read_store(path, warn=False)
        out.update(r.gpu for r in rows if isinstance(r, RecordRow) and r.gpu and store_path(root, r.gpu) == path)
    return sorted(out)


def _other_rows(plan: Plan, page_id: str, claim: Claim, series: dict[str, str],
                by_series: dict[tuple[str | None, str], list[RecordRow]]) -> dict[str, list[RecordRow]]:
    """run id -> the rows of the other artifact a cross-artifact claim compares, in that artifact's current series."""
    m = claim.measure
    page = next((p for p in plan.pages if (p.id or p.path) == page_id), None)
    if m is None or m.other is None or page is None:
        return {}
    other = plan.artifact_for(page, m.other)
    key = series.get(other.path) if other else None
    if other is None or key is None:
        return {}
    out: dict[str, list[RecordRow]] = {}
    for row in by_series.get((key, other.name), []):
        out.setdefault(row.run_id, []).append(row)
    return out


# ---------------------------------------------------------------- one run


def judge_over_runs(plan: Plan, results: list[ClaimResult], rows: list[RecordRow], series: dict[str, str],
                    run_id: str | None = None, n: int = RUNS, board: str | None = None) -> None:
    """Give every measured claim its series, and its verdict from the median of its last `n` runs; a claim whose
    variant was caught in a run of its series fails (kwiki.results.series: caught once, caught for the series).

    A claim a gate refused, or one with no figure this run, keeps this run's verdict. `board`: the GPU (UUID) this
    run measured on, so that each claim says how many boards its runs come from."""
    board = board or (plan.gpu.uuid if plan.gpu else None)
    claims = {(page.id or page.path, c.id): c for page in plan.pages if page.meta for c in page.meta.claims}
    by_series: dict[tuple[str | None, str], list[RecordRow]] = {}
    for row in rows:
        by_series.setdefault((row.series, row.artifact), []).append(row)
    for r in results:
        planned = plan.artifacts.get(r.artifact or "")
        key = series.get(r.artifact or "")
        claim = claims.get((r.page, r.claim))
        this = [run_id] if run_id else []  # the run that judged it: what its figure is traced to (kwiki.results.trace)
        if planned is None or key is None or claim is None or r.verdict not in MEASURED:
            r.run_ids = this if r.artifact and r.verdict not in NOT_MEASURED else []
            if r.verdict == Verdict.not_run:
                r.series = key  # not run: the page keeps its entry while that is of this series (writeback._kept)
            continue
        r.series, r.run_ids = key, this
        if r.gates:
            continue  # a refused figure: failed on this run alone, whatever the series says
        past = runs_of(by_series.get((key, planned.name), []), key, planned.name, run_id)
        if r.value is None:
            r.runs = min(n, 1 + len(past))  # an outcome (or a failed check): judged on this run alone
            continue
        other_rows = _other_rows(plan, r.page, claim, series, by_series)
        used = []  # (run id, value, board) of the past runs that hold the claim's figure
        for run in past:
            theirs = other_rows.get(run[0].run_id)
            v = claim_value(run, claim, theirs)
            if v is not None:
                used.append((run[0].run_id, v, run_board(run, claim, theirs)))
        used = used[-(n - 1):] if n > 1 else []
        values = [v for _, v, _ in used]
        r.run_ids = [rid for rid, _, _ in used] + this if this else []
        r.boards = boards_of([(b, v) for _, v, b in used] + [(board, r.value)])
        st = stats([*values, r.value])
        r.runs, r.median, r.band, r.range = st.runs, st.median, st.band, (st.low, st.high)
        r.verdict = judge(claim, st.median, st.band)
        r.drift = st.drift(r.value)
        if r.drift is not None:
            improved = r.drift > 0 if claim.direction == "higher" else r.drift < 0
            r.change = "faster" if improved else "slower"
        else:
            r.change = "new" if st.runs == 1 else "same"
        _taint(r, claim, past, other_rows, rows, key, planned.name)
        r.below_goal = shortfall(claim, r.verdict, r.median)


def _taint(r: ClaimResult, claim: Claim, past: list[list[RecordRow]], other_rows: dict[str, list[RecordRow]],
           rows: list[RecordRow], key: str, artifact: str) -> None:
    """Caught in a run of its series: the claim fails, saying where. Too few runs of a series that follows a
    caught one: the claim says so (it is provisional already)."""
    c = caught(past, claim, other_rows)
    if c is not None:
        r.verdict, r.detail = Verdict.failed, caught_text(c)
        return
    clean = 1 + len(past)
    if clean < RUNS:
        found = follows(older_series(rows, key, artifact), claim)
        if found is not None:
            r.detail = follows_text(found[0], found[1], clean)


def until_runs(plan: Plan, rows: list[RecordRow], series: dict[str, str], n: int) -> list[str]:
    """Leave out of the run every artifact whose series already has `n` runs; returns their names.

    Their claims end `not-run` (saying why) and their pages are not rewritten. An artifact whose figure a claim
    compares with one of an artifact that runs (a cross-artifact claim: NVFP4's GEMV against the bf16 GEMV) runs
    too: a claim compares records of one run, so left out, it would end `not-run` and keep a figure of earlier
    code."""
    counts = run_counts(rows)
    skipped = []
    for path, planned in sorted(plan.artifacts.items()):
        key = series.get(path)
        if key is None or planned.why_not_run or not planned.run_target:
            continue
        have = counts.get((key, planned.name), 0)
        if have >= n:
            planned.why_not_run = f"its series has {have} runs already (--until-runs {n})"
            skipped.append(planned.name)
    for planned in _partners(plan, skipped):
        planned.why_not_run = None
        skipped.remove(planned.name)
    needed = {a.build_name for a in plan.artifacts.values() if a.run_target and not a.why_not_run}
    plan.builds = [b for b in plan.builds if b.artifact not in skipped or b.artifact in needed]
    return skipped


def _partners(plan: Plan, skipped: list[str]) -> list[PlannedArtifact]:
    """The artifacts among `skipped` whose figures a claim of an artifact that runs compares, and so on (to a
    fixed point: a partner brought back may bring back its own)."""
    back: dict[str, PlannedArtifact] = {}
    changed = True
    while changed:
        changed = False
        for page, m in measures(plan):
            own = plan.artifact_for(page, m.artifact)
            if own is None or (own.why_not_run and own.name not in back):
                continue  # its own artifact does not run: the claim is left out whole
            read = [plan.artifact_for(page, m.key_of(sel)) for sel in m.selectors]
            for a in (a for a in read if a is not None):
                if a.name in skipped and a.name not in back:
                    back[a.name] = a
                    changed = True
    return list(back.values())
