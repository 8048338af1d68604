"""The results store's size bound: runs nothing can use any more are summarised, so a GPU model's file stays small.

The rule. A store file that has grown past SUMMARISE_AT (16 MB) after a run is summarised once, under its lock, to
stay under BOUND (20 MB). A run of an artifact is kept whole when it is one of the last KEEP (3, the runs a verdict
stands on) runs of a series a verdict can read on its target: the artifact's current series (kwiki.results.series:
the series of its newest run; rows written before series count as one series per artifact) and, while that has fewer
than KEEP runs, the series before it, newest first, up to the first with KEEP runs (a new series follows them: a
taint in them is its taint); or when a page's measurements block names it (its figures must trace:
kwiki.results.trace); or when a record of it failed its check or a tainting gate (caught once, caught for the
series: the catch must stay a run). The record rows of every other run, which is to say the older runs of those
series and every run of a series no verdict reads any more, are summarised: one row per series, artifact, target,
variant and parameters stands for them, with the median of each figure over the runs whose record passed and no gate
refused (passed: whether any did), the newest run's provenance (its date, its artifact hash where every summarised
run had the same one), `summary_of`: how many runs it stands for, and the run id `summary:<artifact>:<series>`. A
summary row is never a run: no verdict, ladder or trace reads it as one. Summarising again folds the older summary
in, its figures weighted by the runs it stands for. Claim rows are kept: they are small, and they draw each claim's
history. A variant's mechanism evidence (its SASS check on the binary that ran, kwiki.results.mechanism) is the same
on every record of a run, and the tuned rungs' lists every kernel of the binary: it stays on the first record of
each artifact, target and variant of a run (as `kwiki verify` writes it, kwiki.verify.history) and leaves the run's
other rows and every summary row (it was a third of the H200's store, 2026-12-04). The file stays under BOUND as
long as its claim rows, the runs kept whole above fit in it; past that, kwiki says so. (Until 2026-12-05 the last
KEEP runs of every series were kept, those no verdict reads too: the H200's store then passed BOUND.)
"""

from __future__ import annotations

import json
import logging
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kwiki.results.store import STORE_VERSION, RecordRow, commit_line, line_of, row_line
from kwiki.results.storelines import committed, needs_commit
from kwiki.wiki.verdict import RUNS

SUMMARISE_AT = 16 * 1024 * 1024
BOUND = 20 * 1024 * 1024
KEEP = RUNS
SUMMARY = "summary:"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Summarised:
    """What summarising one store file did."""

    bytes_before: int
    bytes_after: int
    runs: int  # runs whose record rows a summary row now stands for
    rows: int  # summary rows written


def is_summary(row: RecordRow) -> bool:
    return row.summary_of is not None


def evidence_key(data: dict[str, Any]) -> tuple[Any, ...]:
    """The rows of a run that share one mechanism evidence: its artifact, target and variant."""
    return data.get("run_id"), data.get("artifact"), data.get("target"), data.get("variant")


def without_evidence(data: dict[str, Any]) -> dict[str, Any]:
    """A store row less its mechanism evidence."""
    return {k: v for k, v in data.items() if k != "mechanism"}


def identity(data: dict[str, Any]) -> str:
    """What identifies a store line across summarising: the row less its mechanism evidence, which summarising
    keeps on a run's first row of each variant only."""
    return json.dumps(without_evidence(data), sort_keys=True)


def cited_runs(root: Path) -> set[str]:
    """Every run id a page's measurements block names (what trace must find whole in the store)."""
    from kwiki.wiki.catalog import load_wiki

    out: set[str] = set()
    for page in load_wiki(root).pages:
        m = page.meta.measurements if page.meta else None
        if m is not None:
            out.update(run_id for mc in m.claims.values() for run_id in mc.run_ids or [])
    return out


def summarise_if_large(path: Path, root: Path, *, also: Iterable[str] = (), at: int = SUMMARISE_AT,
                       bound: int = BOUND) -> Summarised | None:
    """Summarise `path` when it is larger than `at` (None when it is not), keeping whole the runs the pages name and
    `also` (the runs a run being written back is about to name)."""
    if not path.exists() or path.stat().st_size <= at:
        return None
    done = summarise(path, cited_runs(root) | set(also))
    if done.bytes_after > bound:
        log.warning("kwiki: %s: %d bytes after summarising, more than the %d bytes a store file should hold: its "
                    "claim rows, the last %d runs of the series verdicts read, the caught runs and the runs the pages "
                    "name need that much",
                    path.name, done.bytes_after, bound, KEEP)
    return done


