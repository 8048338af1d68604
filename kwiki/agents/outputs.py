"""The documents `kwiki query`, `show`, `tags` and the MCP tools print, as pydantic models.

`kwiki schema` writes their JSON Schema (schema/query.schema.json, show.schema.json,
tags.schema.json); the MCP server returns them as typed, structured tool outputs. The data
itself is built by kwiki/agents/views.py (plain dicts, stored by the index).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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


class GateView(_Out):
    """A gate a claim's figure failed."""

    name: str = Field(description="the gate: physical, ...")
    reason: str = Field(description="why, in one line")


class MeasuredView(_Out):
    """The latest figure `kwiki verify` measured for a claim."""

    value: float | None
    unit: str | None
    spread: float | None = Field(description="relative run-to-run band of the figure over its runs (blocks written "
                                             "before verdicts over runs: that run's half-spread)")
    change: str | None = Field(description="the latest run against its series: new (its first run), same (inside the "
                                            "run-to-run band), faster or slower (outside it: drifted); blocks written "
                                            "before verdicts over runs: against the previous run, or ambiguous")
    detail: str | None
    provenance: dict[str, Any] | None = Field(description="gpu, driver, cuda, date, commit, ... of the run")
    runs: int | None = Field(default=None, description="runs of the claim's series that `value` is the median of "
                                                        "(null: written before verdicts over runs)")
    range: list[float] | None = Field(default=None, description="lowest and highest figure over those runs")
    drift: float | None = Field(default=None, description="relative move of the latest run from the series median, "
                                                          "set only when outside the run-to-run band")
    provisional: bool = Field(default=False, description="fewer runs than a verdict needs (3): not verified")
    gates: list[GateView] = Field(default_factory=list,
                                  description="gates that refused the figure (value is then null)")


class ClaimView(_Out):
    """A claim with its latest measurement and verdict."""

    id: str
    statement: str
    metric: str
    unit: str
    claimed: ClaimedView
    measured: MeasuredView | None = Field(description="null until kwiki verify measured the claim")
    verdict: str | None = Field(
        description="reproduced, better, worse, failed, not-applicable, ... or null if never measured")
    gpu: str | None = Field(description="GPU of the latest measurement")
    date: str | None = Field(description="date of the latest measurement")
    traceable: bool | None = Field(default=None, description="whether the results store holds the runs the measured "
                                                             "figure names, with its value and verdict (null: not "
                                                             "measured); an untraceable figure is never verified")
    untraceable: str | None = Field(default=None, description="why the measured figure does not trace, in one line")


def _state() -> Any:
    return Field(default=None, description="where the page stands: untraceable, not-reproduced, drifted, "
                                           "provisional, verified, measured or not-measured (untraceable: its "
                                           "measurements block does not trace to the results store, so nothing "
                                           "on it counts as verified)")


def _untraceable() -> Any:
    return Field(default_factory=list, description="why the page's measurements block does not trace to the "
                                                   "results store, one line each (empty: it traces)")


class QueryResult(_Out):
    """A page that matched a query."""

    id: str
    title: str
    path: str = Field(description="page file, relative to the project root")
    type: str
    tags: list[str]
    architectures: list[str]
    evidence_level: str = Field(description="effective level: spec < source-reported < measured < verified; "
                                            "'untraceable' when kwiki's measurements block does not trace to the "
                                            "results store (ranked as the author's own level)")
    state: str | None = _state()
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
    evidence_level: str = Field(description="effective level (kwiki's measurements win over the author's); "
                                            "'untraceable' when they do not trace to the results store")
    state: str | None = _state()
    untraceable: list[str] = _untraceable()
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
    state: str | None = _state()
    untraceable: list[str] = _untraceable()
    verified_on: str | None = Field(description="GPU of the latest kwiki verify run, null if never verified or if "
                                                "its measurements do not trace")
    date: str | None = Field(description="date of that run")
    claims: list[ClaimView]
