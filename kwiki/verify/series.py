"""Verdicts over runs: the series a record or claim belongs to, and what its runs together say.

A series is every run of one artifact, on one GPU model, of the same code, under the same
measurement protocol. Its key is `<gpu model>/p<protocol>/<hash>`, the hash over the artifact's own
files (the manifest's sources, headers, build script and the scripts its run command names, the
headers those actually include, followed through `#include "..."`, and the build settings): editing a
shared header resets only the series of the artifacts that include it, and a new protocol
(kwiki.verify.record.PROTOCOL_VERSION) starts every series afresh. Every row of the results store
carries its series, so runs from every session, on every board of that model, count.

A claim is judged on the median of its figure over the last RUNS runs of its series (this run
included), with the run-to-run band as its noise: K x MAD x 1.4826 (a robust standard deviation),
never less than BAND_FLOOR of the median. Fewer than RUNS runs: the verdict is provisional (the claim
and its page are never shown as verified). The latest run drifted only when it lies outside median
+- band; the drift is reported with its size and direction.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kwiki.verify.build import COMMON_DIR, included_files
from kwiki.verify.claims import ClaimResult, judge, matches
from kwiki.verify.history import RecordRow, gpu_slug, read_store, store_path
from kwiki.verify.plan import Plan, PlannedArtifact
from kwiki.verify.record import PROTOCOL_VERSION
from kwiki.wiki.model import Claim, Selector
from kwiki.wiki.verdict import MEASURED, NOT_MEASURED, RUNS, Verdict

K = 3.0
MAD_SCALE = 1.4826  # MAD x this estimates the standard deviation of normal noise
BAND_FLOOR = 0.02  # runs move 2-10% from board to board: never call less than 2% a difference


# ---------------------------------------------------------------- the key


def series_key(planned: PlannedArtifact, gpu_name: str, root: Path) -> str | None:
    """`nvidia-h200/p1/3fa2c9d0e1b2`: the series of `planned` on this GPU model (None without a manifest)."""
    m = planned.manifest
    if m is None:
        return None
    builder = planned.binary_of or planned  # an artifact that runs another's binary: that build's files
    if builder.manifest is None:
        return None
    b = builder.manifest.build
    own = [builder.directory / f for f in [*b.sources, *b.headers, *filter(None, [b.script])]]
    directory = planned.directory
    own += [directory / part for part in m.run.command if "{" not in part and (directory / part).is_file()]
    if m.kind == "python":  # its module's helpers beside it, and the harness that checks and times it
        harness = ("kwiki_harness.py", "kwiki_bench.py")
        own += [*sorted(directory.glob("*.py")), *(root / COMMON_DIR / f for f in harness)]
    files = {*own, *included_files(own, [root / COMMON_DIR])}
    h = hashlib.sha256()
    h.update(json.dumps(b.model_dump(mode="json", exclude={"timeout_s"}), sort_keys=True).encode())
    for name, path in sorted((_name(p, root), p) for p in files):
        h.update(name.encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"<missing>")
    return f"{gpu_slug(gpu_name)}/p{PROTOCOL_VERSION}/{h.hexdigest()[:12]}"


def _name(path: Path, root: Path) -> str:
    """The file's name in the hash: relative to the root, so every checkout of the tree agrees."""
    resolved, base = path.resolve(), root.resolve()
    return resolved.relative_to(base).as_posix() if resolved.is_relative_to(base) else resolved.name


def gpu_name(plan: Plan) -> str:
    return plan.gpu.name if plan.gpu else "host"


def keys(plan: Plan) -> dict[str, str]:
    """artifact path -> series key, for every planned artifact with a manifest."""
    out = {}
    for path, planned in sorted(plan.artifacts.items()):
        key = series_key(planned, gpu_name(plan), plan.root)
        if key is not None:
            out[path] = key
    return out


def store_rows(plan: Plan) -> list[RecordRow]:
    """The record rows of this GPU model's store: the runs every series is read from."""
    rows, _ = read_store(store_path(plan.root, gpu_name(plan)))
    return [r for r in rows if isinstance(r, RecordRow)]


# ---------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Stats:
    runs: int
    median: float
    band: float  # relative to |median|
    low: float
    high: float

    def drift(self, latest: float) -> float | None:
        """The relative move of `latest` from the median when it lies outside the band, else None."""
        if self.runs < 2 or self.median == 0:
            return None
        rel = (latest - self.median) / abs(self.median)
        return rel if abs(rel) > self.band else None


def stats(values: list[float]) -> Stats:
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    band = max(K * MAD_SCALE * mad, BAND_FLOOR * abs(med))
    return Stats(len(values), med, band / abs(med) if med else BAND_FLOOR, min(values), max(values))


def drift_text(drift: float) -> str:
    """'+8.4% vs the series median'."""
    return f"{drift * 100:+.1f}% vs the series median"


# ---------------------------------------------------------------- past runs


def _runs(rows: Iterable[RecordRow], key: str, artifact: str, exclude: str | None) -> list[list[RecordRow]]:
    """The runs of one series, oldest first (by date, then by place in the store), each as its record rows."""
    by_run: dict[str, list[RecordRow]] = {}
    for row in rows:
        if row.series == key and row.artifact == artifact and row.run_id != exclude:
            by_run.setdefault(row.run_id, []).append(row)
    order = {run_id: n for n, run_id in enumerate(by_run)}  # appended in the order they ran
    return [by_run[run_id] for run_id in sorted(by_run, key=lambda rid: (max(r.date for r in by_run[rid]), order[rid]))]


