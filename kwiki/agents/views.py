"""What `kwiki query`, `kwiki show` and the MCP tools print about a page, as plain data.

The index (kwiki/agents/index.py) calls `result_view` and `detail_view` once per page when it
reads the page, and stores their JSON; queries then print that JSON without importing
this module. kwiki/agents/outputs.py describes the same documents as pydantic models, for
`schema/query.schema.json`, `schema/show.schema.json` and the MCP tools' output types.

Every document is compact: a field that is null, an empty list or an empty mapping is left out
(an absent `measured` means never measured, an absent `evidence` means "goal"). A claim is shown the
same way everywhere::

    {"id", "statement", "metric", "unit",
     "claimed":  {"text", "value"?, "tolerance"?, "at_least"?, "at_most"?, "expect"?},
     "measured"?: {"value"?, "unit"?, "spread"?, "change"?, "detail"?, "run"?, "artifact_hash"?,
                   "runs"?, "range"?, "drift"?, "provisional"?: true, "gates"?},
     "verdict"?: "reproduced" | ..., "traceable"?: bool, "untraceable"?: str, "code_changed"?: str,
     "evidence"?: "spec" | "source-reported", "conditions"?: {"gpu", "arch", "shape", ...},
     "source"?: {"id", "title"?, "url"?, "path"?}, "contradicted_by"?: {"claim", "page"?, "note"}}

`evidence`, `conditions` and `source` say where a figure comes from and where it holds, so a B200
contest figure and an H200 measurement never look alike; `contradicted_by` marks an outside figure
that our own measurement contradicts (history: it never counts towards the page's state).

`measured` is there once `kwiki verify` has written a measurement for the claim; `verdict` comes
from it. `measured.run` names the run it comes from (the results store's run id), and the document's
`runs` maps each run to its provenance (GPU, driver, CUDA, date, commit, ...) once, however many
claims it measured. Its `value` is the median over the `runs` of the claim's series (`range`: the
lowest and highest run); fewer than 3 runs and it is `provisional`; `gates` lists the gates that
refused its figure (then there is no `value`). `traceable` says whether the results store holds the
runs the figure names (kwiki.results.trace), `untraceable` why not. A page whose measurements block
does not trace has the state and the evidence level "untraceable", whatever the block says.
`code_changed` says that the figure is of earlier code: the claim's artifact has changed since the runs of its
series (kwiki.results.freshness), so the figure may not describe the code the page links to until `kwiki verify` runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kwiki import SCHEMA_VERSION
from kwiki.wiki.verdict import RUNS

if TYPE_CHECKING:
    from kwiki.results.standing import Standing
    from kwiki.results.trace import PageTrace
    from kwiki.wiki.model import Claim, MeasuredClaim, Measurements, PageMeta

NOT_MEASURED = "not-measured"  # kwiki.results.standing.State.not_measured, the state of a page without a block


def compact(value: Any) -> Any:
    """`value` without nulls, empty lists and empty mappings, at any depth (False and 0 stay)."""
    if isinstance(value, dict):
        out = {k: compact(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [compact(v) for v in value]
    return value


def _compact(doc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = compact(doc)
    return out


def claimed_view(claim: Claim) -> dict[str, Any]:
    return _compact({
        "text": claim.describe(),
        "value": claim.value,
        "tolerance": claim.tolerance_or_default if claim.value is not None else None,
        "at_least": claim.at_least,
        "at_most": claim.at_most,
        "expect": claim.expect.value if claim.expect is not None else None,
    })


def run_key(measured: MeasuredClaim, block: Measurements | None = None) -> str | None:
    """The run a measured figure comes from: the latest of its series' runs (the results store's run id);
    for blocks written before series, 'gpu date commit' of its provenance (or of the block)."""
    if measured.run_ids:
        return measured.run_ids[-1]
    prov = measured.provenance
    if prov is not None:
        return " ".join(filter(None, (prov.gpu, prov.date, prov.commit)))
    if block is not None:
        return " ".join(filter(None, (block.verified_on, block.date))) or None
    return None


def run_provenance(measured: MeasuredClaim, block: Measurements | None = None) -> dict[str, Any]:
    """What `runs[run_key]` says: the provenance of the run, without what differs per artifact."""
    prov = measured.provenance
    if prov is not None:
        return prov.model_dump(mode="json", exclude_none=True, exclude={"artifact_hash"})
    return _compact({"gpu": block.verified_on if block else None, "date": block.date if block else None})


def runs_view(block: Measurements | None) -> dict[str, dict[str, Any]]:
    """Each run a page's measured figures come from, once: run key -> provenance."""
    if block is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for measured in block.claims.values():
        key = run_key(measured, block)
        if key is not None and key not in out:
            out[key] = run_provenance(measured, block)
    return dict(sorted(out.items()))


