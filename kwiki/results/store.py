"""The results store: every measured figure, appended to `results/<gpu-model>.jsonl` (committed).

One line per record of a run (`kind: "record"`) and one per claim verdict (`kind: "claim"`).
Each row names its series (kwiki.results.series): claims are judged over the runs of their series,
and `kwiki verify` compares each record's time with the last run on the same GPU model. The rows a
run appends are made by kwiki.verify.history; this module reads and appends them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from kwiki.core.errors import Problem
from kwiki.core.strict import Scalar
from kwiki.results.mechanism import MechanismEvidence
from kwiki.results.storelines import RESULTS_DIR, parse_line, unreadable
from kwiki.wiki.model import Gate, Provenance

STORE_VERSION = 1


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
    mechanism: MechanismEvidence | None = None  # the variant's SASS check on the binary that ran (kwiki.verify.sass)


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


def read_store(path: Path, *, warn: bool = True) -> tuple[list[RecordRow | ClaimRow], list[Problem]]:
    """All valid rows of one store file, and a warning for each line that is not one.

    With `warn`, each such warning is also logged, so that `verify` and `build`, which skip the
    line, say so (`kwiki check` lists them through kwiki.results.storelines).
    """
    rows: list[RecordRow | ClaimRow] = []
    problems: list[Problem] = []
    if not path.exists():
        return rows, problems
    for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").split("\n"), 1):
        if not line.strip():
            continue
        data, problem = parse_line(path, lineno, line)
        if data is not None:
            try:
                rows.append((ClaimRow if data["kind"] == "claim" else RecordRow).model_validate(data))
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


def append_rows(path: Path, rows: list[Row]) -> None:
    """Append rows to a store file atomically (the file is rewritten whole, then renamed).

    Under a lock on the store file, read inside it: concurrent runs never lose each other's rows.
    """
    from kwiki.core.lock import hold_replaced
    from kwiki.core.writefile import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    new = "".join(json.dumps(r.model_dump(mode="json", exclude_none=True), sort_keys=True) + "\n" for r in rows)
    with hold_replaced(path):
        old = path.read_bytes()
        if old and not old.endswith(b"\n"):
            old += b"\n"
        write_atomic(path, old + new.encode("utf-8"))


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
