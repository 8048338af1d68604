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
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from kwiki.results.judge import matches
from kwiki.results.store import RecordRow
from kwiki.wiki.model import Claim, Selector

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


def row_figure(rows: list[RecordRow], sel: Selector) -> float | None:
    found = [r for r in rows if matches(r, sel)]
    if len(found) != 1 or not found[0].passed or found[0].gates:
        return None  # not measured then, failed its check, or refused by a gate: no value of the series
    return found[0].figures.get(sel.key)


def claim_value(rows: list[RecordRow], claim: Claim, per_rows: list[RecordRow] | None = None) -> float | None:
    """The claim's figure in one past run, from its record rows (None where that run has none); `per_rows`:
    the same run's rows of the artifact `measure.per` names, when that is another artifact."""
    m = claim.measure
    if m is None:
        return None
    value = row_figure(rows, m.of)
    if value is None or m.per is None:
        return value
    other = m.per.artifact not in (None, m.artifact)
    if other and per_rows is None:
        return None  # that run did not measure the other artifact (in its current series)
    per = row_figure(per_rows if other and per_rows is not None else rows, m.per)
    return value / per if per else None


def run_counts(rows: list[RecordRow]) -> dict[tuple[str, str], int]:
    """(series, artifact) -> the number of runs the store holds of it."""
    seen: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        if row.series:
            seen.setdefault((row.series, row.artifact), set()).add(row.run_id)
    return {k: len(v) for k, v in seen.items()}