def measured_view(measured: MeasuredClaim | None, block: Measurements | None = None) -> dict[str, Any] | None:
    if measured is None:
        return None
    prov = measured.provenance
    return _compact({
        "value": measured.value,
        "unit": measured.unit,
        "spread": measured.spread,
        "change": measured.change,
        "detail": measured.detail,
        "run": run_key(measured, block),
        "artifact_hash": prov.artifact_hash if prov is not None else None,
        "runs": measured.runs,
        "range": list(measured.range) if measured.range is not None else None,
        "drift": measured.drift,
        "provisional": True if measured.runs is not None and measured.runs < RUNS else None,
        "boards": [b.model_dump(mode="json") for b in measured.boards or []],
        "board_spread": round(s, 4) if (s := measured.board_spread) is not None else None,
        "gates": [g.model_dump() for g in measured.gates or []],
    })


def sources_of(meta: PageMeta) -> dict[str, dict[str, Any]]:
    """The page's sources by id, as a claim shows the one it cites: id, title, url, path."""
    out: dict[str, dict[str, Any]] = {}
    for s in meta.sources:
        if isinstance(s, str):
            out[s] = {"id": s}
        else:
            out[s.id] = compact({"id": s.id, "title": s.title, "url": s.url, "path": s.path})
    return out


def claim_view(claim: Claim, block: Measurements | None, trace: PageTrace | None = None,
               sources: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A claim with its latest measurement; `sources` (sources_of) resolves the source it cites."""
    from kwiki.results.states import claim_word

    measured = block.claims.get(claim.id) if block is not None else None
    caught = trace.caught().get(claim.id) if trace is not None else None  # where a variant it compares was caught
    changed = trace.changed.get(claim.id) if trace is not None and measured is not None else None
    traceable = untraceable = None
    if measured is not None and trace is not None:
        untraceable = trace.untraceable(claim.id)
        traceable = untraceable is None
    source = None
    if claim.source:
        source = (sources or {}).get(claim.source) or {"id": claim.source}
    return _compact({
        "id": claim.id,
        "statement": claim.statement,
        "metric": claim.metric.value,
        "unit": claim.unit,
        "evidence": claim.evidence if claim.evidence != "goal" else None,
        "conditions": claim.conditions.model_dump(mode="json", exclude_none=True),
        "source": source,
        "contradicted_by": (claim.contradicted_by.model_dump(mode="json", exclude_none=True)
                            if claim.contradicted_by is not None else None),
        "claimed": claimed_view(claim),
        "measured": measured_view(measured, block),
        "verdict": measured.verdict.value if measured is not None else None,
        # the claim's state in words (kwiki.results.states): 'below goal by 4.3%', 'reproduced, improved'
        "state": claim_word(claim, measured, caught)[0] if measured is not None else None,
        "caught": caught,
        "code_changed": changed,
        "traceable": traceable,
        "untraceable": untraceable,
    })


def _state(meta: PageMeta, st: Standing | None, trace: PageTrace | None) -> tuple[str, str, str | None]:
    """(state, evidence level, the state in one line) of a page: from its standing, which knows whether its block
    traces. The line is the one the site's page shows, with why a page is not verified (records without a passing
    profile audit, claims not reproduced, below goal, drifted, fewer runs than a verdict needs); None for a page
    without a measurements block."""
    if st is None:
        if meta.measurements is None:
            return NOT_MEASURED, meta.effective_evidence.value, None
        from kwiki.results.standing import standing

        st = standing(meta, None, trace)
    return st.state.value, st.evidence, st.summary()


def result_view(meta: PageMeta, path: str, trace: PageTrace | None = None, st: Standing | None = None
                ) -> dict[str, Any]:
    """One entry of `kwiki query --json --detail full`'s `results`; `trace` and `st` (kwiki.results.trace,
    .standing) say whether its measurements block traces, and where the page stands. The brief entry
    (the default) is cut from it at query time (kwiki.agents.query.brief)."""
    state, evidence, reason = _state(meta, st, trace)
    return _compact({
        "id": meta.id,
        "title": meta.title,
        "path": path,
        "type": meta.type.value,
        "tags": list(meta.tags),
        "architectures": list(meta.architectures),
        "ops": list(meta.applies_to_ops),
        "evidence_level": evidence,
        "state": state,
        "state_reason": reason,
        "summary": meta.summary,
        "claims": [claim_view(c, meta.measurements, trace, sources_of(meta)) for c in meta.claims],
        "runs": runs_view(meta.measurements),
        "artifacts": dict(meta.artifacts),
    })


# front-matter fields `detail_view` gives elsewhere: the claims (with their measurements) and the block
SHOWN_APART = frozenset({"claims", "measurements"})


def detail_view(meta: PageMeta, path: str, trace: PageTrace | None = None, st: Standing | None = None
                ) -> dict[str, Any]:
    """`kwiki show --json` without the body (the index stores the body apart, for search). Each claim
    once, with its measurement; each run's provenance once, in `runs`."""
    block = meta.measurements
    state, evidence, reason = _state(meta, st, trace)
    front = meta.model_dump(mode="json", exclude_unset=True, exclude=set(SHOWN_APART))
    return {"schema_version": SCHEMA_VERSION, **compact({
        "id": meta.id,
        "title": meta.title,
        "path": path,
        "type": meta.type.value,
        "evidence_level": evidence,
        "state": state,
        "state_reason": reason,
        "untraceable": trace.reasons() if trace is not None else [],
        "front_matter": front,
        "claims": [claim_view(c, block, trace, sources_of(meta)) for c in meta.claims],
        "measurements": None if block is None else {
            "evidence_level": block.evidence_level.value,
            "verified_on": block.verified_on,
            "date": block.date,
        },
        "runs": runs_view(block),
    })}


