"""A verify run's rows for the results store (kwiki.results.store): one per record, one per claim verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kwiki.core.numbers import round_sig
from kwiki.results.record import PROTOCOL_VERSION
from kwiki.results.store import ClaimRow, RecordRow, Row, append_rows, change, last_records, read_store, store_path
from kwiki.results.summary import summarise_if_large
from kwiki.verify.sass import MechanismReport, evidence
from kwiki.verify.types import ClaimResult, Gating, Plan, RunOutcome
from kwiki.wiki.model import Provenance
from kwiki.wiki.verdict import NOT_MEASURED


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
        # past 16 MB: the runs nothing reads any more, summarised (the size bound); the runs this run's claims stand
        # on are kept whole, as the pages are about to name them
        summarise_if_large(path, root, also={run_id for c in claims for run_id in c.run_ids})
    return changes


def _record_rows(plan: Plan, outcomes: dict[str, list[RunOutcome]], common: dict[str, Any],
                 last: dict[tuple[str, str, str], RecordRow], changes: list[dict[str, Any]], series: dict[str, str],
                 gating: Gating | None, mechanism: MechanismReport | None = None) -> list[Row]:
    """One row per record of the run; notes each record's change against its last passing run."""
    rows: list[Row] = []
    evidenced: set[tuple[str, str, str]] = set()  # a variant's mechanism evidence: on its first record of the run
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
                first = (planned.name, o.target, r.variant) not in evidenced
                evidenced.add((planned.name, o.target, r.variant))
                rows.append(RecordRow(
                    **common, artifact=planned.name, artifact_hash=planned.hash, target=o.target,
                    variant=r.variant, params=r.params, figures=figs, spread=round_sig(spread, 3),
                    samples=r.timing.samples if r.timing else None, passed=r.check.passed,
                    registers=int(regs) if isinstance(regs, (int, float)) else None,
                    series=series.get(path_key), protocol=PROTOCOL_VERSION, gates=failed or None,
                    bytes_level=r.bytes_level if r.bytes_level != "dram" else None, sweep=o.sweep or None,
                    mechanism=evidence(mechanism.for_variant(planned.name, r.variant, o.target))
                    if mechanism and first else None))
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
