"""The results store: every measured figure, appended to `results/<gpu-model>.jsonl` (committed).

One line per record of a run (`kind: "record"`) and one per claim verdict (`kind: "claim"`).
Each row names its series (kwiki.results.series): claims are judged over the runs of their series,
and `kwiki verify` compares each record's time with the last run on the same GPU model. The rows a
run appends are made by kwiki.verify.history; this module reads and appends them.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from kwiki.core.errors import EnvironmentProblem, Problem
from kwiki.core.strict import Scalar
from kwiki.results.mechanism import MechanismEvidence
from kwiki.results.storelines import (
    COMMIT,
    COMMITTED_FROM,
    RESULTS_DIR,
    committed,
    display_path,
    needs_commit,
    read_text,
    unreadable,
)
from kwiki.wiki.model import Gate, Provenance

STORE_VERSION = 2  # 2: each run's rows are followed by a commit line that counts them


class Row(Provenance):
    """Fields shared by every line of the store: a measurement's provenance, the run, the artifact."""

    store_version: int = STORE_VERSION
    kind: Literal["record", "claim"]
    run_id: str  # one verify run: '<date>T<time>Z-<random hex>-<short commit>'
    artifact: str
    series: str | None = None  # kwiki.results.series key; rows written before series have none
    gates: list[Gate] | None = None  # gates the record (or the claim's figure) failed


class RecordRow(Row):
    kind: Literal["record"] = "record"
    target: str
    variant: str
    params: dict[str, Scalar] = Field(default_factory=dict)
    figures: dict[str, float] = Field(default_factory=dict)
    spread: float | None = None
    samples: int | None = None
    passed: bool
    registers: int | None = None
    protocol: int | None = None  # kwiki.results.record.PROTOCOL_VERSION of the run
    bytes_level: str | None = None  # where the record's bytes were moved, when not DRAM
    # the variant's SASS check on the binary that ran (kwiki.verify.sass): on the run's first record of the variant
    # and target only, as one binary ran them all (kwiki.results.summary)
    mechanism: MechanismEvidence | None = None
    summary_of: int | None = None  # a summary row: the runs it stands for (kwiki.results.summary), not a run
    sweep: bool | None = None  # True: measured by the sweep's own process (a curve's point; claims never read it)


class ClaimRow(Row):
    kind: Literal["claim"] = "claim"
    page: str
    claim: str
    value: float | None = None
    unit: str | None = None
    spread: float | None = None
    verdict: str
    change: str | None = None
    runs: int | None = None  # runs of the series the verdict stood on
    median: float | None = None  # the median figure over those runs (`value` is this run's)


