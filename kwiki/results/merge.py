"""`kwiki results merge`: another lab's results store in, beside ours, never into it.

Merged rows keep their origin: a lab's rows go to `results/merged/<origin>/<gpu-model>.jsonl`, one commit line per
run, as `kwiki verify` appends them. Nothing that judges a claim reads that folder (series, verdicts, traces and the
pages' measurements read `results/*.jsonl` only), so a merge never changes a verdict computed from local runs; the
site's per-GPU-model matrix (kwiki.results.matrix) shows merged figures, each with its origin. A merge is all or
nothing: a row of a newer or older store format, a run id that is already here with other rows, and two rows that
say different things about the same measurement are each a located error, and nothing is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kwiki.core.errors import KwikiError, Problem
from kwiki.results.store import STORE_VERSION, ClaimRow, RecordRow, append_rows, gpu_slug, row_line
from kwiki.results.storelines import COMMITTED_FROM, RESULTS_DIR, committed
from kwiki.results.summary import Summarised, summarise_if_large

MERGED = "merged"  # results/merged/<origin>/<gpu-model>.jsonl
LOCAL = "local"  # the origin of the rows of results/*.jsonl
ORIGIN = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")


class MergeError(KwikiError):
    """A merge found rows it cannot take; it wrote nothing."""

    exit_code = 1

    def __init__(self, problems: list[Problem]):
        super().__init__(f"{len(problems)} problem{'s' * (len(problems) != 1)}; nothing merged")
        self.problems = problems


@dataclass
class Merged:
    """What one merge did: rows added per store file, rows that were here already, runs added, files summarised."""

    origin: str
    added: dict[str, int] = field(default_factory=dict)  # results/merged/<origin>/<file> -> rows
    already: int = 0
    runs: list[str] = field(default_factory=list)
    summarised: dict[str, Summarised] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"origin": self.origin, "added": self.added, "already_here": self.already, "runs": self.runs,
                "summarised": {k: vars(v) for k, v in self.summarised.items()}}


Row = RecordRow | ClaimRow


def merged_dir(root: Path, origin: str) -> Path:
    return root / RESULTS_DIR / MERGED / origin


def origins(root: Path) -> list[str]:
    """The origins merged into this repository, by name."""
    base = root / RESULTS_DIR / MERGED
    return sorted(p.name for p in base.iterdir() if p.is_dir() and ORIGIN.fullmatch(p.name)) if base.is_dir() else []


def stores(root: Path) -> list[tuple[str, Path]]:
    """(origin, store file) of every store file here: ours (origin 'local') first, then each merged origin's."""
    local = sorted((root / RESULTS_DIR).glob("*.jsonl")) if (root / RESULTS_DIR).is_dir() else []
    merged = [(o, p) for o in origins(root) for p in sorted(merged_dir(root, o).glob("*.jsonl"))]
    return [(LOCAL, p) for p in local] + merged


def _key(row: Row) -> tuple[Any, ...]:
    """What a row is about: two rows with one key and different contents contradict each other."""
    if isinstance(row, ClaimRow):
        return ("claim", row.run_id, row.page, row.claim)
    return ("record", row.run_id, row.artifact, row.target, row.variant, tuple(sorted(row.params.items())))


def _shown(path: Path) -> str:
    return str(path)


