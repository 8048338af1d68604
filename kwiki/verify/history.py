"""The results store: every measured figure, appended to `results/<gpu-model>.jsonl` (committed).

One line per record of a run (`kind: "record"`) and one per claim verdict (`kind: "claim"`).
`kwiki verify` compares each new figure with the last run on the same GPU model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from kwiki.core.errors import Problem
from kwiki.core.numbers import round_sig
from kwiki.core.strict import Scalar
from kwiki.verify.claims import ClaimResult
from kwiki.verify.plan import Plan
from kwiki.verify.run import RunOutcome
from kwiki.wiki.model import Provenance
from kwiki.wiki.verdict import NOT_MEASURED

RESULTS_DIR = "results"
STORE_VERSION = 1


class Row(Provenance):
    """Fields shared by every line of the store: a measurement's provenance, the run, the artifact."""

    store_version: int = STORE_VERSION
    kind: Literal["record", "claim"]
    run_id: str  # one verify run: '<date>T<time>Z-<short commit>'
    artifact: str


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


class ClaimRow(Row):
    kind: Literal["claim"] = "claim"
    page: str
    claim: str
    value: float | None = None
    unit: str | None = None
    spread: float | None = None
    verdict: str
    change: str | None = None


def gpu_slug(gpu: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200': the store file of that GPU model."""
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "unknown-gpu"


def store_path(root: Path, gpu: str) -> Path:
    return root / RESULTS_DIR / f"{gpu_slug(gpu)}.jsonl"


def read_store(path: Path) -> tuple[list[RecordRow | ClaimRow], list[Problem]]:
    """All valid rows of one store file, and a problem for each line that is not one."""
    rows: list[RecordRow | ClaimRow] = []
    problems: list[Problem] = []
    if not path.exists():
        return rows, problems
    for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            model = ClaimRow if data.get("kind") == "claim" else RecordRow
            rows.append(model.model_validate(data))
        except (ValueError, AttributeError, ValidationError) as exc:
            problems.append(Problem(str(path), lineno, "results", f"unreadable result row: {str(exc)[:100]}"))
    return rows, problems


def read_all(root: Path) -> list[RecordRow | ClaimRow]:
    rows: list[RecordRow | ClaimRow] = []
    directory = root / RESULTS_DIR
    if directory.is_dir():
        for path in sorted(directory.glob("*.jsonl")):
            rows.extend(read_store(path)[0])
    return rows


def append_rows(path: Path, rows: list[Row]) -> None:
    """Append rows to a store file atomically (the file is rewritten whole, then renamed)."""
    from kwiki.core.writefile import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_bytes() if path.exists() else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    new = "".join(json.dumps(r.model_dump(mode="json", exclude_none=True), sort_keys=True) + "\n" for r in rows)
    write_atomic(path, old + new.encode("utf-8"))


def last_claims(rows: list[RecordRow | ClaimRow]) -> dict[tuple[str, str], ClaimRow]:
    """The latest measured row of each (page, claim)."""
    out: dict[tuple[str, str], ClaimRow] = {}
    for row in rows:
        if isinstance(row, ClaimRow) and row.value is not None:
            out[(row.page, row.claim)] = row
    return out


def last_records(rows: list[RecordRow | ClaimRow]) -> dict[tuple[str, str, str], RecordRow]:
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


# ---------------------------------------------------------------- one run's rows


def record_run(root: Path, base: Provenance, run_id: str, date: str, plan: Plan,
               outcomes: dict[str, list[RunOutcome]], claims: list[ClaimResult], *, write: bool) -> list[dict]:
    """Compare a run with the last one on this GPU model (setting each claim's `change`), then append
    its rows to the store when `write`; returns the records whose time moved, with the old time."""
    if not outcomes:
        return []
    # every row carries the run's provenance, with the full time of the run as its date
    common = {**base.model_dump(exclude={"artifact_hash"}), "date": date, "run_id": run_id}
    path = store_path(root, common["gpu"])
    old_rows, _ = read_store(path)
    previous = last_claims(old_rows)
    for c in claims:
        if c.value is None:
            continue
        prev = previous.get((c.page, c.claim))
        c.change = "new" if prev is None or prev.value is None else change(
            c.value, c.spread, prev.value, prev.spread, c.direction)
    changes: list[dict] = []
    rows = _record_rows(plan, outcomes, common, last_records(old_rows), changes) + _claim_rows(plan, claims, common)
    if write and rows:
        append_rows(path, rows)
    return changes


def _record_rows(plan: Plan, outcomes: dict[str, list[RunOutcome]], common: dict,
                 last: dict[tuple[str, str, str], RecordRow], changes: list[dict]) -> list[Row]:
    """One row per record of the run; notes each record's change against its last passing run."""
    rows: list[Row] = []
    for path_key, outs in sorted(outcomes.items()):
        planned = plan.artifacts[path_key]
        for o in outs:
            for r in o.records:
                figs = {k: v for k, v in ((k, round_sig(v)) for k, v in r.figures().items()) if v is not None}
                spread = r.timing.spread if r.timing else None
                prev = last.get((planned.name, r.variant, json.dumps(r.params, sort_keys=True)))
                if prev is not None and "time_us" in figs:
                    changes.append({
                        "artifact": planned.name, "variant": r.variant, "params": r.params,
                        "time_us": figs["time_us"], "previous_time_us": prev.figures["time_us"],
                        "change": change(figs["time_us"], spread, prev.figures["time_us"], prev.spread, "lower")})
                regs = r.extra.get("registers")
                rows.append(RecordRow(
                    **common, artifact=planned.name, artifact_hash=planned.hash, target=o.target,
                    variant=r.variant, params=r.params, figures=figs, spread=round_sig(spread, 3),
                    samples=r.timing.samples if r.timing else None, passed=r.check.passed,
                    registers=int(regs) if isinstance(regs, (int, float)) else None))
    return rows


def _claim_rows(plan: Plan, claims: list[ClaimResult], common: dict) -> list[Row]:
    rows: list[Row] = []
    for c in claims:
        if c.artifact is None or c.verdict in NOT_MEASURED:
            continue
        planned = plan.artifacts.get(c.artifact)
        rows.append(ClaimRow(
            **common, artifact=planned.name if planned else c.artifact, artifact_hash=planned.hash if planned else None,
            page=c.page, claim=c.claim, value=round_sig(c.value), unit=c.unit, spread=round_sig(c.spread, 3),
            verdict=c.verdict.value, change=c.change))
    return rows