def gpu_slug(gpu: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200': the store file of that GPU model."""
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "unknown-gpu"


def store_path(root: Path, gpu: str) -> Path:
    return root / RESULTS_DIR / f"{gpu_slug(gpu)}.jsonl"


def read_store(path: Path, *, warn: bool = True,
               summaries: bool = False) -> tuple[list[RecordRow | ClaimRow], list[Problem]]:
    """All valid rows of one store file that a commit line counts (or that need none: store version 1), and a
    warning for each line that is not one and for rows no commit line counts (an append that did not finish).
    Rows that summarise older runs (kwiki.results.summary) are not runs: left out unless `summaries`.

    With `warn`, each such warning is also logged, so that `verify` and `build`, which skip the
    line, say so (`kwiki check` lists them through kwiki.results.storelines).
    """
    rows: list[RecordRow | ClaimRow] = []
    problems: list[Problem] = []
    if not os.path.lexists(path):
        return rows, problems
    try:
        text = read_text(path)
    except OSError as exc:
        text = ""
        problems.append(Problem(display_path(path), 0, "results", f"cannot read the file ({exc.strerror or exc})"))
    for lineno, data, problem in committed(path, text):
        if data is not None:
            try:
                row = (ClaimRow if data["kind"] == "claim" else RecordRow).model_validate(data)
                if summaries or not isinstance(row, RecordRow) or row.summary_of is None:
                    rows.append(row)
            except ValidationError as exc:
                err = exc.errors(include_url=False)[0]
                where = ".".join(str(part) for part in err["loc"])
                problem = unreadable(path, lineno, f"{where}: {err['msg']}" if where else err["msg"])
        if problem is not None:
            problems.append(problem)
    if warn:
        import logging

        log = logging.getLogger(__name__)
        for problem in problems:
            if problem not in _warned:  # a run reads the store more than once: say it once
                _warned.add(problem)
                log.warning("kwiki: %s", problem.format())
    return rows, problems


_warned: set[Problem] = set()  # the store lines read_store has warned about in this process


def read_all(root: Path) -> list[RecordRow | ClaimRow]:
    rows: list[RecordRow | ClaimRow] = []
    directory = root / RESULTS_DIR
    if directory.is_dir():
        for path in sorted(directory.glob("*.jsonl")):
            rows.extend(read_store(path)[0])
    return rows


# ---------------------------------------------------------------- appending


def line_of(data: Mapping[str, object]) -> bytes:
    """A line of the store: JSON with sorted keys and no spaces (lines written before 2026-12-04 have a space after
    each separator; readers parse either)."""
    return (json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")


def row_line(row: Row) -> bytes:
    """One row as its line of the store (sorted keys, no nulls)."""
    return line_of(row.model_dump(mode="json", exclude_none=True))


def commit_line(rows: int, run_ids: Iterable[str]) -> bytes:
    """The line that commits the `rows` rows written just before it (store version 2): readers use them from then on.
    It names their run when they are of one run."""
    runs = sorted(set(run_ids))
    data: dict[str, object] = {"kind": COMMIT, "rows": rows, "store_version": STORE_VERSION}
    if len(runs) == 1:
        data["run_id"] = runs[0]
    return line_of(data)


def append_rows(path: Path, rows: Sequence[Row]) -> None:
    """Append `rows` (one run's) to a store file, then the commit line that counts them.

    The cost is the run's rows, not the store's: the file is opened for appending, never read whole. Under a lock
    on the store file, concurrent runs never lose each other's rows. Rows a killed writer left without their
    commit line are cut off first (readers skip them anyway). The rows and their commit line are on disk (fsync)
    before this returns; after a power cut that kept the commit line but lost some of the rows, the commit
    line counts more rows than precede it, and readers take none of them.
    """
    from kwiki.core.lock import hold_replaced

    if not rows:
        return
    rows = [r if r.store_version >= COMMITTED_FROM else r.model_copy(update={"store_version": STORE_VERSION})
            for r in rows]
    block = b"".join(row_line(r) for r in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with hold_replaced(path):
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or a device: never a store
                raise EnvironmentProblem(f"{display_path(path)}: not a regular file; kwiki appends a run only to a "
                                         "regular store file (remove it)")
            end = finished_end(fd)
            if end < os.fstat(fd).st_size:
                os.ftruncate(fd, end)
            if end and os.pread(fd, 1, end - 1) != b"\n":  # a last line without its newline (a hand edit)
                block = b"\n" + block
            _write_all(fd, block, end)
            # a second write: a writer killed before it leaves rows no commit line counts, which readers skip
            _write_all(fd, commit_line(len(rows), (r.run_id for r in rows)), end + len(block))
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


TAIL_CHUNK = 1 << 16


def finished_end(fd: int) -> int:
    """The offset just past the last line of the store that is not part of an unfinished append: the rows of store
    version 2 after the last commit line, and a last line cut short, are not. Reads the file backwards from its
    end, so the cost is that unfinished tail, not the store."""
    size = os.fstat(fd).st_size
    pos, buf = size, b""
    while True:
        start = max(0, pos - TAIL_CHUNK)
        buf = os.pread(fd, pos - start, start) + buf
        pos = start
        lines = buf.split(b"\n")
        # lines[0] may be cut at `pos` (unless pos is 0); the last element is what follows the last newline
        end = size
        if lines[-1]:  # cut short: a writer killed mid-line
            end -= len(lines[-1])
        for line in reversed(lines[1:-1] if pos else lines[:-1]):
            if not _unfinished_row(line):
                return end
            end -= len(line) + 1
        if pos == 0:
            return end


def _unfinished_row(line: bytes) -> bool:
    """A line that is a row of store version 2 (which only a later commit line would count)."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and needs_commit(data)


# ---------------------------------------------------------------- migrations

# Page ids renamed to the `<type>-<slug>` convention (issue 29): the claim rows written under the old ids.
RENAMED_PAGES = {
    "algo-warp-specialization": "algorithm-warp-specialization",
    "algo-warp-specialization-pitfalls": "pitfalls-warp-specialization",
    "gemm-aligned": "kernel-gemm-aligned",
    "persistent-kernel": "technique-persistent-kernel",
    "tma-ptx": "skill-tma-ptx",
    "wgmma-ptx": "skill-wgmma-ptx",
}


def rename_pages(path: Path, renames: Mapping[str, str]) -> int:
    """Rewrite, in place, the `page` of each claim row of one store file that `renames` maps to a new id; return
    how many rows changed. A one-time migration for renamed pages, so their measurements still trace.

    Only the page value of those rows changes; every other byte of the file stays (rows, their order, commit
    lines, lines that are not rows), so the commit lines still count the same rows. Written whole under the
    store's lock, atomically: a crash leaves the old file or the new one.
    """
    from kwiki.core.lock import hold_replaced
    from kwiki.core.writefile import write_atomic

    if not path.exists():
        return 0
    with hold_replaced(path):
        lines = path.read_bytes().split(b"\n")
        changed = 0
        for i, line in enumerate(lines):
            try:
                data = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not (isinstance(data, dict) and data.get("kind") == "claim" and isinstance(data.get("page"), str)
                    and data["page"] in renames):
                continue
            for sep in (": ", ":"):  # '"page": "<id>"' or '"page":"<id>"', as rows were and are written
                old = json.dumps({"page": data["page"]}, separators=(",", sep))[1:-1].encode("utf-8")
                new = json.dumps({"page": renames[data["page"]]}, separators=(",", sep))[1:-1].encode("utf-8")
                if line.count(old) == 1:  # else not a row as kwiki writes it: leave it, never guess
                    lines[i] = line.replace(old, new)
                    changed += 1
                    break
        if changed:
            write_atomic(path, b"\n".join(lines))
    return changed


def last_records(rows: Sequence[RecordRow | ClaimRow]) -> dict[tuple[str, str, str], RecordRow]:
    """The latest passing row of each (artifact, variant, params)."""
    out: dict[tuple[str, str, str], RecordRow] = {}
    for row in rows:
        if isinstance(row, RecordRow) and row.passed and "time_us" in row.figures:
            out[(row.artifact, row.variant, json.dumps(row.params, sort_keys=True))] = row
    return out


def change(new: float, new_spread: float | None, old: float, old_spread: float | None, direction: str) -> str:
    """same, faster, slower or ambiguous, judged against both runs' own spread.

    `direction` says which way is an improvement ('higher' or 'lower'); 'faster' means the figure
    moved that way by more than the noise.
    """
    if old == 0:
        return "ambiguous"
    rel = (new - old) / abs(old)
    noise = max(((new_spread or 0.0) ** 2 + (old_spread or 0.0) ** 2) ** 0.5, 0.005)
    if abs(rel) <= noise:
        return "same"
    if abs(rel) <= 2 * noise:
        return "ambiguous"
    improved = rel > 0 if direction == "higher" else rel < 0
    return "faster" if improved else "slower"
