"""What `kwiki query`, `kwiki show` and the MCP tools print about a page, and its schema.

The index (kwiki/index.py) calls `result_view` and `detail_view` once per page when it
reads the page, and stores their JSON; queries then print that JSON without importing
this module (or pydantic). The pydantic models here describe the same documents for
`schema/query.schema.json` and `schema/show.schema.json`, and type the MCP tools' outputs.

A claim is shown the same way everywhere::

    {"id", "statement", "metric", "unit",
     "claimed":  {"text", "value", "tolerance", "at_least", "at_most", "expect"},
     "measured": {"value", "unit", "spread", "change", "detail", "provenance"} | null,
     "verdict": "reproduced" | ... | null, "gpu": str | null, "date": str | null}

`measured` is null until `kwiki verify` has written a measurement for the claim;
`verdict`, `gpu` and `date` come from that measurement (the latest one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from . import SCHEMA_VERSION

if TYPE_CHECKING:
    from .model import Claim, MeasuredClaim, Measurements, PageMeta


# ---------------------------------------------------------------- builders (plain dicts)


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
    }


def claim_view(claim: Claim, block: Measurements | None) -> dict[str, Any]:
    measured = block.claims.get(claim.id) if block is not None else None
    prov = measured.provenance if measured is not None else None
    return {
        "id": claim.id,
        "statement": claim.statement,
        "metric": claim.metric.value,
        "unit": claim.unit,
        "claimed": claimed_view(claim),
        "measured": measured_view(measured),
        "verdict": measured.verdict.value if measured is not None else None,
        "gpu": (prov.gpu if prov is not None else block.verified_on) if measured is not None else None,  # type: ignore[union-attr]
        "date": (prov.date if prov is not None else block.date) if measured is not None else None,  # type: ignore[union-attr]
    }


def result_view(meta: PageMeta, path: str) -> dict[str, Any]:
    """One entry of `kwiki query --json`'s `results`."""
    return {
        "id": meta.id,
        "title": meta.title,
        "path": path,
        "type": meta.type.value,
        "tags": list(meta.tags),
        "architectures": list(meta.architectures),
        "evidence_level": meta.effective_evidence.value,
        "summary": meta.summary,
        "claims": [claim_view(c, meta.measurements) for c in meta.claims],
        "artifacts": dict(meta.artifacts),
    }


def detail_view(meta: PageMeta, path: str) -> dict[str, Any]:
    """`kwiki show --json` without the body (the index stores the body apart, for search)."""
    block = meta.measurements
    return {
        "schema_version": SCHEMA_VERSION,
        "id": meta.id,
        "title": meta.title,
        "path": path,
        "type": meta.type.value,
        "evidence_level": meta.effective_evidence.value,
        "front_matter": meta.model_dump(mode="json", exclude_unset=True),
        "claims": [claim_view(c, block) for c in meta.claims],
        "measurements": None if block is None else {
            "evidence_level": block.evidence_level.value,
            "verified_on": block.verified_on,
            "date": block.date,
        },
    }


# ---------------------------------------------------------------- models (schema, MCP outputs)


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClaimedView(_Out):
    """The figure a claim states."""

    text: str = Field(description="the claimed figure as text, e.g. '4.45 TB/s ±5%' or '>= 1.15 x'")
    value: float | None = Field(description="the claimed point value, if the claim gives one")
    tolerance: float | None = Field(description="relative tolerance of `value` (0.05 = 5%)")
    at_least: float | None
    at_most: float | None
    expect: str | None = Field(description="for outcome claims: how the run must end")


class MeasuredView(_Out):
    """The latest figure `kwiki verify` measured for a claim."""

    value: float | None
    unit: str | None
    spread: float | None = Field(description="relative half-spread of the figure in that run")
    change: str | None = Field(description="against the previous run on the same GPU: new, same, faster, slower, ambiguous")
    detail: str | None
    provenance: dict[str, Any] | None = Field(description="gpu, driver, cuda, date, commit, ... of the run")


class ClaimView(_Out):
    """A claim with its latest measurement and verdict."""

    id: str
    statement: str
    metric: str
    unit: str
    claimed: ClaimedView
    measured: MeasuredView | None = Field(description="null until kwiki verify measured the claim")
    verdict: str | None = Field(description="reproduced, better, worse, failed, not-applicable, ... or null if never measured")
    gpu: str | None = Field(description="GPU of the latest measurement")
    date: str | None = Field(description="date of the latest measurement")


class QueryResult(_Out):
    """A page that matched a query."""

    id: str
    title: str
    path: str = Field(description="page file, relative to the project root")
    type: str
    tags: list[str]
    architectures: list[str]
    evidence_level: str = Field(description="effective level: spec < source-reported < measured < verified")
    summary: str | None
    claims: list[ClaimView]
    artifacts: dict[str, str] = Field(description="artifact name -> directory or file, relative to the project root")


class QueryOutput(_Out):
    """`kwiki query --json`."""

    schema_version: int
    total: int = Field(description="pages that matched, before --limit")
    results: list[QueryResult]


class MeasurementsSummary(_Out):
    evidence_level: str
    verified_on: str | None
    date: str


class ShowOutput(_Out):
    """`kwiki show ID --json`: a page's front matter, claims with latest measurements, body."""

    schema_version: int
    id: str
    title: str
    path: str
    type: str
    evidence_level: str = Field(description="effective level (kwiki's measurements win over the author's)")
    front_matter: dict[str, Any] = Field(description="the front matter as written, normalised (tags, architectures)")
    claims: list[ClaimView]
    measurements: MeasurementsSummary | None
    body: str | None = Field(default=None, description="the Markdown body")


class TagCount(_Out):
    tag: str
    pages: int


class TagsOutput(_Out):
    """`kwiki tags --json`."""

    schema_version: int
    tags: list[TagCount]


class MeasurementsOutput(_Out):
    """The MCP tool `get_measurements`: a page's claims with their latest measured figures."""

    schema_version: int
    id: str
    title: str
    path: str
    evidence_level: str
    verified_on: str | None = Field(description="GPU of the latest kwiki verify run, null if never verified")
    date: str | None = Field(description="date of that run")
    claims: list[ClaimView]


def measurements_view(detail: dict[str, Any]) -> dict[str, Any]:
    """`MeasurementsOutput` from a `detail_view` document."""
    block = detail.get("measurements") or {}
    return {
        "schema_version": detail["schema_version"],
        "id": detail["id"],
        "title": detail["title"],
        "path": detail["path"],
        "evidence_level": detail["evidence_level"],
        "verified_on": block.get("verified_on"),
        "date": block.get("date"),
        "claims": detail["claims"],
    }
