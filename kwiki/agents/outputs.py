"""The documents `kwiki query`, `show`, `tags` and the MCP tools print, as pydantic models.

`kwiki schema` writes their JSON Schema (schema/query.schema.json, show.schema.json,
tags.schema.json, ladder.schema.json); the MCP server returns them as typed, structured tool
outputs. The data itself is built by kwiki/agents/views.py (plain dicts, stored by the index),
kwiki/agents/query.py (brief search hits) and kwiki/agents/show.py (--ladder).

Every document is compact: what is null or empty is left out, so each optional field here has a
default, and a reader treats an absent field as null (or empty, or "goal" for `evidence`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kwiki.core.strict import Scalar
from kwiki.results.ladders import Mechanism, Rung


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClaimedView(_Out):
    """The figure a claim states."""

    text: str = Field(description="the claimed figure as text, e.g. '4.45 TB/s ±5%' or '>= 1.15 x'")
    value: float | None = Field(default=None, description="the claimed point value, if the claim gives one")
    tolerance: float | None = Field(default=None, description="relative tolerance of `value` (0.05 = 5%)")
    at_least: float | None = None
    at_most: float | None = None
    expect: str | None = Field(default=None, description="for outcome claims: how the run must end")


class GateView(_Out):
    """A gate a claim's figure failed."""

    name: str = Field(description="the gate: physical, ...")
    reason: str = Field(description="why, in one line")


class BoardView(_Out):
    """One board behind a claim's median."""

    board: str = Field(description="the GPU's UUID as NVML gives it")
    runs: int
    median: float


class MeasuredView(_Out):
    """The latest figure `kwiki verify` measured for a claim."""

    value: float | None = Field(default=None, description="absent when a gate refused the figure")
    unit: str | None = None
    spread: float | None = Field(default=None, description="relative run-to-run band of the figure over its runs "
                                                           "(blocks written before verdicts over runs: that run's "
                                                           "half-spread)")
    change: str | None = Field(default=None, description="the latest run against its series: new (its first run), "
                                                         "same (inside the run-to-run band), faster or slower "
                                                         "(outside it: drifted); blocks written before verdicts "
                                                         "over runs: against the previous run, or ambiguous")
    detail: str | None = None
    run: str | None = Field(default=None, description="the run the figure comes from: a key of the document's `runs`")
    artifact_hash: str | None = Field(default=None, description="hash of the artifact's sources in that run")
    runs: int | None = Field(default=None, description="runs of the claim's series that `value` is the median of "
                                                        "(absent: written before verdicts over runs)")
    range: list[float] | None = Field(default=None, description="lowest and highest figure over those runs")
    drift: float | None = Field(default=None, description="relative move of the latest run from the series median, "
                                                          "set only when outside the run-to-run band")
    provisional: bool = Field(default=False, description="fewer runs than a verdict needs (3): not verified")
    gates: list[GateView] = Field(default_factory=list, description="gates that refused the figure")
    boards: list[BoardView] = Field(default_factory=list, description="the boards (physical GPUs) those runs ran on")
    board_spread: float | None = Field(default=None, description="(highest - lowest board median) / the lowest; "
                                                                 "absent with one board")


class SourceView(_Out):
    """A source a claim cites: its id and where a reader opens it."""

    id: str
    title: str | None = None
    url: str | None = Field(default=None, description="http(s) URL, 'doi:...' or 'arXiv:...'")
    path: str | None = Field(default=None, description="a file of the repository, relative to its root")


class ContradictionView(_Out):
    """The measured claim that contradicts an outside figure."""

    claim: str
    page: str | None = Field(default=None, description="the page of that claim; absent: the same page")
    note: str