def measurements_view(detail: dict[str, Any]) -> dict[str, Any]:
    """`MeasurementsOutput` from a `detail_view` document."""
    block = detail.get("measurements") or {}
    return _compact({
        "schema_version": detail["schema_version"],
        "id": detail["id"],
        "title": detail["title"],
        "path": detail["path"],
        "evidence_level": detail["evidence_level"],
        "state": detail.get("state"),
        "state_reason": detail.get("state_reason"),
        "untraceable": detail.get("untraceable", []),
        "verified_on": None if detail.get("untraceable") else block.get("verified_on"),
        "date": block.get("date"),
        "claims": [_unit_once(c) for c in detail.get("claims", [])],
        "runs": detail.get("runs", {}),
    })


def _unit_once(claim: dict[str, Any]) -> dict[str, Any]:
    """A claim whose measured figure's unit, when it is the claim's own, is not said twice."""
    measured = claim.get("measured")
    if not measured or measured.get("unit") != claim.get("unit"):
        return claim
    return {**claim, "measured": {k: v for k, v in measured.items() if k != "unit"}}


# front-matter fields `page_view` leaves out: at its top level already, or what get_measurements returns
PAGE_APART = frozenset({"id", "title", "type", "claims", "measurements"})


def page_view(detail: dict[str, Any]) -> dict[str, Any]:
    """The MCP tool `get_page` (PageOutput) from a `detail_view` document: front matter and body, the claims as ids
    only (their figures, verdicts and runs are what get_measurements returns), nothing given twice."""
    front = {k: v for k, v in (detail.get("front_matter") or {}).items() if k not in PAGE_APART}
    return _compact({
        "schema_version": detail["schema_version"],
        "id": detail["id"],
        "title": detail["title"],
        "path": detail["path"],
        "type": detail["type"],
        "evidence_level": detail["evidence_level"],
        "state": detail.get("state"),
        "state_reason": detail.get("state_reason"),
        "claims": [c["id"] for c in detail.get("claims", [])],
        "front_matter": front,
        "body": detail.get("body"),
    })
