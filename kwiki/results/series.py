"""Verdicts over runs: the series a record or claim belongs to, and what its runs together say.

The statistics and the reading of past runs live here; the key of a series (over the artifact's files)
and the judging of a verify run's claims live in kwiki.verify.series.

A series is every run of one artifact, on one GPU model, of the same code, under the same
measurement protocol. Its key is `<gpu model>/p<protocol>/<hash>`, the hash over the artifact's own
files (the manifest's sources, headers, build script and the scripts its run command names, the
headers those actually include, followed through `#include "..."`, and the build settings): editing a
shared header resets only the series of the artifacts that include it, and a new protocol
(kwiki.results.record.PROTOCOL_VERSION) starts every series afresh. Every row of the results store
carries its series, so runs from every session, on every board of that model, count.

A claim is judged on the median of its figure over the last RUNS runs of its series (this run
included), with the run-to-run band as its noise: K x MAD x 1.4826 (a robust standard deviation),
never less than BAND_FLOOR of the median. Fewer than RUNS runs: the verdict is provisional (the claim
and its page are never shown as verified). The latest run drifted only when it lies outside median
+- band; the drift is reported with its size and direction.

Caught once, caught for the series: a variant a claim compares (its `of`, its `per`) that failed its check
(a failed re-check fails the record: protocol 2) or a gate that catches a cheat (TAINTING_GATES) in any
run of the series has no reproduced claim in that series, whatever its other runs say: the claim is
`failed`, and says in which run (`caught`). A code change starts a new series; while that series has
fewer than RUNS runs, and so through any number of edits, it follows the series before it
(`follows`): when one of those was caught, its claims say "follows series ..., which failed a re-check
in run ..." (and stay provisional) until the new series has RUNS clean runs of its own.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kwiki.results.judge import matches
from kwiki.results.store import RecordRow
from kwiki.wiki.model import Claim, Metric, Selector
from kwiki.wiki.verdict import RUNS

# gates that catch a kernel not doing its work (kwiki.verify.gates): a run they refuse taints its series.
# Not `clocks` (a throttled card, not the kernel) nor `roof` (a warning: the roof is wrong)
TAINTING_GATES = frozenset({"physical", "identity", "profile", "sanitize"})
K = 3.0
MAD_SCALE = 1.4826  # MAD x this estimates the standard deviation of normal noise
BAND_FLOOR = 0.02  # runs move 2-10% from board to board: never call less than 2% a difference


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


def runs_of(rows: Iterable[RecordRow], key: str, artifact: str, exclude: str | None) -> list[list[RecordRow]]:
    """The runs of one series, oldest first (by date, then by place in the store), each as its record rows."""
    by_run: dict[str, list[RecordRow]] = {}
    for row in rows:
        if row.series == key and row.artifact == artifact and row.run_id != exclude:
            by_run.setdefault(row.run_id, []).append(row)
    order = {run_id: n for n, run_id in enumerate(by_run)}  # appended in the order they ran
    return [by_run[run_id] for run_id in sorted(by_run, key=lambda rid: (max(r.date for r in by_run[rid]), order[rid]))]


def row_board(rows: list[RecordRow], sel: Selector) -> str | None:
    """The board (NVML's GPU UUID) the record `sel` names ran on in one run (None: not known or not measured)."""
    found = claimable(rows, sel)
    return found[0].gpu_uuid if len(found) == 1 else None


def run_board(rows: list[RecordRow], claim: Claim, other_rows: list[RecordRow] | None = None) -> str | None:
    """The board a claim's figure was measured on in one run: its `of` record's (in `other_rows`, the same run's
    rows of the other artifact, where `of` names that one)."""
    m = claim.measure
    if m is None:
        return None
    return row_board((other_rows or []) if m.elsewhere(m.of) else rows, m.of)


def claimable(rows: list[RecordRow], sel: Selector) -> list[RecordRow]:
    """The rows of one run that `sel` selects, as the run's own judge saw them (kwiki.verify.claims): the main
    process's, never the sweep's (a sweep runs the same variants at other sizes; a selector that names no size
    would otherwise find one record per size)."""
    return [r for r in rows if matches(r, sel) and not r.sweep]


def row_figure(rows: list[RecordRow], sel: Selector) -> float | None:
    found = claimable(rows, sel)
    if len(found) != 1 or not found[0].passed or found[0].gates:
        return None  # not measured then, failed its check, or refused by a gate: no value of the series
    return found[0].figures.get(sel.key)


def claim_value(rows: list[RecordRow], claim: Claim, other_rows: list[RecordRow] | None = None) -> float | None:
    """The claim's figure in one past run, from its record rows (None where that run has none); `other_rows`: the
    same run's rows of the other artifact a cross-artifact claim compares (`measure.other`, named by `of` or
    `per`)."""
    m = claim.measure
    if m is None:
        return None
    if m.other is not None and other_rows is None:
        return None  # that run did not measure the other artifact (in its current series)

    def rows_of(sel: Selector) -> list[RecordRow]:
        return (other_rows or []) if m.elsewhere(sel) else rows

    value = row_figure(rows_of(m.of), m.of)
    if value is None or m.per is None:
        return value
    per = row_figure(rows_of(m.per), m.per)
    a, b = row_board(rows_of(m.of), m.of), row_board(rows_of(m.per), m.per)
    if a is not None and b is not None and a != b:
        return None  # the records one claim compares come from one board in one run
    return value / per if per else None


def run_counts(rows: list[RecordRow]) -> dict[tuple[str, str], int]:
    """(series, artifact) -> the number of runs the store holds of it."""
    seen: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        if row.series:
            seen.setdefault((row.series, row.artifact), set()).add(row.run_id)
    return {k: len(v) for k, v in seen.items()}


# ---------------------------------------------------------------- boards


def boards_of(values: list[tuple[str | None, float]]) -> list[tuple[str, int, float]]:
    """(board, value) per run -> (board, runs, median) of each board behind them, by board ('unknown' where a run
    named none). MeasuredClaim.board_spread says how far apart their medians are."""
    if all(board is None for board, _ in values):
        return []  # no run named its board (a host-only run): nothing to say
    by: dict[str, list[float]] = {}
    for board, value in values:
        by.setdefault(board or "unknown", []).append(value)
    return [(b, len(v), statistics.median(v)) for b, v in sorted(by.items())]


# ---------------------------------------------------------------- caught once, caught for the series


@dataclass(frozen=True)
class Caught:
    """A run in which a variant a claim compares failed its check, a re-check or a tainting gate."""

    run_id: str
    variant: str
    why: str  # 'failed its check or a re-check', 'failed gate physical'

    def text(self) -> str:
        return f"variant {self.variant} {self.why} in run {self.run_id}"


def _selectors(claim: Claim) -> list[tuple[Selector, bool]]:
    """(selector, of another artifact) for each figure the claim compares; none for an outcome claim (it
    expects its check to fail, or to pass, and is judged on each run alone)."""
    m = claim.measure
    if m is None or claim.metric == Metric.outcome:
        return []
    return [(sel, m.elsewhere(sel)) for sel in m.selectors]


def _caught_in(rows: list[RecordRow], sel: Selector) -> str | None:
    for row in rows:
        if not matches(row, sel):
            continue
        if not row.passed:
            return "failed its check or a re-check"
        names = sorted({g.name for g in row.gates or []} & TAINTING_GATES)
        if names:
            return f"failed gate {', '.join(names)}"
    return None


def caught(runs: list[list[RecordRow]], claim: Claim,
           other_rows: Mapping[str, list[RecordRow]] | None = None) -> Caught | None:
    """The latest of `runs` (one series, oldest first) in which a variant `claim` compares was caught; `other_rows`:
    run id -> the same run's rows of the other artifact a cross-artifact claim compares."""
    for run in reversed(runs):
        for sel, other in _selectors(claim):
            rows = (other_rows or {}).get(run[0].run_id, []) if other else run
            why = _caught_in(rows, sel)
            if why is not None:
                return Caught(run[0].run_id, sel.variant, why)
    return None


def caught_text(c: Caught) -> str:
    return f"caught once, caught for the series: {c.text()}"


def follows(older: list[tuple[str, list[list[RecordRow]]]], claim: Claim) -> tuple[str, Caught] | None:
    """(series, where it was caught) of the tainted series a new series follows, or None. `older`: the earlier
    series of the same artifact, newest first, each with its runs; a series with RUNS runs and clean ends the
    walk (the code it follows was shown clean), one caught ends it with that series."""
    for key, runs in older:
        c = caught(runs, claim)
        if c is not None:
            return key, c
        if len(runs) >= RUNS:
            return None
    return None


def follows_text(key: str, c: Caught, runs: int) -> str:
    """'follows series X, which failed a re-check in run R (variant V ...); 1 of 3 clean runs'."""
    return (f"follows series {key}, which failed a re-check in run {c.run_id} (variant {c.variant} {c.why}); "
            f"{runs} of {RUNS} clean runs of its own")


def older_series(rows: Iterable[RecordRow], key: str, artifact: str) -> list[tuple[str, list[list[RecordRow]]]]:
    """The other series of `artifact` in `rows` on the same GPU model (under any protocol: a new protocol launders
    nothing either), newest first (by their latest run), each with its runs oldest first."""
    prefix = key.split("/", 1)[0] + "/"
    mine = [r for r in rows if r.artifact == artifact and r.series and r.series != key
            and r.series.startswith(prefix)]
    keys = {r.series for r in mine if r.series}
    latest = {k: max(r.date for r in mine if r.series == k) for k in keys}
    return [(k, runs_of(mine, k, artifact, None)) for k in sorted(keys, key=lambda k: latest[k], reverse=True)]