class ClaimView(_Out):
    """A claim with its latest measurement and verdict."""

    id: str
    statement: str
    metric: str
    unit: str
    claimed: ClaimedView
    measured: MeasuredView | None = Field(default=None, description="absent until kwiki verify measured the claim")
    verdict: str | None = Field(default=None, description="reproduced, better, worse, failed, not-applicable, ...; "
                                                          "absent if never measured")
    state: str | None = Field(default=None, description="the claim's state in words: the verdict, 'below goal by "
                                                        "4.3%' (beats what it compares with, misses its own goal: "
                                                        "not a failure), 'reproduced, improved', 'failed (caught in "
                                                        "its series)'")
    caught: str | None = Field(default=None, description="where a variant the claim compares failed its check or a "
                                                         "re-check in a run of its series: the claim is failed")
    code_changed: str | None = Field(default=None, description="set when the figure is of earlier code: the claim's "
                                                               "artifact changed since the runs of its series, so the "
                                                               "figure may not describe the current code until "
                                                               "kwiki verify measures it")
    traceable: bool | None = Field(default=None, description="whether the results store holds the runs the measured "
                                                             "figure names, with its value and verdict (absent: not "
                                                             "measured); an untraceable figure is never verified")
    untraceable: str | None = Field(default=None, description="why the measured figure does not trace, in one line")
    evidence: str = Field(default="goal", description="where the claimed figure comes from: 'goal' (a bound we set "
                                                      "and kwiki measures), 'spec' (documentation) or "
                                                      "'source-reported' (an outside measurement, see `source`)")
    conditions: dict[str, Any] = Field(default_factory=dict, description="where the claim holds: gpu, arch, shape, "
                                                                         "dtype, variant, note")
    source: SourceView | None = Field(default=None, description="the source the claim cites")
    contradicted_by: ContradictionView | None = Field(
        default=None, description="set on an outside figure our own measurement contradicts: kept as history, it "
                                  "never counts towards the page's state")


class BriefClaim(_Out):
    """A claim in a search hit: enough to answer from, nothing more (`get_measurements` has the rest)."""

    id: str
    claimed: str = Field(description="the claimed figure as text, e.g. '>= 1.15 x'")
    measured: float | None = Field(default=None, description="the measured figure (median over its runs)")
    unit: str | None = None
    verdict: str | None = Field(default=None, description="absent if never measured")
    provisional: bool = Field(default=False, description="fewer runs than a verdict needs (3)")
    state: str | None = Field(default=None, description="the claim's state in words where it is not its verdict: "
                                                        "'below goal by 4.3%' (not a failure), 'reproduced, "
                                                        "improved', 'failed (caught in its series)'")
    code_changed: bool = Field(default=False, description="the figure is of earlier code: its artifact changed since "
                                                          "its runs (get_measurements says how)")
    evidence: str = Field(default="goal", description="'spec' or 'source-reported' for a cited figure")


def _state() -> Any:
    return Field(default=None, description="where the page stands: untraceable, not-reproduced, drifted, "
                                           "below-goal, provisional, measured, verified or not-measured (verified "
                                           "only in this state; untraceable: its "
                                           "measurements block does not trace to the results store, so nothing "
                                           "on it counts as verified)")


def _state_reason(where: str = "") -> Any:
    return Field(default=None, description=(where + ": " if where else "") + "the page's state in one line, as its "
                                           "page on the site shows it: the GPU and date of its latest run, how many "
                                           "claims it reproduced, and why it is not verified (claims not reproduced, "
                                           "below goal or drifted, fewer runs than a verdict needs, records without "
                                           "a passing profile audit); absent for a page never measured")


def _untraceable() -> Any:
    return Field(default_factory=list, description="why the page's measurements block does not trace to the "
                                                   "results store, one line each (empty: it traces)")


def _runs() -> Any:
    return Field(default_factory=dict, description="run -> its provenance (gpu, driver, cuda, nvcc, date, commit, "
                                                   "...), once for every claim measured in it")


EVIDENCE_LEVEL = ("effective level: spec < source-reported < measured < verified; 'untraceable' when kwiki's "
                  "measurements block does not trace to the results store (ranked as the author's own level)")


