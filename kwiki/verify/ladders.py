"""The ladder of the run `kwiki verify` is writing back: its records, its failed runs and the variants that do not
apply on its target (the ladder as data, and a ladder from the store: kwiki.results.ladders)."""

from __future__ import annotations

from kwiki.results.ladders import Entry, Ladder, Rung, about, ladder_of, profiled, record_clock, registers_of
from kwiki.results.record import Record
from kwiki.verify.gates import Gating
from kwiki.verify.plan import PlannedArtifact
from kwiki.verify.run import RunOutcome


def entry_of(record: Record, gating: Gating | None) -> Entry:
    """What a ladder needs of one record of this run, with the gates it failed."""
    mhz, capped = record_clock(record)
    figures = record.figures()
    return Entry(record.variant, dict(record.params), record.check.passed,
                 figures if record.timing is not None or record.roof is not None else {},
                 record.timing.spread if record.timing else None, registers_of(record.extra.get("registers")),
                 mhz, capped, [f.as_gate() for f in gating.failed(record)] if gating else [],
                 profiled=profiled(figures, record.bytes_level))


def from_run(planned: PlannedArtifact, outcomes: list[RunOutcome], gating: Gating | None = None) -> Ladder:
    """The ladder of the run `kwiki verify` just made: its records, failed runs and the variants that do
    not apply on its target."""
    m = planned.manifest
    assert m is not None
    entries = [entry_of(r, gating) for o in outcomes for r in o.records]
    ladder = ladder_of(m, entries, path=planned.path, target=planned.run_target)
    for o in outcomes:
        if o.status != "ok":
            ladder.others.append(Rung(variant=",".join(o.variants), status="run-failed",
                                      note=f"run {o.status}: {o.message[:120]}"))
    for name in planned.not_applicable:
        v = m.variant(name)
        ladder.others.append(Rung(
            variant=name, **about(v), status="not-applicable",
            note=f"not applicable on {planned.run_target} (targets {', '.join(v.targets) if v else '?'})"))
    return ladder
