"""The results store: every measured figure, appended to `results/<gpu-model>.jsonl` (committed).

One line per record of a run (`kind: "record"`) and one per claim verdict (`kind: "claim"`).
Each row names its series (kwiki.verify.series): claims are judged over the runs of their series,
and `kwiki verify` compares each record's time with the last run on the same GPU model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from kwiki.core.errors import Problem
from kwiki.core.numbers import round_sig
from kwiki.core.strict import Scalar
from kwiki.verify.claims import ClaimResult
from kwiki.verify.gates import Gating
from kwiki.verify.plan import Plan
from kwiki.verify.record import PROTOCOL_VERSION
from kwiki.verify.run import RunOutcome
from kwiki.verify.sass import MechanismEvidence, MechanismReport, evidence
from kwiki.wiki.model import Gate, Provenance
from kwiki.wiki.verdict import NOT_MEASURED

RESULTS_DIR = "results"
STORE_VERSION = 1


class Row(Provenance):
    """Fields shared by every line of the store: a measurement's provenance, the run, the artifact."""

    store_version: int = STORE_VERSION
    kind: Literal["record", "claim"]
    run_id: str  # one verify run: '<date>T<time>Z-<random hex>-<short commit>'
    artifact: str
    series: str | None = None  # kwiki.verify.series key; rows written before series have none
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
    protocol: int | None = None  # kwiki.verify.record.PROTOCOL_VERSION of the run
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
    line, say so (`kwiki check` lists them through kwiki.verify.storelines).
    """
    from kwiki.verify.storelines import parse_line, unreadable

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


# ---------------------------------------------------------------- one run's rows


def record_run(root: Path, base: Provenance, run_id: str, date: str, plan: Plan,
               outcomes: dict[str, list[RunOutcome]], claims: list[ClaimResult], *, write: bool,
               series: dict[str, str] | None = None, gating: Gating | None = None,
               past: list[RecordRow] | None = None, mechanism: MechanismReport | None = None) -> list[dict[str, Any]]:
    """Compare each record with the last run on this GPU model, then append the run's rows (each with
    its series and failed gates) to the store when `write`; returns the records whose time moved.
    `past`: the store's record rows, when the caller has read them already (else they are read here).

    A claim's `change` comes from its series (kwiki.verify.series), not from here."""
    if not outcomes:
        return []
    # every row carries the run's provenance, with the full time of the run as its date
    common = {**base.model_dump(exclude={"artifact_hash"}), "date": date, "run_id": run_id}
    path = store_path(root, common["gpu"])
    old_rows = past if past is not None else read_store(path)[0]
    changes: list[dict[str, Any]] = []
    rows = (_record_rows(plan, outcomes, common, last_records(old_rows), changes, series or {}, gating, mechanism)
            + _claim_rows(plan, claims, common))
    if write and rows:
        append_rows(path, rows)
    return changes


def _record_rows(plan: Plan, outcomes: dict[str, list[RunOutcome]], common: dict[str, Any],
                 last: dict[tuple[str, str, str], RecordRow], changes: list[dict[str, Any]], series: dict[str, str],
                 gating: Gating | None, mechanism: MechanismReport | None = None) -> list[Row]:
    """One row per record of the run; notes each record's change against its last passing run."""
    rows: list[Row] = []
    for path_key, outs in sorted(outcomes.items()):
        planned = plan.artifacts[path_key]
        for o in outs:
            for r in o.records:
                failed = [f.as_gate() for f in gating.failed(r)] if gating else []
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
                    registers=int(regs) if isinstance(regs, (int, float)) else None,
                    series=series.get(path_key), protocol=PROTOCOL_VERSION, gates=failed or None,
                    bytes_level=r.bytes_level if r.bytes_level != "dram" else None,
                    mechanism=evidence(mechanism.for_variant(planned.name, r.variant, o.target))
                    if mechanism else None))
                for k in ("torch", "triton"):  # a Python artifact's record says what ran it
                    if isinstance(r.extra.get(k), str):
                        setattr(rows[-1], k, r.extra[k])
    return rows


def _claim_rows(plan: Plan, claims: list[ClaimResult], common: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for c in claims:
        if c.artifact is None or c.verdict in NOT_MEASURED:
            continue
        planned = plan.artifacts.get(c.artifact)
        rows.append(ClaimRow(
            **common, artifact=planned.name if planned else c.artifact, artifact_hash=planned.hash if planned else None,
            page=c.page, claim=c.claim, value=None if c.gates else round_sig(c.value), unit=c.unit,
            spread=None if c.gates else round_sig(c.spread, 3),
            verdict=c.verdict.value, change=c.change, series=c.series, gates=list(c.gates) or None,
            runs=c.runs, median=round_sig(c.median)))
    return rows