class QueryResult(_Out):
    """A page that matched a query. Brief (the default): id, title, type, evidence level, state, summary and
    the claims that match the query (at most 3, `claims_total` counting all); `detail=full`: every field,
    every claim in full, each run's provenance once."""

    id: str
    title: str
    type: str
    evidence_level: str = Field(description=EVIDENCE_LEVEL)
    state: str | None = _state()
    state_reason: str | None = _state_reason("full")
    summary: str | None = None
    claims: list[ClaimView | BriefClaim] = Field(default_factory=list)
    claims_total: int | None = Field(default=None, description="brief: the page's claims, of which `claims` shows "
                                                               "those that match")
    path: str | None = Field(default=None, description="full: page file, relative to the project root")
    tags: list[str] = Field(default_factory=list, description="full: the page's tags")
    architectures: list[str] = Field(default_factory=list, description="full: the page's architectures")
    ops: list[str] = Field(default_factory=list, description="full: the operations the page applies to")
    runs: dict[str, dict[str, Any]] = _runs()
    artifacts: dict[str, str] = Field(default_factory=dict, description="full: artifact name -> directory or "
                                                                        "file, relative to the project root")


class PageRef(_Out):
    """A page by id and title."""

    id: str
    title: str


class QueryOutput(_Out):
    """`kwiki query --json` and the MCP tools `search_pages` and `find_techniques`."""

    schema_version: int
    detail: Literal["brief", "full"] = Field(default="brief", description="how much each result carries")
    total: int = Field(description="pages that matched, before the limit")
    results: list[QueryResult]
    covered: bool | None = Field(default=None, description="MCP tools: whether a page covers the lookup through its "
                                                           "title, tags, ops or summary (false: `results` is empty)")
    ignored_words: list[str] = Field(default_factory=list, description="words of `text` left out of the search "
                                                                       "(numbers, shapes, GPU names) because no page "
                                                                       "covering the rest has them")
    mentions: list[PageRef] = Field(default_factory=list, description="pages that only mention the words (in their "
                                                                      "body or claims), not counted in `total`")
    nearest_tags: list[str] = Field(default_factory=list, description="not covered: the tags and ops nearest to "
                                                                      "the lookup")
    nearest_pages: list[PageRef] = Field(default_factory=list, description="not covered: the pages naming most of "
                                                                           "its words in their title, tags or "
                                                                           "summary")


class MeasurementsSummary(_Out):
    evidence_level: str
    verified_on: str | None = None
    date: str


class ShowOutput(_Out):
    """`kwiki show ID --json` and the MCP tool `get_page`: a page's front matter (without its claims and
    measurements block, which `claims` shows once), its claims with their latest measurements, each run's
    provenance once, and its body (kwiki's generated tables left out: `claims` and `get_ladder` hold them)."""

    schema_version: int
    id: str
    title: str
    path: str
    type: str
    evidence_level: str = Field(description="effective level (kwiki's measurements win over the author's); "
                                            "'untraceable' when they do not trace to the results store")
    state: str | None = _state()
    state_reason: str | None = _state_reason()
    untraceable: list[str] = _untraceable()
    front_matter: dict[str, Any] = Field(description="the front matter as written, normalised (tags, architectures), "
                                                     "without `claims` and `measurements`")
    claims: list[ClaimView] = Field(default_factory=list)
    measurements: MeasurementsSummary | None = None
    runs: dict[str, dict[str, Any]] = _runs()
    body: str | None = Field(default=None, description="the Markdown body; each kwiki-generated region (claims "
                                                       "table, ladder, charts) is left out, its markers kept")


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
    state_reason: str | None = _state_reason()
    untraceable: list[str] = _untraceable()
    verified_on: str | None = Field(default=None, description="GPU of the latest kwiki verify run; absent if never "
                                                              "verified or if its measurements do not trace")
    date: str | None = Field(default=None, description="date of that run")
    claims: list[ClaimView] = Field(default_factory=list)
    runs: dict[str, dict[str, Any]] = _runs()


class LadderRow(Rung):
    """A variant on one shape (kwiki.results.ladders.Rung), with its occupancy and whether it is the shape's
    fastest; `rung`, `adds` and `description` are in the ladder's `variants`, once."""

    blocks_per_sm: int | None = Field(default=None, description="resident blocks per SM the occupancy calculator "
                                                                "gave the launch (as the record carries it)")
    warps_per_sm: int | None = Field(default=None, description="resident warps per SM, likewise")
    achieved_occupancy: float | None = Field(default=None, description="Nsight Compute's active warps over the "
                                                                       "SM's maximum (0-1), where profiled")
    best: bool = Field(default=False, description="the fastest measured row of its shape "
                                                  "(kwiki.results.ladders.best_per_shape)")


