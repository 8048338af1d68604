"""Claims across GPU models: for one page, each claim's latest verdict and median on every GPU model a store holds.

The data behind "does this hold on my card?": a column per GPU model found in the claim rows of the page (ours in
`results/*.jsonl`, and each merged origin's, kwiki.results.merge), a row per claim. A cell is the latest claim row
of that claim on that model, ours first (a merged row never stands in for a local verdict), with its origin; a claim
whose conditions name another GPU model, or an architecture that model cannot run, is not applicable there (not
failed); a model with no row for a claim is not measured.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kwiki.core.arch import parse_arch
from kwiki.results.merge import LOCAL, stores
from kwiki.results.store import ClaimRow
from kwiki.results.storelines import committed, read_text
from kwiki.wiki.model import Claim

NOT_APPLICABLE = "not-applicable"
NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Cell:
    """One claim on one GPU model."""

    verdict: str  # a verdict of the claim row, NOT_APPLICABLE or NOT_MEASURED
    median: float | None = None  # over the runs the verdict stood on (this run's value where no median was kept)
    unit: str | None = None
    runs: int | None = None
    origin: str | None = None  # 'local' or the merged origin the row came from
    run_id: str | None = None
    date: str | None = None
    why: str = ""

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v not in (None, "")}


@dataclass(frozen=True)
class Matrix:
    """Columns: GPU models (as the rows name them), in name order; rows: claim id -> one cell per model."""

    models: list[str]
    cells: dict[str, list[Cell]]

    def as_json(self) -> dict[str, Any]:
        return {"models": self.models, "claims": {c: [x.as_json() for x in row] for c, row in self.cells.items()}}


def model_name(gpu: str) -> str:
    """'NVIDIA H200' -> 'H200': a column's heading."""
    return gpu.removeprefix("NVIDIA ").strip() or gpu


def claim_rows(root: Path, page: str) -> list[tuple[str, ClaimRow]]:
    """(origin, row) of every claim row of `page` here, ours first."""
    out = []
    for origin, path in stores(root):
        stat = path.stat()
        out += [(origin, r) for r in _claims(str(path), stat.st_mtime_ns, stat.st_size).get(page, [])]
    return out


@functools.lru_cache(maxsize=64)
def _claims(path: str, mtime_ns: int, size: int) -> dict[str, list[ClaimRow]]:
    """The claim rows of one store file by page (measured on a GPU), read once per version of the file: a site
    build asks for every page's."""
    out: dict[str, list[ClaimRow]] = {}
    try:
        text = read_text(Path(path))
    except OSError:
        return out  # kwiki check names the file (kwiki.results.storelines.store_problems)
    for _, data, _ in committed(Path(path), text):
        if data is None or data.get("kind") != "claim":
            continue
        try:
            row = ClaimRow.model_validate(data)
        except ValidationError:
            continue  # kwiki check reports the line (kwiki.results.storelines)
        if row.gpu != "host":
            out.setdefault(row.page, []).append(row)
    return out


def applies(claim: Claim, gpu: str, arch: str | None) -> str:
    """Why `claim` does not apply on that GPU model ('' when it does)."""
    cond = claim.conditions
    if cond.gpu and cond.gpu.lower() not in gpu.lower():
        return f"the claim is stated for {cond.gpu}"
    if cond.arch and arch:
        try:
            if not parse_arch(cond.arch).runs_on(parse_arch(arch).cc):
                return f"the claim is for {cond.arch}; {model_name(gpu)} is {arch}"
        except ValueError:
            return ""
    return ""


def _rank(origin: str, row: ClaimRow) -> tuple[bool, str, str]:
    return origin == LOCAL, row.date, row.run_id


def matrix(root: Path, page: str, claims: list[Claim]) -> Matrix:
    """The page's claims (those kwiki measures) by GPU model."""
    rows = claim_rows(root, page)
    models = sorted({r.gpu for _, r in rows}, key=model_name)
    arch = {r.gpu: r.arch for _, r in rows if r.arch}
    latest: dict[tuple[str, str], tuple[str, ClaimRow]] = {}
    for origin, row in rows:
        key = (row.claim, row.gpu)
        held = latest.get(key)
        if held is None or _rank(origin, row) >= _rank(*held):  # ours first, then the latest
            latest[key] = (origin, row)
    cells: dict[str, list[Cell]] = {}
    for claim in claims:
        if claim.measure is None:
            continue
        line = []
        for gpu in models:
            why = applies(claim, gpu, arch.get(gpu))
            found = latest.get((claim.id, gpu))
            if why:
                line.append(Cell(NOT_APPLICABLE, why=why))
            elif found is None:
                line.append(Cell(NOT_MEASURED))
            else:
                origin, row = found
                line.append(Cell(row.verdict, row.median if row.median is not None else row.value, row.unit, row.runs,
                                 origin, row.run_id, row.date))
        cells[claim.id] = line
    return Matrix([model_name(m) for m in models], cells)