def _row_figure(rows: list[RecordRow], sel: Selector) -> float | None:
    found = [r for r in rows if matches(r, sel)]
    if len(found) != 1 or not found[0].passed or found[0].gates:
        return None  # not measured then, failed its check, or refused by a gate: no value of the series
    return found[0].figures.get(sel.figure)


def claim_value(rows: list[RecordRow], claim: Claim, per_rows: list[RecordRow] | None = None) -> float | None:
    """The claim's figure in one past run, from its record rows (None where that run has none); `per_rows`:
    the same run's rows of the artifact `measure.per` names, when that is another artifact."""
    m = claim.measure
    if m is None:
        return None
    value = _row_figure(rows, m.of)
    if value is None or m.per is None:
        return value
    other = m.per.artifact not in (None, m.artifact)
    if other and per_rows is None:
        return None  # that run did not measure the other artifact (in its current series)
    per = _row_figure(per_rows if other and per_rows is not None else rows, m.per)
    return value / per if per else None


def _per_rows(plan: Plan, page_id: str, claim: Claim, series: dict[str, str],
              by_series: dict[tuple[str | None, str], list[RecordRow]]) -> dict[str, list[RecordRow]]:
    """run id -> the rows of the other artifact a claim's `per` names, in that artifact's current series."""
    m = claim.measure
    page = next((p for p in plan.pages if (p.id or p.path) == page_id), None)
    if m is None or m.per is None or m.per.artifact in (None, m.artifact) or page is None:
        return {}
    other = plan.artifact_for(page, m.per.artifact)
    key = series.get(other.path) if other else None
    if other is None or key is None:
        return {}
    out: dict[str, list[RecordRow]] = {}
    for row in by_series.get((key, other.name), []):
        out.setdefault(row.run_id, []).append(row)
    return out


def run_counts(rows: list[RecordRow]) -> dict[tuple[str, str], int]:
    """(series, artifact) -> the number of runs the store holds of it."""
    seen: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        if row.series:
            seen.setdefault((row.series, row.artifact), set()).add(row.run_id)
    return {k: len(v) for k, v in seen.items()}


# ---------------------------------------------------------------- one run


def judge_over_runs(plan: Plan, results: list[ClaimResult], rows: list[RecordRow], series: dict[str, str],
                    run_id: str | None = None, n: int = RUNS) -> None:
    """Give every measured claim its series, and its verdict from the median of its last `n` runs.

    A claim a gate refused, or one with no figure this run, keeps this run's verdict."""
    claims = {(page.id or page.path, c.id): c for page in plan.pages if page.meta for c in page.meta.claims}
    by_series: dict[tuple[str | None, str], list[RecordRow]] = {}
    for row in rows:
        by_series.setdefault((row.series, row.artifact), []).append(row)
    for r in results:
        planned = plan.artifacts.get(r.artifact or "")
        key = series.get(r.artifact or "")
        claim = claims.get((r.page, r.claim))
        this = [run_id] if run_id else []  # the run that judged it: what its figure is traced to (kwiki.verify.trace)
        if planned is None or key is None or claim is None or r.verdict not in MEASURED:
            r.run_ids = this if r.artifact and r.verdict not in NOT_MEASURED else []
            if r.verdict == Verdict.not_run:
                r.series = key  # not run: the page keeps its entry while that is of this series (writeback._kept)
            continue
        r.series, r.run_ids = key, this
        if r.gates:
            continue  # a refused figure: failed on this run alone, whatever the series says
        past = _runs(by_series.get((key, planned.name), []), key, planned.name, run_id)
        if r.value is None:
            r.runs = min(n, 1 + len(past))  # an outcome (or a failed check): judged on this run alone
            continue
        per_rows = _per_rows(plan, r.page, claim, series, by_series)
        used = [(run[0].run_id, v) for run, v in
                ((run, claim_value(run, claim, per_rows.get(run[0].run_id))) for run in past)
                if v is not None][-(n - 1):] if n > 1 else []
        values = [v for _, v in used]
        r.run_ids = [rid for rid, _ in used] + this if this else []
        st = stats([*values, r.value])
        r.runs, r.median, r.band, r.range = st.runs, st.median, st.band, (st.low, st.high)
        r.verdict = judge(claim, st.median, st.band)
        r.drift = st.drift(r.value)
        if r.drift is not None:
            improved = r.drift > 0 if claim.direction == "higher" else r.drift < 0
            r.change = "faster" if improved else "slower"
        else:
            r.change = "new" if st.runs == 1 else "same"


def until_runs(plan: Plan, rows: list[RecordRow], series: dict[str, str], n: int) -> list[str]:
    """Leave out of the run every artifact whose series already has `n` runs; returns their names.

    Their claims end `not-run` (saying why) and their pages are not rewritten."""
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
    needed = {a.build_name for a in plan.artifacts.values() if a.run_target and not a.why_not_run}
    plan.builds = [b for b in plan.builds if b.artifact not in skipped or b.artifact in needed]
    return skipped