class VariantAbout(_Out):
    rung: int | None = Field(default=None, description="its place on the ladder (0: the library baseline)")
    adds: str | None = Field(default=None, description="what this rung adds (or the variant, in one line)")


class LadderGroup(_Out):
    label: str = Field(description="the shape as a reader writes it: '8192x8192, bf16', '4 GiB, u8'")
    params: dict[str, Scalar] = Field(default_factory=dict, description="full: the parameters")
    rows: list[LadderRow]
    rows_total: int | None = Field(default=None, description="without `shape`: the rows of the shape, of which "
                                                             "`rows` keeps the best, the baseline and the ceiling")


class AgentLadder(_Out):
    """One artifact's ladder in one run on one GPU model (kwiki.agents.ladderview)."""

    artifact: str
    title: str
    path: str | None = None
    target: str | None = None
    gpu: str | None = None
    date: str | None = None
    run_id: str | None = Field(default=None, description="the run in the results store (its provenance)")
    baseline: str | None = None
    ceiling: str | None = None
    variants: dict[str, VariantAbout] = Field(default_factory=dict, description="each variant's rung and what it "
                                                                                "adds, once")
    groups: list[LadderGroup]
    others: list[LadderRow] = Field(default_factory=list, description="rows of no shape: failed runs, variants "
                                                                      "not applicable on the target")
    mechanisms: dict[str, Mechanism] = Field(default_factory=dict, description="full: each variant's SASS check "
                                                                               "per kernel")


class ComparisonPoint(_Out):
    at: str = Field(description="the size: 'M=16'")
    fastest: str = Field(description="the variant with the shortest median time there")
    time_us: dict[str, float] = Field(description="each variant's median time there, microseconds (a variant not "
                                                  "measured there is absent)")


class AgentComparison(_Out):
    """A page's `compare`: variants of one artifact side by side over one size, the others held
    (kwiki.results.comparisons), from the medians of the series' last runs on one GPU model."""

    artifact: str
    gpu: str
    over: str = Field(description="the size parameter that varies")
    at: str = Field(description="the parameters every point holds: 'N=8192, K=8192'")
    runs: int = Field(description="the runs each median is over")
    fastest: str = Field(description="which variant is fastest where, in words")
    points: list[ComparisonPoint]


class LadderOutput(_Out):
    """`kwiki show ID --ladder --json` and the MCP tool `get_ladder`: the ladders of a page's artifacts, each
    from its latest run on each GPU model in the results store (absolute times and rates, ratios to the
    baseline and to the speed of light, occupancy, the best row of each shape flagged), grouped by shape."""

    schema_version: int
    id: str
    title: str
    shape: str | None = Field(default=None, description="the shape asked for: only groups whose label contains it")
    detail: Literal["brief", "full"] = Field(default="brief", description="full: parameters, clocks, Nsight "
                                                                          "Compute bytes and SASS checks too")
    ladders: list[AgentLadder]
    comparisons: list[AgentComparison] = Field(default_factory=list, description="the page's `compare` entries: "
                                                                                "the fastest variant at each size")


class PageOutput(_Out):
    """The MCP tool `get_page`: a page's front matter and body, without what `get_measurements` returns (its
    claims, their figures and the runs behind them) and without what is at the top level repeated in
    `front_matter`."""

    schema_version: int
    id: str
    title: str
    path: str
    type: str
    evidence_level: str = Field(description="effective level; 'untraceable' when kwiki's measurements do not trace")
    state: str | None = _state()
    state_reason: str | None = _state_reason()
    claims: list[str] = Field(default_factory=list, description="the page's claim ids: get_measurements(id) has "
                                                                "their figures")
    front_matter: dict[str, Any] = Field(description="the front matter as written, normalised, without `id`, "
                                                     "`title`, `type`, `claims` and `measurements`")
    body: str | None = Field(default=None, description="the Markdown body, kwiki's generated regions left out")