def read_incoming(path: Path) -> tuple[list[tuple[int, Row]], list[Problem]]:
    """The committed rows of a store file to merge, each with its line, and a located error for each line that is
    not one, is of another store format, or no commit line counts."""
    where = _shown(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [], [Problem(where, 0, "results", f"cannot read it ({getattr(exc, 'strerror', None) or exc})")]
    rows: list[tuple[int, Row]] = []
    problems: list[Problem] = []
    for lineno, data, problem in committed(path, text):
        if problem is not None:
            message = problem.message.replace("skipped by kwiki verify and kwiki build", "not merged")
            problems.append(Problem(where, problem.line, problem.field,
                                    message.replace("skipped by every reader; the next append removes them",
                                                    "not merged")))
            continue
        assert data is not None
        version = data.get("store_version", 1)
        if not isinstance(version, int) or version > STORE_VERSION:
            problems.append(Problem(where, lineno, "store_version", f"{version!r} is a newer store format than this "
                                    f"kwiki reads ({STORE_VERSION}); merge with a kwiki that reads it"))
            continue
        if version < COMMITTED_FROM:
            problems.append(Problem(where, lineno, "store_version", f"{version} is an older store format (rows "
                                    "without commit lines: a merge cannot tell a finished run from a cut one); "
                                    "merge a store written by a kwiki of store version "
                                    f"{COMMITTED_FROM} or later"))
            continue
        try:
            rows.append((lineno, (ClaimRow if data["kind"] == "claim" else RecordRow).model_validate(data)))
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            problems.append(Problem(where, lineno, ".".join(str(p) for p in err["loc"]) or "results", err["msg"]))
    return rows, problems


def merge(root: Path, origin: str, paths: Iterable[Path]) -> Merged:
    """Merge the store files `paths` (another lab's `results/*.jsonl`) as `origin`; raise MergeError, having written
    nothing, when any row cannot be taken."""
    if not ORIGIN.fullmatch(origin) or origin == LOCAL:
        raise KwikiError(f"--origin {origin!r}: a name of lower-case letters, digits and '-' (at most 40), not "
                         f"{LOCAL!r}")
    here, runs_here = _here(root)
    problems: list[Problem] = []
    taken: dict[tuple[Any, ...], tuple[str, int, bytes]] = {}
    run_file: dict[str, tuple[str, int]] = {}
    new: dict[str, list[Row]] = {}  # run id -> its new rows, in file order
    reported: set[tuple[str, str]] = set()  # (file, run id) whose run id was found a duplicate: said once
    done = Merged(origin)
    for path in paths:
        incoming, bad = read_incoming(path)
        problems += bad
        where = _shown(path)
        for lineno, row in incoming:
            line = row_line(row)
            if line in here:
                done.already += 1
                continue
            if (where, row.run_id) in reported:
                continue
            if row.run_id in runs_here:
                reported.add((where, row.run_id))
                problems.append(Problem(where, lineno, "run_id", f"duplicate run id: run {row.run_id} is already in "
                                        f"{runs_here[row.run_id]} with other rows; a run id names one run"))
                continue
            first = run_file.setdefault(row.run_id, (where, lineno))
            if first[0] != where:
                reported.add((where, row.run_id))
                problems.append(Problem(where, lineno, "run_id", f"duplicate run id: run {row.run_id} is also in "
                                        f"{first[0]}:{first[1]}; a run is on one GPU, in one store file"))
                continue
            key = _key(row)
            seen = taken.get(key)
            if seen is not None and seen[2] != line:
                problems.append(Problem(where, lineno, row.kind, f"conflicting rows: line {seen[1]} says otherwise "
                                        f"about {_about(row)} of run {row.run_id}"))
                continue
            if seen is None:
                taken[key] = (where, lineno, line)
                new.setdefault(row.run_id, []).append(row)
    if problems:
        raise MergeError(problems)
    _write(root, origin, new, done)
    return done


def _here(root: Path) -> tuple[set[bytes], dict[str, str]]:
    """Every row line already here (ours and every merged origin's), and each run id's store file."""
    here: set[bytes] = set()
    runs_here: dict[str, str] = {}
    for _, store in stores(root):
        rows_here, _ = _read_here(store)
        for row in rows_here:
            here.add(row_line(row))
            runs_here.setdefault(row.run_id, f"{RESULTS_DIR}/{store.relative_to(root / RESULTS_DIR).as_posix()}")
    return here, runs_here


def _write(root: Path, origin: str, new: dict[str, list[Row]], done: Merged) -> None:
    """Append each new run to its origin's store file of its GPU model (its rows, then its commit line), then hold
    each file touched to the store's size bound."""
    for run_id in sorted(new):
        rows = new[run_id]
        target = merged_dir(root, origin) / f"{gpu_slug(rows[0].gpu)}.jsonl"
        append_rows(target, rows)
        rel = f"{RESULTS_DIR}/{MERGED}/{origin}/{target.name}"
        done.added[rel] = done.added.get(rel, 0) + len(rows)
        done.runs.append(run_id)
    for rel in sorted(done.added):
        summarised = summarise_if_large(root / rel, root)  # the store's size bound holds for merged files too
        if summarised is not None:
            done.summarised[rel] = summarised


def _read_here(path: Path) -> tuple[list[Row], list[Problem]]:
    from kwiki.results.store import read_store

    return read_store(path, warn=False, summaries=True)


def _about(row: Row) -> str:
    if isinstance(row, ClaimRow):
        return f"claim {row.page}:{row.claim}"
    params = ",".join(f"{k}={v}" for k, v in sorted(row.params.items()))
    return f"record {row.artifact} {row.variant}[{params}] ({row.target})"