def summarise(path: Path, cited: set[str], *, keep: int = KEEP) -> Summarised:
    """Summarise the runs of `path` that neither one of the last `keep` runs of their series nor `cited` keeps
    whole (the rule above); rewritten whole, atomically, under the store's lock. Kept rows keep their content, in
    the store's line form (kwiki.results.store.line_of), but for the mechanism evidence a row of the same run and
    variant before it already carries; lines no reader could use are left out (`kwiki check` reported them)."""
    from kwiki.core.lock import hold_replaced
    from kwiki.core.writefile import write_atomic

    with hold_replaced(path):
        raw = path.read_bytes()
        text = raw.decode("utf-8", errors="replace")
        entries = [(n, data) for n, data, _ in committed(path, text) if data is not None]
        records = {n: RecordRow.model_validate(d) for n, d in entries if d["kind"] == "record"}
        gone = _summarised_runs(records.values(), cited, keep)
        folded = {n: r for n, r in records.items() if (r.artifact, r.run_id) in gone or is_summary(r)}
        summaries = _summaries(folded.values())
        out = _Writer()
        evidenced: set[tuple[Any, ...]] = set()  # runs and variants whose first row carried its evidence
        for n, data in entries:
            row = folded.get(n)
            if row is None:
                if data.get("mechanism") is not None and evidence_key(data) in evidenced:
                    data = without_evidence(data)
                elif data.get("mechanism") is not None:
                    evidenced.add(evidence_key(data))
                out.line(data)
            elif (row.artifact, row.series) in summaries:  # a group's summary where its first summarised row stood
                out.block(summaries.pop((row.artifact, row.series)))
        data_out = out.close()
        write_atomic(path, data_out)
    return Summarised(len(raw), len(data_out), len(gone), len({(r.artifact, r.series, r.target, r.variant,
                                                                _key(r.params)) for r in folded.values()}))


class _Writer:
    """The rewritten file: the kept rows, a commit line after each stretch of rows that need one."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.open: list[str] = []  # run ids of the rows since the last commit line that need one

    def line(self, data: dict[str, Any]) -> None:
        if not needs_commit(data):
            self._commit()
        self.parts.append(line_of(data))
        if needs_commit(data):
            self.open.append(str(data.get("run_id")))

    def block(self, rows: list[RecordRow]) -> None:
        self._commit()
        self.parts += [row_line(r) for r in rows]
        self.open += [r.run_id for r in rows]
        self._commit()

    def _commit(self) -> None:
        if self.open:
            self.parts.append(commit_line(len(self.open), set(self.open)))
            self.open = []

    def close(self) -> bytes:
        self._commit()
        return b"".join(self.parts)


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


def _summarised_runs(rows: Iterable[RecordRow], cited: set[str], keep: int) -> set[tuple[str, str]]:
    """(artifact, run id) of every run the rule summarises."""
    from kwiki.results.series import TAINTING_GATES

    runs: dict[tuple[str, str | None], dict[str, str]] = {}  # (artifact, series) -> run id -> its newest date
    newest: dict[tuple[str, str], dict[str | None, tuple[str, int]]] = {}  # (artifact, target) -> series -> newest
    caught: set[str] = set()  # runs in which a record failed its check or a tainting gate (kwiki.results.series)
    for n, row in enumerate(rows):
        if is_summary(row):
            continue
        group = runs.setdefault((row.artifact, row.series), {})
        group[row.run_id] = max(group.get(row.run_id, row.date), row.date)
        series = newest.setdefault((row.artifact, row.target), {})
        series[row.series] = max(series.get(row.series, (row.date, n)), (row.date, n))
        if not row.passed or {g.name for g in row.gates or []} & TAINTING_GATES:
            caught.add(row.run_id)
    # The series a verdict can read: the current one (its newest run is the artifact's newest), and while it has
    # fewer than `keep` runs the ones before it, newest first, up to the first with `keep` runs: a new series
    # follows them (kwiki.results.series.follows), so their runs must stay runs
    read: set[tuple[str, str | None]] = set()
    for (artifact, _), series in newest.items():
        for key in sorted(series, key=lambda k: series[k], reverse=True):
            read.add((artifact, key))
            if len(runs[(artifact, key)]) >= keep:
                break
    out: set[tuple[str, str]] = set()
    for (artifact, series_key), dates in runs.items():
        order = {run_id: n for n, run_id in enumerate(dates)}  # the order they were appended in
        oldest_first = sorted(dates, key=lambda rid: (dates[rid], order[rid]))
        kept = keep if (artifact, series_key) in read else 0  # a series no verdict reads keeps what pages name
        out |= {(artifact, rid) for rid in oldest_first[:max(0, len(oldest_first) - kept)]
                if rid not in cited and rid not in caught}
    return out


def _summaries(rows: Iterable[RecordRow]) -> dict[tuple[str, str | None], list[RecordRow]]:
    """(artifact, series) -> one summary row per target, variant and parameters of the rows given (record rows of
    summarised runs, and older summary rows, which count as many runs as they stand for)."""
    groups: dict[tuple[str, str | None], dict[tuple[str, str, str], list[RecordRow]]] = {}
    for row in rows:
        groups.setdefault((row.artifact, row.series), {}).setdefault(
            (row.target, row.variant, _key(row.params)), []).append(row)
    return {group: [_summary(same) for _, same in sorted(shapes.items())] for group, shapes in groups.items()}


def _summary(rows: list[RecordRow]) -> RecordRow:
    """One row standing for `rows` (one target, variant and parameters of one series)."""
    newest = max(rows, key=lambda r: r.date)
    weight = {id(r): r.summary_of or 1 for r in rows}
    good = [r for r in rows if r.passed and not r.gates]
    figures: dict[str, float] = {}
    for name in sorted({k for r in good for k in r.figures}):
        values = [v for r in good if (v := r.figures.get(name)) is not None for _ in range(weight[id(r)])]
        figures[name] = float(statistics.median(values))
    hashes = {r.artifact_hash for r in rows}
    return newest.model_copy(update={
        "run_id": f"{SUMMARY}{newest.artifact}:{newest.series or 'none'}", "figures": figures, "spread": None,
        "samples": None, "passed": bool(good), "gates": None, "store_version": STORE_VERSION, "mechanism": None,
        "artifact_hash": hashes.pop() if len(hashes) == 1 else None, "summary_of": sum(weight.values())})
