"""What `kwiki query`, `kwiki show` and the MCP tools print about a page, as plain data.

The index (kwiki/agents/index.py) calls `result_view` and `detail_view` once per page when it
reads the page, and stores their JSON; queries then print that JSON without importing
this module. kwiki/agents/outputs.py describes the same documents as pydantic models, for
`schema/query.schema.json`, `schema/show.schema.json` and the MCP tools' output types.

A claim is shown the same way everywhere::

    {"id", "statement", "metric", "unit",
     "claimed":  {"text", "value", "tolerance", "at_least", "at_most", "expect"},
     "measured": {"value", "unit", "spread", "change", "detail", "provenance",
                  "runs", "range", "drift", "provisional", "gates"} | null,
     "verdict": "reproduced" | ... | null, "gpu": str | null, "date": str | null,
     "traceable": bool | null, "untraceable": str | null}

`measured` is null until `kwiki verify` has written a measurement for the claim;
`verdict`, `gpu` and `date` come from that measurement (the latest one). Its `value` is the median
over the `runs` of the claim's series (`range`: the lowest and highest run); fewer than 3 runs and it
is `provisional`; `gates` lists the gates that refused its figure (then `value` is null).
`traceable` says whether the results store holds the runs the figure names (kwiki.verify.trace;
null when nothing was measured), `untraceable` why not. A page whose measurements block does not
trace has the state and the evidence level "untraceable", whatever the block says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kwiki import SCHEMA_VERSION
from kwiki.wiki.verdict import RUNS

if TYPE_CHECKING:
    from kwiki.verify.standing import Standing
    from kwiki.verify.trace import PageTrace
    from kwiki.wiki.model import Claim, MeasuredClaim, Measurements, PageMeta

NOT_MEASURED = "not-measured"  # kwiki.verify.standing.State.not_measured, the state of a page without a block


def claimed_view(claim: Claim) -> dict[str, Any]:
    return {
        "text": claim.describe(),
        "value": claim.value,
        "tolerance": claim.tolerance_or_default if claim.value is not None else None,
        "at_least": claim.at_least,
        "at_most": claim.at_most,
        "expect": claim.expect.value if claim.expect is not None else None,
    }


def measured_view(measured: MeasuredClaim | None) -> dict[str, Any] | None:
    if measured is None:
        return None
    prov = measured.provenance
    return {
        "value": measured.value,
        "unit": measured.unit,
        "spread": measured.spread,
        "change": measured.change,
        "detail": measured.detail,
        "provenance": prov.model_dump(mode="json", exclude_none=True) if prov is not None else None,
        "runs": measured.runs,
        "range": list(measured.range) if measured.range is not None else None,
        "drift": measured.drift,
        "provisional": measured.runs is not None and measured.runs < RUNS,
        "gates": [g.model_dump() for g in measured.gates or []],
    }


def claim_view(claim: Claim, block: Measurements | None, trace: PageTrace | None = None) -> dict[str, Any]:
    measured = block.claims.get(claim.id) if block is not None else None
    traceable = untraceable = None
    if measured is not None and trace is not None:
        untraceable = trace.untraceable(claim.id)
        traceable = untraceable is None
    verdict = gpu = date = None
    if block is not None and measured is not None:
        prov = measured.provenance
        verdict = measured.verdict.value
        gpu = prov.gpu if prov is not None else block.verified_on
        date = prov.date if prov is not None else block.date
    return {
        "id": claim.id,
        "statement": claim.statement,
        "metric": claim.metric.value,
        "unit": claim.unit,
        "claimed": claimed_view(claim),
        "measured": measured_view(measured),
        "verdict": verdict,
        "gpu": gpu,
        "date": date,
        "traceable": traceable,
        "untraceable": untraceable,
    }


def _state(meta: PageMeta, st: Standing | None, trace: PageTrace | None) -> tuple[str, str]:
    """(state, evidence level) of a page: from its standing, which knows whether its block traces."""
    if st is None:
        if meta.measurements is None:
            return NOT_MEASURED, meta.effective_evidence.value
        from kwiki.verify.standing import standing

        st = standing(meta, None, trace)
    return st.state.value, st.evidence


def result_view(meta: PageMeta, path: str, trace: PageTrace | None = None, st: Standing | None = None
                ) -> dict[str, Any]:
    """One entry of `kwiki query --json`'s `results`; `trace` and `st` (kwiki.verify.trace, .standing)
    say whether its measurements block traces, and where the page stands."""
    state, evidence = _state(meta, st, trace)
    return {
        "id": meta.id,
        "title": meta.title,
        "path": path,
        "type": meta.type.value,
        "tags": list(meta.tags),
        "architectures": list(meta.architectures),
        "evidence_level": evidence,
        "state": state,
        "summary": meta.summary,
        "claims": [claim_view(c, meta.measurements, trace) for c in meta.claims],
        "artifacts": dict(meta.artifacts),
    }


def detail_view(meta: PageMeta, path: str, trace: PageTrace | None = None, st: Standing | None = None
                ) -> dict[str, Any]:
    """`kwiki show --json` without the body (the index stores the body apart, for search)."""
    block = meta.measurements
    state, evidence = _state(meta, st, trace)
    return {
        "schema_version": SCHEMA_VERSION,
        "id": meta.id,
        "title": meta.title,
        "path": path,
        "type": meta.type.value,
        "evidence_level": evidence,
        "state": state,
        "untraceable": trace.reasons() if trace is not None else [],
        "front_matter": meta.model_dump(mode="json", exclude_unset=True),
        "claims": [claim_view(c, block, trace) for c in meta.claims],
        "measurements": None if block is None else {
            "evidence_level": block.evidence_level.value,
            "verified_on": block.verified_on,
            "date": block.date,
        },
    }


def measurements_view(detail: dict[str, Any]) -> dict[str, Any]:
    """`MeasurementsOutput` from a `detail_view` document."""
    block = detail.get("measurements") or {}
    return {
        "schema_version": detail["schema_version"],
        "id": detail["id"],
        "title": detail["title"],
        "path": detail["path"],
        "evidence_level": detail["evidence_level"],
        "state": detail.get("state"),
        "untraceable": detail.get("untraceable", []),
        "verified_on": None if detail.get("untraceable") else block.get("verified_on"),
        "date": block.get("date"),
        "claims": detail["claims"],
    }
